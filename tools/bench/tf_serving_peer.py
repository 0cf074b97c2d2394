#!/usr/bin/env python3
"""TensorFlow 2.15 serving a Cadre export in-process: the peer of `cadre_bench serve`.

Builds the Fashion-MNIST MLP or CNN of examples/fashion_mnist/models.cc in TensorFlow with
the weights of a Cadre export (its variables.h5, read with h5py), saves it as a SavedModel
whose serving_default signature takes "image" [batch, 784] float32 and returns
probabilities, class and logits as Cadre's does, loads it with tf.saved_model.load and calls
the signature on one test image (the first, as `cadre_bench serve` sends) from --concurrency
threads in a loop for --seconds after a warm-up. That is the floor any TensorFlow deployment
pays per request (no network, no JSON, no batching): TF Serving adds its own costs on top.

  /tmp/tfvenv/bin/python tools/bench/tf_serving_peer.py \
      --export /tmp/srvbench/mlp/export/latest/1795859927 --model mlp --concurrency 1,8,64

With --compare_port P it first asks Cadre's REST server on 127.0.0.1:P (serving the same
export as --model_name) for the same image and fails unless the probabilities agree.

Prints one JSON line per --concurrency: requests_per_sec, p50_ms, p99_ms (each call, as
its thread saw it).
"""
import argparse
import gzip
import json
import os
import tempfile
import threading
import time
import urllib.request

import h5py
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


def first_test_image(data_dir):
    with gzip.open(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz")) as f:
        pixels = np.frombuffer(f.read(), np.uint8, offset=16, count=784)
    return (pixels.astype(np.float32) / np.float32(255)).reshape(1, 784)


class FashionMnist(tf.Module):
    """Cadre's models: dense layers x @ kernel + bias, 3x3 VALID convolutions (HWIO
    kernels, as Cadre stores them), 2x2 max pooling, NHWC flattened row-major."""

    def __init__(self, model, h5_path):
        super().__init__()
        self.model = model
        with h5py.File(h5_path, "r") as f:
            group = f["variables"]
            self.vars = {f"{layer}/{name}": tf.Variable(group[layer][name][...], name=f"{layer}_{name}")
                         for layer in group for name in group[layer]}

    def dense(self, name, x, relu):
        y = tf.matmul(x, self.vars[name + "/kernel"]) + self.vars[name + "/bias"]
        return tf.nn.relu(y) if relu else y

    def conv_pool(self, name, x):
        y = tf.nn.conv2d(x, self.vars[name + "/kernel"], strides=1, padding="VALID")
        y = tf.nn.relu(y + self.vars[name + "/bias"])
        return tf.nn.max_pool2d(y, 2, 2, "VALID")

    @tf.function(input_signature=[tf.TensorSpec([None, 784], tf.float32, name="image")])
    def serve(self, image):
        if self.model == "mlp":
            x = self.dense("hidden2", self.dense("hidden1", image, True), True)
        else:
            x = self.conv_pool("conv2", self.conv_pool("conv1", tf.reshape(image, [-1, 28, 28, 1])))
            x = self.dense("dense1", tf.reshape(x, [-1, 1600]), True)
        logits = self.dense("logits", x, False)
        return {"probabilities": tf.nn.softmax(logits), "class": tf.argmax(logits, 1),
                "logits": logits}


def cadre_probabilities(port, model_name, image):
    body = json.dumps({"instances": image.tolist()}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models/{model_name}:predict", body)
    with urllib.request.urlopen(request, timeout=10) as reply:
        return np.array(json.load(reply)["predictions"][0]["probabilities"], np.float32)


def run_load(call, concurrency, warmup, seconds):
    start = time.perf_counter()
    measure_from, end = start + warmup, start + warmup + seconds
    latencies = [[] for _ in range(concurrency)]

    def client(mine):
        while True:
            began = time.perf_counter()
            if began >= end:
                return
            call()
            done = time.perf_counter()
            if began >= measure_from and done <= end:
                mine.append(1e3 * (done - began))

    threads = [threading.Thread(target=client, args=(latencies[i],)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(x for mine in latencies for x in mine)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", required=True, help="a Cadre export version directory")
    parser.add_argument("--model", choices=["mlp", "cnn"], required=True)
    parser.add_argument("--concurrency", default="1", help="comma-separated: one run each, in turn")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--warmup_secs", type=float, default=1)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--compare_port", type=int, default=0)
    parser.add_argument("--model_name", default="fashion_mnist")
    parser.add_argument("--intra_op_threads", type=int, default=0, help="0: TensorFlow's default")
    parser.add_argument("--inter_op_threads", type=int, default=0, help="0: TensorFlow's default")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)

    image = first_test_image(args.data_dir)
    with tempfile.TemporaryDirectory() as saved:
        module = FashionMnist(args.model, os.path.join(args.export, "variables.h5"))
        tf.saved_model.save(module, saved, signatures={"serving_default": module.serve})
        signature = tf.saved_model.load(saved).signatures["serving_default"]
    tensor = tf.constant(image)
    ours = signature(image=tensor)["probabilities"].numpy()[0]
    if args.compare_port:
        theirs = cadre_probabilities(args.compare_port, args.model_name, image)
        diff = float(np.max(np.abs(ours - theirs)))
        if diff > 1e-4:
            raise SystemExit(f"TensorFlow's probabilities differ from Cadre's by {diff}")
        print(f"same probabilities as Cadre's server (max abs diff {diff:.2g})", flush=True)

    for concurrency in [int(c) for c in args.concurrency.split(",")]:
        latencies = run_load(lambda: signature(image=tensor)["probabilities"].numpy(),
                             concurrency, args.warmup_secs, args.seconds)
        pick = lambda p: latencies[min(len(latencies) - 1, int(p * (len(latencies) - 1) + 0.5))]
        print(json.dumps({"concurrency": concurrency, "requests": len(latencies),
                          "seconds": args.seconds,
                          "requests_per_sec": round(len(latencies) / args.seconds, 1),
                          "p50_ms": round(pick(0.5), 3), "p99_ms": round(pick(0.99), 3)}),
              flush=True)


if __name__ == "__main__":
    main()
