#!/usr/bin/env python3
"""Reads Cadre checkpoints with h5py and numpy alone: single files (format version 1) and
sharded checkpoints (version 2, whose variables live in parts that other tasks wrote; see
checkpoint/FORMAT.md, "Sharded checkpoints").

From the command line, PATH a model_dir (its latest checkpoint) or a checkpoint file:

    python3 tools/cadre_ckpt/cadre_checkpoint.py PATH            # name, dtype, shape of each
    python3 tools/cadre_ckpt/cadre_checkpoint.py PATH NAME...    # and each one's CRC-32C

As a module:

    from cadre_checkpoint import Checkpoint
    with Checkpoint("/tmp/m1g") as ckpt:
        print(ckpt.global_step, ckpt.names())
        table = ckpt.read("embedding/table")                 # the whole logical variable
        rows = ckpt.read("embedding/table", 1000, 2000)      # rows [1000, 2000) only

A row range reads only the slices that hold it. bfloat16 values come back as their uint16
bits, as FORMAT.md describes. Needs h5py and numpy.
"""
import json
import os
import sys

import h5py
import numpy as np


def _crc32c_table():
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli) of `data`, a byte at a time (slow: for small arrays)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ _TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _latest(model_dir):
    with open(os.path.join(model_dir, "checkpoint")) as state:
        for line in state:
            key, _, value = line.partition(":")
            if key.strip() == "model_checkpoint_path":
                return os.path.join(model_dir, json.loads(value.strip()))
    raise ValueError(f"{model_dir}: the state file names no latest checkpoint")


def _datasets(group):
    names = []
    group.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


class Checkpoint:
    """A checkpoint file, or a model_dir's latest; closes its files on close() or `with`."""

    def __init__(self, path):
        self.path = _latest(path) if os.path.isdir(path) else path
        self.file = h5py.File(self.path, "r")
        if _text(self.file.attrs.get("format", b"")) != "cadre-checkpoint":
            raise ValueError(f"{self.path} is not a Cadre checkpoint")
        self.format_version = int(self.file.attrs["format_version"])
        self.global_step = int(self.file["global_step"][()])
        self._own = {}  # name -> dataset path in this file
        for tree in ("variables", "slots"):
            if tree in self.file:
                for name in _datasets(self.file[tree]):
                    self._own[name] = f"{tree}/{name}"
        self._sharded = {}  # name -> (tree, table dataset)
        for tree in ("variables", "slots"):
            if f"sharded/{tree}" in self.file:
                for name in _datasets(self.file[f"sharded/{tree}"]):
                    self._sharded[name] = (tree, self.file[f"sharded/{tree}/{name}"])
        self.parts = []  # (file name, bytes, crc32c), by part index
        if "parts" in self.file:
            for k in range(len(self.file["parts"])):
                attrs = self.file[f"parts/{k}"].attrs
                self.parts.append((_text(attrs["file"]), int(attrs["bytes"]), int(attrs["crc32c"])))
        self._open_parts = {}

    def close(self):
        for part in self._open_parts.values():
            part.close()
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def names(self):
        return sorted(list(self._own) + list(self._sharded))

    def info(self, name):
        """(dtype attribute, shape, slot_of or None) of a variable or slot."""
        if name in self._own:
            ds = self.file[self._own[name]]
            slot_of = ds.attrs.get("slot_of")
            return _text(ds.attrs["dtype"]), ds.shape, _text(slot_of) if slot_of is not None else None
        tree, table = self._sharded[name]
        slot_of = table.attrs.get("slot_of")
        return (_text(table.attrs["variable_dtype"]),
                tuple(json.loads(_text(table.attrs["variable_shape"]))),
                _text(slot_of) if slot_of is not None else None)

    def _part(self, index):
        if index not in self._open_parts:
            name, size, _ = self.parts[index]
            path = os.path.join(os.path.dirname(self.path), name)
            if os.path.getsize(path) != size:
                raise ValueError(f"part {name} is not the size the manifest says ({size} bytes)")
            self._open_parts[index] = h5py.File(path, "r")
        return self._open_parts[index]

    def read(self, name, begin=None, end=None):
        """The value of `name` as a numpy array, or only rows [begin, end) of it."""
        if name in self._own:
            ds = self.file[self._own[name]]
            return ds[()] if begin is None else ds[begin:end]
        tree, table = self._sharded[name]
        _, shape, _ = self.info(name)
        slices = table[()]
        if len(shape) == 0:
            part, first, _ = slices[0]
            return self._part(int(part))[f"{tree}/{name}/rows-{first}"][()]
        begin = 0 if begin is None else begin
        end = shape[0] if end is None else min(end, shape[0])
        pieces = []
        for part, first, rows in slices:
            lo, hi = max(begin, first), min(end, first + rows)
            if lo < hi:
                ds = self._part(int(part))[f"{tree}/{name}/rows-{first}"]
                pieces.append(ds[lo - first:hi - first])
        return np.concatenate(pieces) if pieces else np.empty((0,) + tuple(shape[1:]))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    with Checkpoint(argv[1]) as ckpt:
        print(f"checkpoint {ckpt.path} (format {ckpt.format_version}, {len(ckpt.parts)} parts)")
        print(f"global_step {ckpt.global_step}")
        for name in argv[2:] or ckpt.names():
            dtype, shape, slot_of = ckpt.info(name)
            line = f"{name} {dtype} {list(shape)}"
            if argv[2:]:
                value = np.ascontiguousarray(ckpt.read(name))
                line += f" crc32c=0x{crc32c(value.tobytes()):08x}"
            print(line + (f" (slot of {slot_of})" if slot_of else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
