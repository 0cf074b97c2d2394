#!/usr/bin/env python3
"""Reads files written by Cadre with TensorFlow and TensorBoard and checks every value.

Needs TensorFlow and TensorBoard (pip install 'tensorflow-cpu==2.15.*' tensorboard); it is
NOT run by ./dev test. The files come from two gtests run with CADRE_COMPAT_DIR set (see
tools/compat/README.md):

    CADRE_COMPAT_DIR=/tmp/cadre_compat build/tests/io/io_test \
        --gtest_filter='TensorFlowFilesTest.Writes*For*'
    python3 tools/compat/check_tf_reads_cadre.py /tmp/cadre_compat

The expected values repeat those of tests/io/tensorflow_files_test.cc: change both together.
Exits 1 when anything differs.
"""
import glob
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads

import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.compat.proto import summary_pb2

tf.get_logger().setLevel("ERROR")  # summary_iterator's deprecation notice
# tf.compat.v1.summary.histogram warns that no TF2 default writer is set: none is wanted.
warnings.filterwarnings("ignore", message="Cannot activate TF2 compatibility support")

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


# --- TFRecord of tf.train.Example ---------------------------------------------------------


def cadre_example(r):
    """Record r of cadre_examples.tfrecord, as cadre_example() in tensorflow_files_test.cc."""
    ints = [r, -1000 * r - 1, 1 << (40 + r)]
    floats = [r + 0.25, -0.5 * r]
    name = b"" if r == 2 else b"cadre %d\x00\xff" % r
    varlen = [10 * r + j for j in range(r)] if r < 3 else None  # r = 3: absent
    return ints, floats, name, varlen


def check_examples(directory):
    path = os.path.join(directory, "cadre_examples.tfrecord")
    spec = {
        "ints": tf.io.FixedLenFeature([3], tf.int64),
        "floats": tf.io.FixedLenFeature([2], tf.float32),
        "name": tf.io.FixedLenFeature([], tf.string),
        "varlen": tf.io.VarLenFeature(tf.int64),
    }
    raw = list(tf.data.TFRecordDataset(path))  # checks each record's CRCs
    check(len(raw) == 4, f"TFRecordDataset reads {len(raw)} records of {path} (want 4)")
    for r, serialized in enumerate(raw):
        ints, floats, name, varlen = cadre_example(r)
        parsed = tf.io.parse_single_example(serialized, spec)
        got_ints = parsed["ints"].numpy().tolist()
        check(got_ints == ints, f"record {r} ints {got_ints} == {ints}")
        got_floats = parsed["floats"].numpy()
        want_floats = np.array(floats, np.float32)
        check(got_floats.tobytes() == want_floats.tobytes(),
              f"record {r} floats {got_floats.tolist()} == {want_floats.tolist()} (bitwise)")
        got_name = parsed["name"].numpy()
        check(got_name == name, f"record {r} name {got_name!r} == {name!r}")
        got_varlen = parsed["varlen"].values.numpy().tolist()
        check(got_varlen == (varlen or []), f"record {r} varlen {got_varlen} == {varlen or []}")
        # The same Example built with TensorFlow's protos serializes to Cadre's bytes.
        feature = {
            "ints": tf.train.Feature(int64_list=tf.train.Int64List(value=ints)),
            "floats": tf.train.Feature(float_list=tf.train.FloatList(value=floats)),
            "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[name])),
        }
        if varlen is not None:
            feature["varlen"] = tf.train.Feature(int64_list=tf.train.Int64List(value=varlen))
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        check(example.SerializeToString(deterministic=True) == serialized.numpy(),
              f"record {r} bytes equal TensorFlow's serialization (deterministic=True)")


# --- TensorBoard event file -------------------------------------------------------------


def tf_histogram(values):
    """The HistogramProto TensorFlow's own histogram summary op makes of `values`."""
    serialized = tf.compat.v1.summary.histogram("h", tf.constant(values, tf.float64)).numpy()
    return summary_pb2.Summary.FromString(serialized).value[0].histo


def check_histogram(tag, got, values):
    want = tf_histogram(values)
    for field in ("min", "max", "num", "sum", "sum_squares"):
        g, w = getattr(got, field), getattr(want, field)
        check(g == w, f"histogram {tag} {field} {g!r} == TensorFlow's {w!r}")
    check(list(got.bucket_limit) == list(want.bucket_limit),
          f"histogram {tag}: {len(got.bucket_limit)} bucket limits equal TensorFlow's "
          f"({len(want.bucket_limit)})")
    check(list(got.bucket) == list(want.bucket),
          f"histogram {tag}: bucket counts equal TensorFlow's (total {sum(got.bucket)})")


LOSS = {100 * k: 1.0 / (k + 1) for k in range(5)}
WEIGHTS = [-1.0, 0.0, 0.5, 2.0, 2.0]
ACTIVATIONS = [i * 0.01 - 3 for i in range(1000)]
NOTES = b"**hello** from step 400"


def check_events(directory):
    logdir = os.path.join(directory, "events")
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    check(len(files) == 1, f"one event file in {logdir}: {files}")
    if not files:
        return

    # The raw Event protos, as TensorFlow's summary_iterator reads them.
    events = list(tf.compat.v1.train.summary_iterator(files[0]))
    check(events[0].file_version == "brain.Event:2",
          f"first event file_version {events[0].file_version!r}")
    steps = [(v.tag, e.step) for e in events[1:] for v in e.summary.value]
    want_steps = [("loss", s) for s in LOSS] + [("accuracy", 400), ("weights", 400),
                                                ("activations", 500), ("notes", 400)]
    check(steps == want_steps, f"summary_iterator (tag, step) pairs {steps}")

    # TensorBoard's EventAccumulator: scalars, histograms, and text as a string tensor.
    size = {event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0,
            event_accumulator.TENSORS: 0}
    acc = event_accumulator.EventAccumulator(logdir, size_guidance=size)
    acc.Reload()
    tags = acc.Tags()
    check(sorted(tags["scalars"]) == ["accuracy", "loss"], f"scalar tags {tags['scalars']}")
    check(sorted(tags["histograms"]) == ["activations", "weights"],
          f"histogram tags {tags['histograms']}")
    check(tags["tensors"] == ["notes"], f"tensor tags {tags['tensors']}")
    loss = {e.step: e.value for e in acc.Scalars("loss")}
    want_loss = {s: float(np.float32(v)) for s, v in LOSS.items()}
    check(loss == want_loss, f"loss scalars {loss}")
    accuracy = [(e.step, e.value) for e in acc.Scalars("accuracy")]
    check(accuracy == [(400, 0.875)], f"accuracy scalars {accuracy}")
    for tag, values, step in (("weights", WEIGHTS, 400), ("activations", ACTIVATIONS, 500)):
        (h,) = acc.Histograms(tag)
        check(h.step == step, f"histogram {tag} step {h.step}")
        check_histogram(tag, h.histogram_value, values)
    (notes,) = acc.Tensors("notes")
    text = tf.make_ndarray(notes.tensor_proto)
    check(notes.step == 400 and text.shape == () and text.item() == NOTES,
          f"text notes at step {notes.step}: {text!r}")

    # What the TensorBoard server loads: v1 summaries migrated to plugin tensors.
    acc = plugin_event_accumulator.EventAccumulator(
        logdir, size_guidance={plugin_event_accumulator.TENSORS: 0})
    acc.Reload()
    check(set(acc.PluginTagToContent("scalars")) == {"loss", "accuracy"}, "scalars plugin tags")
    check(set(acc.PluginTagToContent("histograms")) == {"weights", "activations"},
          "histograms plugin tags")
    check(set(acc.PluginTagToContent("text")) == {"notes"}, "text plugin tags")
    loss = {e.step: tf.make_ndarray(e.tensor_proto).item() for e in acc.Tensors("loss")}
    check(loss == want_loss, f"scalars plugin: loss {loss}")
    (weights,) = acc.Tensors("weights")
    buckets = tf.make_ndarray(weights.tensor_proto)  # [k, 3]: left edge, right edge, count
    check(weights.step == 400 and buckets[:, 2].sum() == 5,
          f"histograms plugin: weights at step {weights.step}, {buckets[:, 2].sum()} values")
    (notes,) = acc.Tensors("notes")
    check(tf.make_ndarray(notes.tensor_proto).item() == NOTES, "text plugin: notes")


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CADRE_COMPAT_DIR", "")
    if not directory:
        sys.exit("usage: check_tf_reads_cadre.py DIR (the CADRE_COMPAT_DIR the gtests wrote)")
    check_examples(directory)
    check_events(directory)
    print(f"{len(failures)} failure(s)" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
