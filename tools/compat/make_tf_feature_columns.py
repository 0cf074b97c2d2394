#!/usr/bin/env python3
"""Prints what TensorFlow 2.15's input_layer gives for FeatureColumnTest's batches
(tests/feature_column/feature_column_test.cc holds the output; change both together):
1. dense features (InputLayerIsTensorFlowsOnTheSameRawBatch);
2. lists of strings, which TensorFlow holds as sparse tensors, through a hash bucket, a
   cross with a dense string and shared embeddings (ListsOfStringsAndSharedEmbeddings...);
3. embeddings whose rows are clipped to max_norm (EmbeddingsClipTheirRowsToMaxNorm).

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


def sparse(rows):
    """A batch of string lists as the SparseTensor tf.io.VarLenFeature(tf.string) gives."""
    indices = [[r, i] for r, row in enumerate(rows) for i in range(len(row))]
    values = [v.encode() for row in rows for v in row]
    width = max(len(row) for row in rows)
    return tf.SparseTensor(np.array(indices, np.int64).reshape(-1, 2), tf.constant(values, tf.string),
                           [len(rows), width])


def list_columns():
    words = fc.categorical_column_with_hash_bucket("words", 7)
    tags = fc.categorical_column_with_vocabulary_list("tags", ["a", "b", "c"], num_oov_buckets=1)
    genre = fc.categorical_column_with_vocabulary_list("genre", ["x", "y", "z"], num_oov_buckets=1)
    table = tf.compat.v1.constant_initializer(np.arange(8, dtype=np.float32).reshape(4, 2))
    shared = fc.shared_embedding_columns([tags, genre], 2, combiner="sum", initializer=table)
    return [fc.indicator_column(words), fc.indicator_column(fc.crossed_column(["words", "color"], 11))
            ] + shared


def show(inputs, cols):
    with tf.Graph().as_default():
        dense = fc.input_layer(inputs(), cols())
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.tables_initializer())
            out = session.run(dense)
        print("order:", sorted(c.name for c in cols()))
    for row in out:
        print("{" + ", ".join(f"{v:.9g}" for v in row) + "},")


def main():
    show(lambda: {k: tf.constant(v) for k, v in FEATURES.items()}, columns)
    lists = [["a", "b"], [], ["b", "", "zz"]]
    table = tf.compat.v1.constant_initializer(np.arange(14, dtype=np.float32).reshape(7, 2) * 0.5)
    words = fc.categorical_column_with_hash_bucket("words", 7)
    for combiner in ("mean", "sum"):
        show(lambda: {"words": sparse(lists)},
             lambda: [fc.embedding_column(words, 2, combiner=combiner, initializer=table,
                                          max_norm=1.5)])
    show(lambda: {"words": sparse(lists), "tags": sparse(lists),
                  "genre": sparse([["z"], ["x", "q"], []]),
                  "color": tf.constant([[b"green"], [b"red"], [b"blue"]])}, list_columns)


if __name__ == "__main__":
    main()
