#!/usr/bin/env python3
"""Writes tests/io/testdata/tf_examples.tfrecord with TensorFlow's own writer.

Needs TensorFlow (pip install 'tensorflow-cpu==2.15.*'); it is NOT run by ./dev test, which
only reads the checked-in file (tests/io/tensorflow_files_test.cc). Rerun it only to
regenerate the golden file:

    python3 tools/compat/make_tf_examples.py tests/io/testdata/tf_examples.tfrecord

Three tf.train.Example records, each with
  ints    int64 list of 3 (negative and > 32-bit values: 10-byte varints)
  floats  float list of 2
  name    one byte string (empty in one record, non-UTF-8 bytes in another)
  varlen  int64 list of 3, 0 (present but empty) and 0 (absent) values
"""
import sys

import tensorflow as tf

RECORDS = [
    dict(ints=[1, -2, 300], floats=[0.5, -1.25], name=b"alpha", varlen=[7, 8, 9]),
    dict(ints=[0, 2**40, -(2**63)], floats=[3.140625, 1e-3], name=b"", varlen=[]),
    dict(ints=[2**63 - 1, 42, -1], floats=[-0.0, 65504.0], name=b"\x00\xffbin", varlen=None),
]


def example(record):
    feature = {
        "ints": tf.train.Feature(int64_list=tf.train.Int64List(value=record["ints"])),
        "floats": tf.train.Feature(float_list=tf.train.FloatList(value=record["floats"])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[record["name"]])),
    }
    if record["varlen"] is not None:
        feature["varlen"] = tf.train.Feature(int64_list=tf.train.Int64List(value=record["varlen"]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/io/testdata/tf_examples.tfrecord"
    with tf.io.TFRecordWriter(path) as writer:
        for record in RECORDS:
            # Map entries in key order, so that the file is the same on every run.
            writer.write(example(record).SerializeToString(deterministic=True))
    print(f"wrote {len(RECORDS)} records to {path}")


if __name__ == "__main__":
    main()
