#!/usr/bin/env python3
"""Writes the ids TensorFlow 2.15's categorical feature columns give, for CategoricalTest.

Needs TensorFlow (pip install 'tensorflow-cpu==2.15.*'); NOT run by ./dev test, which reads
the file it writes (checked in):

    python3 tools/compat/make_tf_categorical.py tests/io/testdata/tf_categorical.txt

One case per line, fields separated by tabs, byte strings in hex:
  fingerprint  INPUT_HEX  FINGERPRINT_HEX        (tf.fingerprint, farmhash64, little-endian)
  hash         KIND VALUE BUCKETS  ID            (categorical_column_with_hash_bucket)
  vocabulary   VALUE  NUM_OOV_BUCKETS  ID        (categorical_column_with_vocabulary_list
                                                  over VOCABULARY; -1: no id)
  bucketize    VALUE  ID                         (bucketized_column over BOUNDARIES)
  cross        KIND1 VALUE1 KIND2 VALUE2 BUCKETS ID   (crossed_column of two raw features)
KIND is "s" (string) or "i" (int64). Ids come from the columns themselves, through an
indicator_column's one-hot output.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
fc = tf.compat.v1.feature_column
VOCABULARY = ["apple", "banana", "cherry", "7"]
BOUNDARIES = [0.0, 1.5, 10.0]


def one_hot_ids(column, features):
    """The id of each example's single value: the argmax of the indicator, -1 if none."""
    with tf.Graph().as_default():
        dense = fc.input_layer({k: tf.constant(v) for k, v in features.items()},
                               [fc.indicator_column(column)])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.tables_initializer())
            hot = session.run(dense)
    return [int(np.argmax(row)) if row.max() > 0 else -1 for row in hot]


def main(path):
    lines = []
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        inputs = [bytes((i * 7 + n) % 256 for i in range(n))
                  for n in list(range(0, 131)) + [200, 256, 300, 1000]]
        inputs += [b"hello", b"feature columns", "café".encode()]
        prints = session.run(tf.fingerprint(tf.constant(inputs), method="farmhash64"))
    for data, fp in zip(inputs, prints):
        lines.append(f"fingerprint\t{data.hex()}\t{bytes(fp)[::-1].hex()}")
    words = ["", "a", "hello", "tensorflow", "x" * 40, "unknown-city"]
    ids = one_hot_ids(fc.categorical_column_with_hash_bucket("w", 97), {"w": [[w] for w in words]})
    lines += [f"hash\ts\t{w.encode().hex()}\t97\t{i}" for w, i in zip(words, ids)]
    numbers = [0, 1, -1, 42, 123456789012]
    ids = one_hot_ids(fc.categorical_column_with_hash_bucket("n", 1000, dtype=tf.int64),
                      {"n": np.array([[n] for n in numbers], np.int64)})
    lines += [f"hash\ti\t{n}\t1000\t{i}" for n, i in zip(numbers, ids)]
    values = ["apple", "cherry", "7", "durian", "", "zzz", "Apple"]
    for oov in (0, 5):
        column = fc.categorical_column_with_vocabulary_list("v", VOCABULARY, num_oov_buckets=oov)
        ids = one_hot_ids(column, {"v": [[v] for v in values]})
        lines += [f"vocabulary\t{v.encode().hex()}\t{oov}\t{i}" for v, i in zip(values, ids)]
    points = [-5.0, 0.0, 0.5, 1.5, 9.99, 10.0, 1e9]
    column = fc.bucketized_column(fc.numeric_column("x"), BOUNDARIES)
    ids = one_hot_ids(column, {"x": np.array([[p] for p in points], np.float32)})
    lines += [f"bucketize\t{p!r}\t{i}" for p, i in zip(points, ids)]
    pairs = [("a", "b"), ("apple", "banana"), ("", "x"), ("hello", "world")]
    ids = one_hot_ids(fc.crossed_column(["s", "t"], 1000),
                      {"s": [[a] for a, _ in pairs], "t": [[b] for _, b in pairs]})
    lines += [f"cross\ts\t{a.encode().hex()}\ts\t{b.encode().hex()}\t1000\t{i}"
              for (a, b), i in zip(pairs, ids)]
    mixed = [("a", 1), ("apple", 42), ("", -7)]
    ids = one_hot_ids(fc.crossed_column(["s", "n"], 5000),
                      {"s": [[a] for a, _ in mixed], "n": np.array([[b] for _, b in mixed], np.int64)})
    lines += [f"cross\ts\t{a.encode().hex()}\ti\t{b}\t5000\t{i}" for (a, b), i in zip(mixed, ids)]
    with open(path, "w") as f:
        f.write(f"# TensorFlow {tf.__version__}; VOCABULARY {VOCABULARY}; BOUNDARIES {BOUNDARIES}\n")
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} cases to {path}")


if __name__ == "__main__":
    main(sys.argv[1])
