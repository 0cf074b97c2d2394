#!/usr/bin/env python3
"""TensorFlow checkpoints both ways, against TensorFlow 2.15 itself.

Needs TensorFlow, tensorflow-estimator and h5py (pip install 'tensorflow-cpu==2.15.*'
'tensorflow-estimator==2.15.*' h5py); it is NOT run by ./dev test, whose lasting copy of
what it found is TfBundleTest (tests/checkpoint/tf_bundle_test.cc, a bundle TensorFlow wrote).

    python3 tools/compat/check_tf_checkpoints.py build/tools/cadre_ckpt CADRE_MODEL_DIR

1. TensorFlow -> Cadre -> TensorFlow: a DNNLinearCombinedClassifier (Ftrl for the linear
   part, Adagrad for the DNN part, TF's defaults) trains a few steps; `cadre_ckpt ls` and
   `verify` read its model_dir; `cadre_ckpt convert` writes it back as a TensorFlow
   checkpoint, which tf.train.load_checkpoint reads with every tensor identical, and which a
   new Estimator warm-starts from (warm_start_from) to the same predictions.
2. Cadre -> TensorFlow: CADRE_MODEL_DIR's latest checkpoint (e.g. examples/fashion_mnist's)
   converted and read by tf.train.load_checkpoint: each variable equals what h5py reads from
   the .h5 file, each slot sits under TensorFlow's name (training/<Optimizer>/<variable>/<slot>).
Exits 1 when anything differs.
"""
import glob
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads

import h5py
import numpy as np
import tensorflow as tf

tf.get_logger().setLevel("ERROR")
failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def cadre_ckpt(tool, *args):
    run = subprocess.run([tool, *args], capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


def wide_and_deep(model_dir, warm_start_from=None, optimizers=("Ftrl", "Adagrad")):
    columns = [tf.feature_column.numeric_column("x", shape=(3,))]
    return tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=columns, dnn_feature_columns=columns,
        dnn_hidden_units=[8, 4], warm_start_from=warm_start_from,
        linear_optimizer=optimizers[0], dnn_optimizer=optimizers[1])


def data():
    rng = np.random.default_rng(0)
    x = rng.random((256, 3), dtype=np.float32)
    return x, (x.sum(axis=1) > 1.5).astype(np.int64)


def tensorflow_to_cadre_and_back(tool, work):
    x, y = data()
    model_dir = os.path.join(work, "tf_model_dir")
    estimator = wide_and_deep(model_dir)
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(32).repeat(),
                    steps=20)
    status, out = cadre_ckpt(tool, "ls", model_dir)
    check(status == 0 and "global_step 20" in out, "cadre_ckpt ls reads TensorFlow's model_dir")
    check("(training/Ftrl/linear/linear_model/x/weights/accumulator in the file)" in out,
          "Ftrl's slots are listed as slots, with TensorFlow's names")
    status, out = cadre_ckpt(tool, "verify", model_dir)
    check(status == 0 and out.startswith("OK"), "cadre_ckpt verify checks TensorFlow's CRCs")
    back = os.path.join(work, "back", "model.ckpt-20")
    status, out = cadre_ckpt(tool, "convert", model_dir, back)
    check(status == 0, "cadre_ckpt convert writes it back: " + out.strip())
    original = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
    converted = tf.train.load_checkpoint(back)
    names = dict(tf.train.list_variables(tf.train.latest_checkpoint(model_dir)))
    ours = dict(tf.train.list_variables(back))
    check(set(names) == set(ours), f"the same {len(names)} tensor names both ways")
    same = all(np.array_equal(original.get_tensor(n), converted.get_tensor(n))
               for n in names if n in ours)
    check(same, "every tensor identical after TF -> Cadre -> TF")

    def predictions(est):
        results = est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": x}).batch(64))
        return np.array([r["probabilities"] for r in results])

    # The Estimator restoring Cadre's copy as its own checkpoint...
    reuse = os.path.join(work, "reuse")
    os.makedirs(reuse)
    for path in glob.glob(back + ".*"):
        os.link(path, os.path.join(reuse, os.path.basename(path)))
    with open(os.path.join(reuse, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-20"\n')
    expected = predictions(estimator)
    difference = np.abs(expected - predictions(wide_and_deep(reuse))).max()
    check(difference == 0, f"TF's Estimator restores Cadre's copy: same predictions "
                           f"(max diff {difference})")
    # ...and warm-starting from it: one step at learning rate 0 keeps the warmed variables.
    zero = tf.keras.optimizers.legacy.SGD(learning_rate=0.0)
    warm = wide_and_deep(os.path.join(work, "warm"), warm_start_from=back,
                         optimizers=(zero, tf.keras.optimizers.legacy.SGD(learning_rate=0.0)))
    warm.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(32), steps=1)
    difference = np.abs(expected - predictions(warm)).max()
    check(difference == 0, f"warm_start_from Cadre's copy: same predictions (max diff "
                           f"{difference})")


def cadre_to_tensorflow(tool, cadre_model_dir, work):
    prefix = os.path.join(work, "from_cadre", "model.ckpt")
    status, out = cadre_ckpt(tool, "convert", cadre_model_dir, prefix)
    check(status == 0, "cadre_ckpt convert of " + cadre_model_dir + ": " + out.strip())
    h5 = out.split(" tensors of ")[1].split(" at global step")[0]
    reader = tf.train.load_checkpoint(prefix)
    stored = dict(tf.train.list_variables(prefix))
    with h5py.File(h5, "r") as f:
        check(int(reader.get_tensor("global_step")) == int(f["global_step"][()]),
              "global_step")
        names = []
        f["variables"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset)
                                  else None)
        def tf_name(name):  # the optimizer's step counter: Adam/iterations -> training/Adam/iter
            parts = name.split("/")
            return (f"training/{parts[0]}/iter" if len(parts) == 2 and parts[1] == "iterations"
                    else name)
        check(all(np.array_equal(reader.get_tensor(tf_name(n)), f["variables"][n][()])
                  for n in names),
              f"{len(names)} variables equal h5py's reading of {os.path.basename(h5)}")
        slots = []
        f["slots"].visititems(lambda n, o: slots.append(n) if isinstance(o, h5py.Dataset)
                              else None)
        for name in slots:
            of = f["slots"][name].attrs["slot_of"].decode()
            optimizer, slot = name[len(of) + 1:].split("/", 1)
            tf_name = f"training/{optimizer}/{of}/{slot}"
            if tf_name not in stored or not np.array_equal(reader.get_tensor(tf_name),
                                                          f["slots"][name][()]):
                check(False, f"slot {name} as {tf_name}")
                return
        check(True, f"{len(slots)} slots under training/<Optimizer>/<variable>/<slot>")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tool, cadre_model_dir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        tensorflow_to_cadre_and_back(tool, work)
        cadre_to_tensorflow(tool, cadre_model_dir, work)
    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
