#!/usr/bin/python3
"""PyTorch on Fashion-MNIST on a GPU, in each configuration a user would try for speed: the
peer of `cadre_bench train --devices=gpu:0`.

The loop a PyTorch user writes when the data fits on the device: the training set moved to
the GPU once, a fresh permutation per epoch drawn there, each batch gathered by index, then
forward, cross-entropy, backward and Adam. Same models as tools/bench/torch_peer.py
(imported from it). Each timing window ends with a device synchronisation, so it counts
finished steps, not queued ones.

Configurations (--configs, comma-separated, run one after another in this process, each on
a fresh model with the same seed):
  eager              PyTorch's defaults: float32 products (matmul TF32 off), TF32 in cuDNN's
                     convolutions, the default (multi-tensor) Adam
  eager-tf32         the same with TF32 products
  eager-bf16         bf16 autocast (TF32 where autocast keeps float32), fused Adam
  graphs-tf32        the whole step (gather, forward, backward, fused Adam) captured once in
  graphs-bf16        a CUDA graph and replayed (torch.cuda.graph); TF32, or bf16 autocast
  compile-tf32       torch.compile of the step's forward and loss (default mode), fused Adam
  max-autotune-tf32  torch.compile(mode="max-autotune"): autotuned kernels and CUDA graphs
  max-autotune-bf16  the same under bf16 autocast
The CNN runs channels-last in every configuration but the first two (PyTorch's advice for
convolutions on tensor cores). Variables and Adam's state stay float32 in every one.

  python3 tools/bench/torch_gpu_peer.py --model cnn --batch_size 4096 --configs eager,graphs-tf32

Prints one JSON line per configuration as it finishes: the median of the windows'
examples/sec, their range, the seconds spent compiling or capturing, the peak memory.
"""
import argparse
import json
import os
import statistics
import time

from torch_peer import build_model, read_idx

CONFIGS = {
    "eager": dict(tf32=False, bf16=False, mode=None),
    "eager-tf32": dict(tf32=True, bf16=False, mode=None),
    "eager-bf16": dict(tf32=True, bf16=True, mode=None),
    "graphs-tf32": dict(tf32=True, bf16=False, mode="graphs"),
    "graphs-bf16": dict(tf32=True, bf16=True, mode="graphs"),
    "compile-tf32": dict(tf32=True, bf16=False, mode="default"),
    "max-autotune-tf32": dict(tf32=True, bf16=False, mode="max-autotune"),
    "max-autotune-bf16": dict(tf32=True, bf16=True, mode="max-autotune"),
}


class Data:
    """The training set on the GPU and an epoch-wise permutation drawn there."""

    def __init__(self, data_dir, batch_size, torch):
        pixels, dims = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
        labels, _ = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))
        images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(dims[0], 784)
        self.images = (images.float() / 255.0).cuda()
        self.targets = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long().cuda()
        self.batch_size = batch_size
        self.torch = torch
        self.generator = torch.Generator(device="cuda").manual_seed(0)
        self.order, self.position = None, len(self.images)

    def next_index(self):
        if self.position + self.batch_size > len(self.images):
            self.order = self.torch.randperm(len(self.images), generator=self.generator,
                                             device="cuda")
            self.position = 0
        index = self.order[self.position:self.position + self.batch_size]
        self.position += self.batch_size
        return index


def make_step(name, settings, model_name, data, torch):
    """Returns (step(), seconds spent preparing it): step() trains one batch, returns the loss."""
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = settings["tf32"]
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    model, shape = build_model(model_name)
    model = model.cuda()
    channels_last = model_name == "cnn" and name not in ("eager", "eager-tf32")
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    mode = settings["mode"]
    if mode is None and not settings["bf16"]:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True,
                                     capturable=mode == "graphs")

    def loss_of(index):
        x = data.images.index_select(0, index).reshape(shape)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=settings["bf16"],
                            cache_enabled=mode != "graphs"):
            logits = model(x)
        return F.cross_entropy(logits.float(), data.targets.index_select(0, index))

    def train(index, forward=loss_of):
        optimizer.zero_grad(set_to_none=True)
        loss = forward(index)
        loss.backward()
        optimizer.step()
        return loss

    start = time.perf_counter()
    if mode == "graphs":
        static_index = data.next_index().clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graphs asks
            for _ in range(3):
                train(static_index)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = loss_of(static_index)
            static_loss.backward()
            optimizer.step()

        def step():
            static_index.copy_(data.next_index())
            graph.replay()
            return static_loss
    elif mode is not None:
        compiled = torch.compile(loss_of, mode=mode)
        for _ in range(3):  # compiles (and for max-autotune, records its CUDA graphs)
            train(data.next_index(), compiled)

        def step():
            return train(data.next_index(), compiled)
    else:
        def step():
            return train(data.next_index())
    torch.cuda.synchronize()
    return step, time.perf_counter() - start


def measure(step, args, torch):
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
    return rates, float(loss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--configs", default="eager",
                        help="comma-separated: " + ", ".join(CONFIGS))
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window_s", type=float, default=1.0)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}; expected some of {list(CONFIGS)}")

    import torch

    data = Data(args.data_dir, args.batch_size, torch)
    for name in names:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        result = {"peer": "pytorch " + torch.__version__, "config": name,
                  "device": torch.cuda.get_device_name(), "model": args.model,
                  "batch_size": args.batch_size}
        try:
            step, prepare_s = make_step(name, CONFIGS[name], args.model, data, torch)
            rates, loss = measure(step, args, torch)
            result.update(examples_per_sec=round(statistics.median(rates)),
                          min=round(min(rates)), max=round(max(rates)),
                          final_loss=round(loss, 4), prepare_s=round(prepare_s, 1),
                          peak_bytes=torch.cuda.max_memory_allocated())
        except Exception as error:  # one configuration failing must not hide the others
            result["error"] = f"{type(error).__name__}: {error}"[:2000]
        print(json.dumps(result), flush=True)
        step = None
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
