#!/usr/bin/env python3
"""Prints what TensorFlow 2.15's input_layer and linear_model give for FeatureColumnTest's
batch (tests/feature_column/feature_column_test.cc holds the output; change both together).

Needs TensorFlow (pip install 'tensorflow-cpu==2.15.*'); NOT run by ./dev test.

    python3 tools/compat/make_tf_feature_columns.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
fc = tf.compat.v1.feature_column

FEATURES = {
    "age": np.array([[25.0], [60.0], [17.0]], np.float32),
    "city": np.array([[b"paris"], [b"tokyo"], [b""]]),
    "color": np.array([[b"green"], [b"purple"], [b"red"]]),
    "n": np.array([[3], [0], [4]], np.int64),
}


def columns():
    age = fc.numeric_column("age")
    age_buckets = fc.bucketized_column(age, [18.0, 30.0, 50.0])
    city = fc.categorical_column_with_hash_bucket("city", 10)
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"],
                                                       num_oov_buckets=2)
    cross = fc.crossed_column(["city", age_buckets], 20)
    n = fc.categorical_column_with_identity("n", 5)
    return [age, age_buckets, fc.indicator_column(city), fc.indicator_column(color),
            fc.indicator_column(cross), fc.indicator_column(n)]


def main():
    with tf.Graph().as_default():
        inputs = {k: tf.constant(v) for k, v in FEATURES.items()}
        dense = fc.input_layer(inputs, columns())
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.tables_initializer())
            out = session.run(dense)
    names = sorted(c.name for c in columns())
    print("order:", names)
    for row in out:
        print("{" + ", ".join(f"{v:g}" for v in row) + "},")


if __name__ == "__main__":
    main()
