#!/usr/bin/env python3
"""TensorFlow 2.15's own Estimator on Fashion-MNIST: the peer of `cadre_bench estimator`.

Same model and input as Cadre's benchmark (MLP 784-256-256-10 or the examples' CNN; Adam
1e-3; sparse softmax cross-entropy; in-memory images shuffled with a 10,000-element buffer,
batched with drop_remainder, prefetched), trained by tf.estimator.Estimator.train in one
call of --train_steps steps with intra- and inter-op threads set to --threads. The first
100 steps are not timed. With --save_every N the Estimator checkpoints every N steps
(its CheckpointSaverHook, TensorFlow's default V2 saver); without it, only at the end.

Needs TensorFlow from PyPI, e.g.
  python3 -m venv /tmp/tfenv
  /tmp/tfenv/bin/pip install 'tensorflow-cpu==2.15.*' 'tensorflow-estimator==2.15.*'
  /tmp/tfenv/bin/python tools/bench/tf_estimator.py --model mlp --batch_size 256 --threads 1

Prints one JSON line: examples_per_sec, the median step, and the size of the last
checkpoint (its .data and .index files; the .meta graph written beside it is a few hundred
KB here).
"""
import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
import tensorflow_estimator  # noqa: E402,F401  (provides tf.estimator)

UNTIMED = 100


def read_idx(path, rank):
    """An IDX file's uint8 contents, read and decoded by graph ops: the graph holds the file
    name, not the data (a NumPy array would become a 190 MB constant in the graph, which
    the Estimator writes into every checkpoint's .meta file)."""
    raw = tf.io.decode_raw(tf.io.decode_compressed(tf.io.read_file(path), "GZIP"), tf.uint8)
    return raw[4 + 4 * rank:]


def build_input_fn(data_dir, batch_size, workers=1):
    """batch_size is the global batch; with several workers each reads its own share of the
    examples (sharded before shuffling, as TensorFlow advises) in batches of its share."""
    def input_fn(input_context=None):
        pixels = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 3)
        images = tf.cast(tf.reshape(pixels, [-1, 784]), tf.float32) / 255.0
        labels = tf.cast(read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 1), tf.int32)
        data = tf.data.Dataset.from_tensor_slices(({"image": images}, labels))
        if input_context is not None and input_context.num_input_pipelines > 1:
            data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        data = data.shuffle(10000, seed=0).repeat()
        return data.batch(batch_size // workers, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    return input_fn


def build_model_fn(model):
    layers = tf.compat.v1.layers

    def model_fn(features, labels, mode):
        x = features["image"]
        if model == "cnn":
            x = tf.reshape(x, [-1, 28, 28, 1])
            x = layers.max_pooling2d(layers.conv2d(x, 32, 3, activation=tf.nn.relu), 2, 2)
            x = layers.max_pooling2d(layers.conv2d(x, 64, 3, activation=tf.nn.relu), 2, 2)
            x = layers.dense(layers.flatten(x), 128, activation=tf.nn.relu)
        else:
            x = layers.dense(x, 256, activation=tf.nn.relu)
            x = layers.dense(x, 256, activation=tf.nn.relu)
        logits = layers.dense(x, 10)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        step = tf.compat.v1.train.get_or_create_global_step()
        train_op = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=step)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return model_fn


class StepEnds(tf.estimator.SessionRunHook):
    """When each step ended."""

    def __init__(self):
        self.ends = []

    def after_run(self, run_context, run_values):
        self.ends.append(time.perf_counter())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--train_steps", type=int, default=3000)
    parser.add_argument("--save_every", type=int, default=0)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--strategy", choices=["one_device", "multi_worker_mirrored"],
                        default="one_device",
                        help="multi_worker_mirrored: one process per task of TF_CONFIG (e.g. "
                             "under cadre_launch), tf.distribute's MultiWorkerMirroredStrategy "
                             "with RING collectives, trained through train_and_evaluate; "
                             "--batch_size is the global batch; the chief prints the line")
    parser.add_argument("--model_dir", default="",
                        help="shared by every task with --strategy=multi_worker_mirrored")
    args = parser.parse_args()
    distribute, workers, chief = None, 1, True
    if args.strategy == "multi_worker_mirrored":
        cluster = json.loads(os.environ["TF_CONFIG"])
        workers = sum(len(cluster["cluster"].get(t, [])) for t in ("chief", "worker"))
        chief = cluster["task"]["type"] == "chief"
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        distribute = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    input_fn = build_input_fn(args.data_dir, args.batch_size, workers)
    model_dir = args.model_dir or tempfile.mkdtemp(prefix="tf_estimator_bench.")
    session = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                                       inter_op_parallelism_threads=args.threads)
    config = tf.estimator.RunConfig(
        model_dir=model_dir, session_config=session, tf_random_seed=0,
        save_checkpoints_steps=args.save_every if args.save_every > 0 else 10 ** 12,
        save_checkpoints_secs=None, save_summary_steps=10 ** 12, log_step_count_steps=10 ** 12,
        keep_checkpoint_max=5, train_distribute=distribute)
    estimator = tf.estimator.Estimator(build_model_fn(args.model), config=config)
    ends = StepEnds()
    if distribute is None:
        estimator.train(input_fn, max_steps=args.train_steps, hooks=[ends])
    else:
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(input_fn, max_steps=args.train_steps, hooks=[ends]),
            tf.estimator.EvalSpec(input_fn, steps=1, start_delay_secs=10 ** 9, throttle_secs=10 ** 9))
        if not chief:
            return

    timed = ends.ends[UNTIMED:]
    per_window = (len(timed) - 1) // 7
    windows = [per_window * args.batch_size / (timed[(w + 1) * per_window] - timed[w * per_window])
               for w in range(7)]
    intervals = [1e3 * (b - a) for a, b in zip(timed, timed[1:])]
    rate = (len(timed) - 1) * args.batch_size / (timed[-1] - timed[0])
    latest = tf.train.latest_checkpoint(model_dir)
    # The checkpoint proper (.index and .data-*); the .meta graph is written beside it.
    checkpoint_bytes = sum(os.path.getsize(f) for f in glob.glob(latest + ".*")
                           if not f.endswith(".meta")) if latest else 0
    if not args.model_dir:
        shutil.rmtree(model_dir, ignore_errors=True)
    print(json.dumps({"peer": "tf.estimator " + tf.__version__, "strategy": args.strategy,
                      "workers": workers, "model": args.model,
                      "batch_size": args.batch_size, "threads": args.threads,
                      "save_every": args.save_every, "examples_per_sec": round(rate),
                      "window_min": round(min(windows)), "window_max": round(max(windows)),
                      "step_ms_median": round(statistics.median(intervals), 3),
                      "checkpoint_bytes": checkpoint_bytes,
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


if __name__ == "__main__":
    main()
