#!/usr/bin/env python3
"""Cadre's Estimator on two threads, quiet and beside a process that spins on one core,
with the thread tuner on and off, with and without GOMP_SPINCOUNT: the steadiness and
contention figures of docs/BENCHMARKS.md#threads-under-load.

  python3 tools/bench/threads_under_load.py --cadre_bench build/tools/cadre_bench --rounds 3

Each round runs every case once, one after the other; the table gives medians of the
rounds, each with the slowest and fastest of its 7 windows (spread = (max - min) / median).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CASES = [  # name, threads, autotune, GOMP_SPINCOUNT, spinner
    ("2 threads, quiet, tuner on", 2, True, None, False),
    ("2 threads, quiet, tuner on, GOMP_SPINCOUNT=1000", 2, True, "1000", False),
    ("2 threads, quiet, tuner off", 2, False, None, False),
    ("1 thread, quiet", 1, True, None, False),
    ("2 threads, a spinner on one core, tuner on", 2, True, None, True),
    ("2 threads, a spinner on one core, tuner off", 2, False, None, True),
    ("2 threads, a spinner on one core, tuner off, GOMP_SPINCOUNT=1000", 2, False, "1000", True),
]


def run(args, threads, autotune, spincount, spinner):
    env = dict(os.environ)
    env.pop("GOMP_SPINCOUNT", None)
    if spincount:
        env["GOMP_SPINCOUNT"] = spincount
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if spinner else None
    try:
        out = subprocess.run(
            [args.cadre_bench, "estimator", f"--model={args.model}", f"--batch_size={args.batch_size}",
             f"--threads={threads}", f"--train_steps={args.train_steps}",
             f"--autotune={'true' if autotune else 'false'}"],
            env=env, check=True, capture_output=True, text=True).stdout
    finally:
        if hog:
            hog.kill()
            hog.wait()
    result = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(result), file=sys.stderr, flush=True)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cadre_bench", default="build/tools/cadre_bench")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--train_steps", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {case[0]: [] for case in CASES}
    for _ in range(args.rounds):
        for name, *setup in CASES:
            results[name].append(run(args, *setup))
    print(f"| {args.model} {args.batch_size} | ex/s | windows (min–max) | spread |")
    print("| --- | --- | --- | --- |")
    for name, rs in results.items():
        rate = statistics.median(r["examples_per_sec"] for r in rs)
        low = statistics.median(r["window_min"] for r in rs)
        high = statistics.median(r["window_max"] for r in rs)
        print(f"| {name} | {rate / 1e3:.1f}k | {low / 1e3:.0f}k–{high / 1e3:.0f}k | "
              f"{100 * (high - low) / rate:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
