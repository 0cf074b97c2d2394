#!/usr/bin/env python3
"""What checkpointing every N steps costs training, Cadre beside TensorFlow 2.15's Estimator.

For each configuration, runs alternately and --rounds times: `cadre_bench estimator` without
and with --save_every, and tools/bench/tf_estimator.py the same way; prints the medians as a
Markdown table (rates, slowdown, Cadre's cost per save measured within the run and as a
share of the steps between saves, its blocking per save against a plain copy of the
variables and slots (blocking: the saving step's hooks beyond a median step's, plus the
waits of updates that reached a variable before the background copy did), checkpoint
sizes) and the raw JSON lines on stderr.

  python3 tools/bench/ckpt_cost.py --cadre_bench build/tools/cadre_bench \\
      --tf_python /tmp/tfenv/bin/python --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CONFIGS = [  # model, batch, threads, steps
    ("mlp", 256, 1, 3000),
    ("mlp", 256, 2, 3000),
    ("cnn", 64, 2, 1500),
]


def run(command):
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(result), file=sys.stderr, flush=True)
    return result


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--cadre_bench", default="build/tools/cadre_bench")
    parser.add_argument("--tf_python", default="/tmp/tfenv/bin/python")
    parser.add_argument("--save_every", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="model,batch,threads of one configuration")
    args = parser.parse_args()
    configs = [c for c in CONFIGS if not args.only or ",".join(map(str, c[:3])) == args.only]
    print("| model, batch, threads | Cadre ex/s, no saves | with saves | slowdown | cost per save"
          " | blocked per save | plain copy (cold / warm) | TF ex/s, no saves | with saves"
          " | slowdown | Cadre / TF checkpoint |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, batch, threads, steps in configs:
        common = [f"--model={model}", f"--batch_size={batch}", f"--threads={threads}",
                  f"--train_steps={steps}"]
        tf_common = [args.tf_python, os.path.join(here, "tf_estimator.py"), "--model", model,
                     "--batch_size", str(batch), "--threads", str(threads), "--train_steps",
                     str(steps)]
        results = {"c0": [], "cs": [], "t0": [], "ts": []}
        for _ in range(args.rounds):
            results["c0"].append(run([args.cadre_bench, "estimator", *common, "--save_every=0"]))
            results["cs"].append(run([args.cadre_bench, "estimator", *common,
                                      f"--save_every={args.save_every}"]))
            results["t0"].append(run(tf_common + ["--save_every", "0"]))
            results["ts"].append(run(tf_common + ["--save_every", str(args.save_every)]))

        def med(key, field):
            return statistics.median(r[field] for r in results[key])

        c0, cs = med("c0", "examples_per_sec"), med("cs", "examples_per_sec")
        t0, ts = med("t0", "examples_per_sec"), med("ts", "examples_per_sec")
        cost = med("cs", "save_cost_ms") / (args.save_every * med("cs", "step_ms_median"))
        blocked = med("cs", "save_blocked_ms") + med("cs", "save_fence_ms")
        print(f"| {model} {batch}, {threads} | {c0:,.0f} | {cs:,.0f} | {100 * (1 - cs / c0):.1f}% "
              f"| {med('cs', 'save_cost_ms'):.1f} ms ({100 * cost:.1f}%) "
              f"| {blocked:.3f} ms ({blocked / med('cs', 'copy_cold_ms'):.1f}x cold) "
              f"| {med('cs', 'copy_cold_ms'):.3f} / "
              f"{med('cs', 'copy_warm_ms'):.3f} ms | {t0:,.0f} | {ts:,.0f} | "
              f"{100 * (1 - ts / t0):.1f}% | {med('cs', 'checkpoint_bytes') / 1e6:.2f} / "
              f"{med('ts', 'checkpoint_bytes') / 1e6:.2f} MB |", flush=True)


if __name__ == "__main__":
    main()
