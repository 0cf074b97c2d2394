#!/usr/bin/python3
"""PyTorch on Fashion-MNIST on a GPU: the peer of `cadre_bench train --devices=gpu:0`.

The loop a PyTorch user writes when the data fits on the device: the training set moved to
the GPU once, a fresh permutation per epoch drawn there, each batch gathered by index, then
forward, cross-entropy, backward and Adam (PyTorch's default multi-tensor Adam). Same models
as tools/bench/torch_peer.py (imported from it). Each timing window ends with a device synchronisation, so it
counts finished steps, not queued ones.

PyTorch's own defaults are kept: float32 matrix products (matmul TF32 off) and TF32 in cuDNN's
convolutions. --tf32 turns TF32 on for the products too.

  python3 tools/bench/torch_gpu_peer.py --model cnn --batch_size 4096

Prints one JSON line last: the median of the windows' examples/sec, their range, and the
TF32 settings in force.
"""
import argparse
import json
import os
import statistics
import time

from torch_peer import build_model, read_idx


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--windows", type=int, default=7)
    parser.add_argument("--window_s", type=float, default=1.0)
    parser.add_argument("--tf32", action="store_true", help="TF32 in matrix products too")
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda")
    pixels, dims = read_idx(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz"))
    labels, _ = read_idx(os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz"))
    images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(dims[0], 784)
    images = (images.float() / 255.0).to(device)
    targets = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long().to(device)
    torch.manual_seed(0)
    model, shape = build_model(args.model)
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator(device=device).manual_seed(0)
    order, position = None, len(images)

    def step():
        nonlocal order, position
        if position + args.batch_size > len(images):
            order = torch.randperm(len(images), generator=generator, device=device)
            position = 0
        index = order[position:position + args.batch_size]
        position += args.batch_size
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images.index_select(0, index).reshape(shape)),
                               targets.index_select(0, index))
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(20):  # cuDNN's algorithm search and the allocator's first blocks
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    per_window = max(5, int(args.window_s * 20 / (time.perf_counter() - start)))
    rates = []
    for _ in range(args.windows):
        start = time.perf_counter()
        for _ in range(per_window):
            loss = step()
        torch.cuda.synchronize()
        rates.append(per_window * args.batch_size / (time.perf_counter() - start))
    print(json.dumps({
        "peer": "pytorch " + torch.__version__, "device": torch.cuda.get_device_name(),
        "model": args.model, "batch_size": args.batch_size,
        "examples_per_sec": round(statistics.median(rates)),
        "min": round(min(rates)), "max": round(max(rates)), "final_loss": round(float(loss), 4),
        "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "peak_bytes": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
