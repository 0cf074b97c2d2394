#!/usr/bin/env python3
"""Writes the TensorFlow model_dir that CannedTest (tests/estimator/canned_test.cc) loads: a
small DNNLinearCombinedClassifier trained by TensorFlow 2.15 (its checkpoint only), the rows
it is evaluated on, what TensorFlow predicts and reports for them, and what it predicts after
ten more steps on them.

Needs TensorFlow and tensorflow-estimator; NOT run by ./dev test.

    python3 tools/compat/make_tf_canned_testdata.py tests/estimator/testdata/tf_wide_deep
"""
import glob
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

tf.get_logger().setLevel("ERROR")
fc = tf.feature_column
COLORS = ["red", "green", "blue"]
STEPS = 30


def columns():
    """The columns of canned_test.cc's tf_columns()."""
    x = fc.numeric_column("x")
    color = fc.categorical_column_with_vocabulary_list("color", COLORS)
    city = fc.categorical_column_with_hash_bucket("city", 7)
    x_buckets = fc.bucketized_column(x, [-0.5, 0.0, 0.5])
    wide = [color, x_buckets, fc.crossed_column(["color", "city"], 11)]
    deep = [x, fc.indicator_column(color), fc.embedding_column(city, 3)]
    return wide, deep


def data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    color = rng.choice(COLORS, n)
    city = rng.choice(["paris", "tokyo", "lima", "oslo", "cairo"], n)
    label = ((x + (color == "red") - 0.5 * (city == "lima") + rng.normal(0, 0.5, n)) > 0.3)
    features = {"x": x, "color": np.array([c.encode() for c in color]),
                "city": np.array([c.encode() for c in city])}
    return features, label.astype(np.int64)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    model_dir = tempfile.mkdtemp()
    wide, deep = columns()
    est = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[4, 3], config=tf.estimator.RunConfig(tf_random_seed=1),
        # Faster than the defaults, so that 30 steps move every weight well away from its start.
        linear_optimizer=tf.keras.optimizers.legacy.Ftrl(0.2),
        dnn_optimizer=tf.keras.optimizers.legacy.Adagrad(0.1))
    train = data(128, 0)
    est.train(lambda: tf.data.Dataset.from_tensor_slices(train).repeat().batch(16), steps=STEPS)
    test = data(16, 1)
    metrics = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(test).batch(16))
    predictions = [p["logistic"][0] for p in
                   est.predict(lambda: tf.data.Dataset.from_tensor_slices(test[0]).batch(16))]
    prefix = f"model.ckpt-{STEPS}"
    for path in glob.glob(os.path.join(model_dir, prefix + ".*")):
        if not path.endswith(".meta"):
            shutil.copy(path, out)
    with open(os.path.join(out, "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n')
    with open(os.path.join(out, "test.csv"), "w") as f:
        f.write("x,color,city,label\n")
        for i in range(16):
            f.write(f"{test[0]['x'][i]!r},{test[0]['color'][i].decode()},"
                    f"{test[0]['city'][i].decode()},{test[1][i]}\n")
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("# TensorFlow 2.15's logistic per test row, then its eval metrics\n")
        f.write("logistic " + " ".join(f"{p!r}" for p in predictions) + "\n")
        for key in sorted(metrics):
            if key != "global_step":
                f.write(f"{key} {float(metrics[key])!r}\n")
        # Ten more steps on the test rows (one batch of 16, in order): the update both ways.
        est.train(lambda: tf.data.Dataset.from_tensor_slices(test).repeat().batch(16), steps=10)
        after = [p["logistic"][0] for p in
                 est.predict(lambda: tf.data.Dataset.from_tensor_slices(test[0]).batch(16))]
        f.write("logistic_after_10_more_steps " + " ".join(f"{p!r}" for p in after) + "\n")


if __name__ == "__main__":
    main()
