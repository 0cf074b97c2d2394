#!/usr/bin/env python3
"""Canned estimators against TensorFlow 2.15's tf.estimator, on the census-like CSV of
examples/wide_and_deep (make_census.py writes it).

Needs TensorFlow and tensorflow-estimator (pip install 'tensorflow-cpu==2.15.*'
'tensorflow-estimator==2.15.*'); NOT run by ./dev test, whose lasting copy of part 1 is
CannedTest.LoadsATensorFlowModelDirAndPredictsItsProbabilities (make_tf_canned_testdata.py).

    python3 tools/compat/check_tf_wide_and_deep.py build/examples/wide_and_deep DATA_DIR WORK

1. A DNNLinearCombinedClassifier trained by TensorFlow (--tf_steps) is loaded by Cadre's
   wide_and_deep from a copy of TensorFlow's own model_dir: the same probabilities on the
   test set (max abs difference <= 1e-5) and the same eval metrics; then Cadre trains it on
   (--more_steps) and evaluates it, beside TensorFlow training its own on as far.
2. With --scratch_steps=S: TensorFlow's and Cadre's DNNLinearCombinedClassifier (--models:
   also LinearClassifier "wide", DNNClassifier "deep"), each trained from scratch for S steps
   of batch 64: eval metrics and training time side by side (docs/BENCHMARKS.md).
Exits 1 when part 1 differs.
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads
import numpy as np
import tensorflow as tf

tf.get_logger().setLevel("ERROR")
fc = tf.feature_column
BATCH = 64


def columns():
    """The columns of examples/wide_and_deep/main.cc."""
    age = fc.numeric_column("age")
    education = fc.categorical_column_with_vocabulary_list(
        "education", ["Preschool", "HS-grad", "Some-college", "Assoc", "Bachelors", "Masters",
                      "Prof-school", "Doctorate"])
    marital = fc.categorical_column_with_vocabulary_list(
        "marital_status", ["Never-married", "Married", "Divorced", "Widowed"])
    occupation = fc.categorical_column_with_hash_bucket("occupation", 50)
    age_buckets = fc.bucketized_column(age, [25, 35, 45, 55, 65])
    wide = [education, marital, occupation, age_buckets,
            fc.crossed_column(["education", "occupation"], 500),
            fc.crossed_column([age_buckets, "education"], 100)]
    deep = [age, fc.numeric_column("hours_per_week"), fc.indicator_column(education),
            fc.indicator_column(marital), fc.embedding_column(occupation, 8)]
    return wide, deep


def estimator(model_dir, model="wide_deep"):
    """TensorFlow's canned estimator for wide_and_deep's --model."""
    wide, deep = columns()
    config = tf.estimator.RunConfig(tf_random_seed=42)
    if model == "wide":
        return tf.estimator.LinearClassifier(wide, model_dir=model_dir, config=config)
    if model == "deep":
        return tf.estimator.DNNClassifier([64, 32], deep, model_dir=model_dir, config=config)
    return tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[64, 32], config=config)


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    features = {"age": np.array([float(r["age"]) for r in rows], np.float32),
                "hours_per_week": np.array([float(r["hours_per_week"]) for r in rows], np.float32)}
    for key in ("education", "marital_status", "occupation"):
        features[key] = np.array([r[key].encode() for r in rows])
    return features, np.array([int(r["label"]) for r in rows], np.int64)


def train_input(data):
    return lambda: tf.data.Dataset.from_tensor_slices(data).shuffle(10000, seed=42).repeat() \
        .batch(BATCH)


def test_input(data):
    return lambda: tf.data.Dataset.from_tensor_slices(data).batch(BATCH)


def cadre(tool, data_dir, model_dir, steps, *extra):
    run = subprocess.run([tool, f"--data_dir={data_dir}", f"--model_dir={model_dir}",
                          f"--max_steps={steps}", *extra], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("wide_and_deep failed:\n" + run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


def show(who, metrics):
    keys = ("accuracy", "auc", "auc_precision_recall", "precision", "recall", "average_loss",
            "label/mean", "prediction/mean")
    print(f"{who:<28}" + "  ".join(f"{k} {float(metrics[k]):.5f}" for k in keys if k in metrics))


def loaded_from_tensorflow(args, train, test):
    tf_dir = os.path.join(args.work, "tf_model_dir")
    est = estimator(tf_dir)
    est.train(train_input(train), steps=args.tf_steps)
    tf_metrics = est.evaluate(test_input(test))
    expected = np.array([p["logistic"][0] for p in est.predict(test_input(test[0]))])
    copy = os.path.join(args.work, "cadre_from_tf")
    shutil.copytree(tf_dir, copy)
    out = os.path.join(args.work, "cadre_probabilities.txt")
    ours = cadre(args.tool, args.data_dir, copy, args.tf_steps, f"--predict_out={out}")
    got = np.loadtxt(out)
    difference = float(np.abs(got - expected).max())
    show(f"TensorFlow, step {args.tf_steps}", tf_metrics)
    show(f"Cadre from TF's model_dir", ours)
    print(f"probabilities of {len(got)} test examples: max abs difference {difference:.3g}")
    more = cadre(args.tool, args.data_dir, copy, args.tf_steps + args.more_steps)
    show(f"Cadre trained on, step {more['global_step']}", more)
    est.train(train_input(train), steps=args.more_steps)
    show(f"TF trained on, step {args.tf_steps + args.more_steps}", est.evaluate(test_input(test)))
    ok = difference <= 1e-5 and ours["global_step"] == args.tf_steps and \
        more["global_step"] == args.tf_steps + args.more_steps
    return ok


def from_scratch(args, train, test, model):
    start = time.time()
    est = estimator(os.path.join(args.work, "tf_scratch_" + model), model)
    est.train(train_input(train), steps=args.scratch_steps)
    tf_seconds = time.time() - start
    tf_metrics = est.evaluate(test_input(test))
    start = time.time()
    ours = cadre(args.tool, args.data_dir, os.path.join(args.work, "cadre_scratch_" + model),
                 args.scratch_steps, f"--model={model}")
    cadre_seconds = time.time() - start
    show(f"TensorFlow {model} {args.scratch_steps}", tf_metrics)
    show(f"Cadre {model} {args.scratch_steps}", ours)
    print(f"training time: TensorFlow {tf_seconds:.1f} s, Cadre {ours['train_seconds']:.1f} s "
          f"({tf_seconds / ours['train_seconds']:.2f}x; Cadre's whole run with start-up and "
          f"evaluation {cadre_seconds:.1f} s)")
    for key in ("accuracy", "auc"):
        print(f"{key}: Cadre - TensorFlow = {100 * (ours[key] - float(tf_metrics[key])):+.2f} points")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tool")
    parser.add_argument("data_dir")
    parser.add_argument("work")
    parser.add_argument("--tf_steps", type=int, default=1000)
    parser.add_argument("--more_steps", type=int, default=500)
    parser.add_argument("--scratch_steps", type=int, default=0)
    parser.add_argument("--models", default="wide_deep",
                        help="for --scratch_steps: wide_deep, wide, deep, comma-separated")
    args = parser.parse_args()
    if os.path.exists(args.work):
        sys.exit(f"{args.work} exists; give a new directory")
    os.makedirs(args.work)
    train = read(os.path.join(args.data_dir, "train.csv"))
    test = read(os.path.join(args.data_dir, "test.csv"))
    ok = loaded_from_tensorflow(args, train, test)
    print("ok" if ok else "FAIL")
    for model in args.models.split(",") if args.scratch_steps else []:
        from_scratch(args, train, test, model)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
