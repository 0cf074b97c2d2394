#!/usr/bin/python3
"""Cadre's Gloo all-reduce beside PyTorch's, alternating, several rounds per size.

Two processes on 127.0.0.1 each side: `cadre_launch --chief=1 --workers=1 -- cadre_bench
allreduce --bytes=N` and ../shared/peers/torch_gloo_allreduce.py --bytes N, one after the
other for each size, --rounds times over (so that drift on a shared machine hits both
alike). Prints a Markdown table of the medians of the rounds and the ratio.

  /usr/bin/python3 tools/bench/allreduce_vs_torch.py --build build --rounds 5

With --transport=gloo, Cadre's processes also meet over TCP (its Gloo collective) instead of
shared memory: the same transport as PyTorch's.
"""
import argparse
import os
import statistics
import subprocess

from json_lines import last_json

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "..", "..", "..", "shared", "peers", "torch_gloo_allreduce.py")


def cadre(build, nbytes, tensors, transport):
    cmd = [os.path.join(build, "tools", "cadre_launch"), "--chief=1", "--workers=1", "--",
           os.path.join(build, "tools", "cadre_bench"), "allreduce", f"--bytes={nbytes}",
           f"--tensors={tensors}", f"--transport={transport}"]
    return run(cmd)


def run(cmd, tries=2):
    """The command's last JSON line; a run that fails or hangs (the peer has hung here, its
    processes gone and the parent still waiting) is tried again, then given up as None."""
    for _ in range(tries):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        except subprocess.TimeoutExpired:
            print("timed out: " + " ".join(cmd), flush=True)
            continue
        if out.returncode == 0:
            return last_json(out.stdout)
        print(f"exit {out.returncode}: {' '.join(cmd)}\n{out.stderr[-1000:]}", flush=True)
    return None


def torch(nbytes, tensors):
    return run(["/usr/bin/python3", PEER, "--bytes", str(nbytes), "--tensors", str(tensors)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(str(4096 * 4 ** i) for i in range(9)))
    ap.add_argument("--tensors", type=int, default=1)
    ap.add_argument("--transport", choices=["auto", "gloo"], default="auto")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    ours = {n: [] for n in sizes}
    peer = {n: [] for n in sizes}
    for r in range(a.rounds):
        for n in sizes:
            c, t = cadre(a.build, n, a.tensors, a.transport), torch(n, a.tensors)
            if c: ours[n].append(c["time_ms"])
            if t: peer[n].append(t["time_ms"])
            print(f"round {r + 1} bytes {n}: cadre {c and c['time_ms']} ms, "
                  f"pytorch {t and t['time_ms']} ms", flush=True)
    print("\n| bytes | tensors | Cadre ms | Cadre busbw GB/s | PyTorch ms | PyTorch busbw GB/s "
          "| Cadre / PyTorch busbw |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        if not ours[n] or not peer[n]:
            print(f"| {n} | {a.tensors} | {len(ours[n])} and {len(peer[n])} runs finished | | | | |")
            continue
        c, t = statistics.median(ours[n]), statistics.median(peer[n])
        cb, tb = n / c / 1e6, n / t / 1e6  # busbw for 2 processes equals algbw
        print(f"| {n} | {a.tensors} | {c:.3f} | {cb:.4f} | {t:.3f} | {tb:.4f} | {cb / tb:.2f} |")


if __name__ == "__main__":
    main()
