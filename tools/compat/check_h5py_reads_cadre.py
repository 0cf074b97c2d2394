#!/usr/bin/env python3
"""Opens a model_dir written by Cadre's CheckpointManager with h5py and checks it against
checkpoint/FORMAT.md, value by value; the state file is parsed by TensorFlow.

Needs h5py and numpy (and TensorFlow for the state file; skipped without it); NOT run by
./dev test. The model_dir comes from a gtest run with CADRE_COMPAT_DIR set (see
tools/compat/README.md):

    CADRE_COMPAT_DIR=/tmp/cadre_compat build/tests/checkpoint/checkpoint_test \
        --gtest_filter='CompatFilesTest.*'
    python3 tools/compat/check_h5py_reads_cadre.py /tmp/cadre_compat/model_dir

The expected values repeat compat_model() of tests/checkpoint/compat_files_test.cc: change
both together. Exits 1 when anything differs.
"""
import os
import sys
import time

import h5py
import numpy as np

# The reader script users get (tools/cadre_ckpt) holds the CRC-32C this check shares.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cadre_ckpt"))
from cadre_checkpoint import crc32c  # noqa: E402

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)




def ramp(shape, scale, offset):
    n = int(np.prod(shape))
    values = np.arange(n, dtype=np.float32) * np.float32(scale) + np.float32(offset)
    return values.reshape(shape)


def expected_checkpoint(s):
    """compat_model(s) of compat_files_test.cc: dataset path -> (dtype attribute, value)."""
    bf16 = np.array([0x3F80, 0xC020, 0x4380], np.uint16)  # bfloat16 bits of 1, -2.5, 256
    variables = {
        "dense/kernel": ("float32", ramp((4, 3), 1, s)),
        "dense/bias": ("float64", np.array([0.5 + s, 1.0 + s, 1.5 + s], np.float64)),
        "Adam/iterations": ("int64", np.int64(s)),
        "counts": ("int32", np.array([[-1, 0], [1, 2**31 - 1]], np.int32)),
        "ids": ("int64", np.array([-(1 << 40), 0, s], np.int64)),
        "mask": ("bool", np.array([True, False, False, True])),
        "pixels": ("uint8", np.array([0, 128, 255], np.uint8)),
        "half": ("float16", np.array([1.0, -2.5, 65504.0], np.float16)),
        "brain": ("bfloat16", bf16),
        "big/kernel": ("float32", ramp((512, 1024), 1, s)),
        "embedding/table": ("float32", ramp((5, 2), 1, s)),
    }
    slots = {
        "dense/kernel/Adam/m": ("float32", ramp((4, 3), 0.25, s), "dense/kernel"),
        "embedding/table/Adam/v": ("float32", ramp((5, 2), 0.125, s), "embedding/table"),
    }
    expected = {"global_step": ("int64", np.int64(s))}
    expected.update({f"variables/{k}": v for k, v in variables.items()})
    expected.update({f"slots/{k}": v[:2] for k, v in slots.items()})
    expected["iterator/shard_0/position"] = ("int64", np.int64(s * 32))
    expected["iterator/shard_0/cursor"] = (
        "uint8", np.frombuffer(b"epoch=1;file=train-00001" + b"+" * (s // 100), np.uint8))
    expected["rng/global"] = (None, np.array([42, 7, s * 10], np.uint64))
    expected["rng/replica_0"] = (None, np.array([42, 8, s], np.uint64))
    slot_of = {f"slots/{k}": v[2] for k, v in slots.items()}
    return expected, slot_of


NUMPY_TYPE = {"float32": np.float32, "float64": np.float64, "int32": np.int32,
              "int64": np.int64, "uint8": np.uint8, "bool": np.bool_, "float16": np.float16,
              "bfloat16": np.uint16, None: np.uint64}


def check_string_attributes(f):
    """Every string attribute is fixed-length UTF-8 (FORMAT.md: never in the global heap)."""
    bad = []

    def visit(name, obj):
        for key in obj.attrs:
            kind = obj.attrs.get_id(key).get_type()
            if isinstance(kind, h5py.h5t.TypeStringID):
                if kind.is_variable_str() or kind.get_cset() != h5py.h5t.CSET_UTF8:
                    bad.append(f"{name}@{key}")

    visit("/", f)
    f.visititems(visit)
    check(not bad, f"string attributes fixed-length UTF-8 (bad: {bad})")


def check_file(path, step):
    with h5py.File(path, "r") as f:
        a = f.attrs
        check(a["format"] == b"cadre-checkpoint", f"format {a['format']!r}")
        check(a["format_version"] == 1 and a["format_version"].dtype == np.int64,
              f"format_version {a['format_version']!r} int64")
        check(isinstance(a["library_version"], bytes), f"library_version {a['library_version']!r}")
        created = a["created_unix_seconds"]
        check(created.dtype == np.float64 and abs(created - time.time()) < 86400,
              f"created_unix_seconds {created!r}")
        iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(created)))
        check(a["created"].decode() == iso, f"created {a['created']!r} == {iso}")
        check(a["global_step"] == step and a["global_step"].dtype == np.int64,
              f"root attribute global_step {a['global_step']!r}")
        check_string_attributes(f)

        expected, slot_of = expected_checkpoint(step)
        found = []
        f.visititems(lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset) else None)
        check(sorted(found) == sorted(expected),
              f"datasets: {len(found)}, extra {sorted(set(found) - set(expected))}, "
              f"missing {sorted(set(expected) - set(found))}")
        for name, (dtype, want) in sorted(expected.items()):
            if name not in f:
                continue
            ds = f[name]
            value = ds[()]
            ok = ds.dtype == NUMPY_TYPE[dtype] and ds.dtype.byteorder in "<=|"
            ok = ok and value.shape == np.shape(want) and np.array_equal(value, want)
            if dtype == "float16" or dtype == "float32":  # bitwise, -0.0 and all
                ok = ok and value.tobytes() == np.asarray(want).tobytes()
            check(ok, f"{name}: {ds.dtype} {ds.shape} values match")
            check(ds.attrs["crc32c"] == crc32c(value.tobytes()) and
                  ds.attrs["crc32c"].dtype == np.uint32,
                  f"{name}: crc32c attribute {ds.attrs['crc32c']:#010x} == CRC-32C of the bytes")
            if dtype is None:
                check("dtype" not in ds.attrs and ds.attrs["fields"] == b"seed,stream,offset",
                      f"{name}: no dtype attribute, fields {ds.attrs['fields']!r}")
            else:
                check(ds.attrs["dtype"].decode() == dtype, f"{name}: dtype attribute {dtype}")
            check(ds.attrs.get("slot_of", b"").decode() == slot_of.get(name, ""),
                  f"{name}: slot_of {ds.attrs.get('slot_of')!r}")
            plist = ds.id.get_create_plist()
            check(plist.get_layout() == h5py.h5d.CONTIGUOUS and plist.get_nfilters() == 0
                  and ds.chunks is None, f"{name}: contiguous, no filters")
            if ds.nbytes >= 1 << 20:
                offset = ds.id.get_offset()
                check(offset is not None and offset % 4096 == 0,
                      f"{name}: {ds.nbytes} bytes at file offset {offset} (4 KiB-aligned)")
        bits = f["variables/brain"][()].astype(np.uint32) << 16
        as_float = bits.view(np.float32).tolist()
        check(as_float == [1.0, -2.5, 256.0], f"bfloat16 bits as float32 {as_float}")
        meta = f["metadata"]
        check(isinstance(meta, h5py.Group) and len(meta) == 0
              and dict(meta.attrs) == {"strategy": b"ParameterServerStrategy",
                                       "topology": b"1 worker x 2 cpu, 2 ps"},
              f"metadata attributes {dict(meta.attrs)}")


def check_state_file(model_dir):
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
    except ImportError:
        print("skip state file: no TensorFlow")
        return
    state = tf.train.get_checkpoint_state(model_dir)  # TensorFlow's text-format parser
    check(state is not None, "tf.train.get_checkpoint_state parses the state file")
    if state is None:
        return
    names = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    check(os.path.basename(state.model_checkpoint_path) == "model.ckpt-200.h5",
          f"model_checkpoint_path {state.model_checkpoint_path}")
    check(names == ["model.ckpt-100.h5", "model.ckpt-200.h5"], f"all_model_checkpoint_paths {names}")
    times = list(state.all_model_checkpoint_timestamps)
    check(len(times) == 2 and times[0] <= times[1] and state.last_preserved_timestamp > 0,
          f"timestamps {times}, last_preserved_timestamp {state.last_preserved_timestamp}")


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else ""
    if not model_dir:
        sys.exit("usage: check_h5py_reads_cadre.py MODEL_DIR")
    check_state_file(model_dir)
    for step in (100, 200):
        path = os.path.join(model_dir, f"model.ckpt-{step}.h5")
        print(f"--- {path}")
        check_file(path, step)
    print(f"{len(failures)} failure(s)" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
