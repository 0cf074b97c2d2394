#!/usr/bin/python3
"""PyTorch on Fashion-MNIST in its best configuration here: the peer of `cadre_bench estimator`.

PyTorch has no Estimator; its users write the loop. This one is the loop they would write
for data that fits in memory: the training set as tensors, a fresh random permutation per
epoch, each batch gathered by index, then forward, cross-entropy, backward, Adam step. Same
models (MLP 784-256-256-10, or the examples' CNN), Adam 1e-3, the first 100 steps untimed.

The best configuration is found, not assumed. Debian's torch runs GEMM on OpenBLAS, whose
thread pool torch.set_num_threads does not size; glibc's malloc returns freed memory to the
kernel and PyTorch then faults it in again every step unless the thresholds are raised; and
OpenBLAS may be pinned to AVX2 kernels where the CPU has AVX-512. So the script runs itself
in each configuration (torch/OpenBLAS thread splits for --threads, with and without
OPENBLAS_CORETYPE=SkylakeX on AVX-512, always with raised malloc thresholds) and reports
the fastest.

  /usr/bin/python3 tools/bench/torch_peer.py --model mlp --batch_size 256 --threads 2

Prints one JSON line last: examples_per_sec, the window-to-window range and the
configuration that gave it.
"""
import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import time

UNTIMED = 100
WINDOWS = 7


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * d:8 + 4 * d], "big") for d in range(rank)]
    return raw[4 + 4 * rank:], dims


def build_model(name):
    """The examples' MLP or CNN, and the shape its input takes."""
    from torch import nn
    if name == "mlp":
        return (nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10)), (-1, 784))
    return (nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10)),
            (-1, 1, 28, 28))


def train(args):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(args.torch_threads)
    pixels, dims = read_idx(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz"))
    labels, _ = read_idx(os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz"))
    images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(dims[0], 784)
    images = images.float() / 255.0
    targets = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
    model, shape = build_model(args.model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    order, position, ends = None, len(images), []
    for _ in range(args.train_steps):
        if position + args.batch_size > len(images):
            order, position = torch.randperm(len(images), generator=generator), 0
        index = order[position:position + args.batch_size]
        position += args.batch_size
        x, y = images[index].reshape(shape), targets[index]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        ends.append(time.perf_counter())
    timed = ends[UNTIMED:]
    per_window = (len(timed) - 1) // WINDOWS
    windows = [per_window * args.batch_size / (timed[(w + 1) * per_window] - timed[w * per_window])
               for w in range(WINDOWS)]
    return {"examples_per_sec": round((len(timed) - 1) * args.batch_size / (timed[-1] - timed[0])),
            "window_min": round(min(windows)), "window_max": round(max(windows)),
            "final_loss": round(float(loss), 4),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def configurations(threads):
    splits = [(threads, 1)] if threads == 1 else [(threads, 1), (1, threads)]
    avx512 = "avx512f" in open("/proc/cpuinfo").read()
    coretypes = [None, "SkylakeX"] if avx512 else [None]
    for torch_threads, blas_threads in splits:
        for coretype in coretypes:
            yield torch_threads, blas_threads, coretype


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--train_steps", type=int, default=3000)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--torch_threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_threads > 0:  # one configuration, as set up by the parent
        print(json.dumps(train(args)))
        return
    best = None
    for torch_threads, blas_threads, coretype in configurations(args.threads):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas_threads),
                   OMP_NUM_THREADS=str(torch_threads),
                   GLIBC_TUNABLES="glibc.malloc.trim_threshold=1073741824:"
                                  "glibc.malloc.mmap_threshold=1073741824")
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
        else:
            env.pop("OPENBLAS_CORETYPE", None)
        command = [sys.executable, os.path.abspath(__file__), "--model", args.model,
                   "--batch_size", str(args.batch_size), "--train_steps", str(args.train_steps),
                   "--data_dir", args.data_dir, "--torch_threads", str(torch_threads)]
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        result["config"] = (f"torch {torch_threads} + OpenBLAS {blas_threads} threads, "
                            f"OPENBLAS_CORETYPE={coretype or 'default'}")
        print(json.dumps(result), file=sys.stderr, flush=True)
        if best is None or result["examples_per_sec"] > best["examples_per_sec"]:
            best = result
    best.update({"peer": "pytorch " + __import__("torch").__version__, "model": args.model,
                 "batch_size": args.batch_size, "threads": args.threads})
    print(json.dumps(best))


if __name__ == "__main__":
    main()
