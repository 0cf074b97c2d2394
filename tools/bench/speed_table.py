#!/usr/bin/env python3
"""Training speed through each framework's own loop: Cadre's Estimator, TF 2.15's Estimator
and PyTorch (its best configuration), side by side on Fashion-MNIST.

For each row (model, batch, threads) it runs the three programs one after the other, then
again, --rounds times, and prints a Markdown table of the median examples/sec, each one's
window-to-window range and peak resident memory, and Cadre's ratio to the better peer.
The raw JSON lines go to stderr. `./dev bench` runs it; a peer that is not installed is left out of the table.

  python3 tools/bench/speed_table.py --cadre_bench build/tools/cadre_bench \\
      --tf_python /tmp/tfenv/bin/python --torch_python /usr/bin/python3 --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROWS = [("mlp", 64, 1), ("mlp", 256, 1), ("mlp", 64, 2), ("mlp", 256, 2), ("cnn", 64, 2),
        ("cnn", 256, 2)]


def steps_for(model, batch):
    # About 5 s of training for the fastest of the three.
    return {"mlp": 3000 if batch >= 256 else 6000, "cnn": 1200 if batch <= 64 else 400}[model]


def run(command):
    try:
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError) as error:
        print(f"failed: {' '.join(command)}: {error}", file=sys.stderr)
        return None
    result = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(result), file=sys.stderr, flush=True)
    return result


def available(python, module):
    return python and subprocess.run([python, "-c", f"import {module}"],
                                     capture_output=True).returncode == 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--cadre_bench", default="build/tools/cadre_bench")
    parser.add_argument("--tf_python", default="")
    parser.add_argument("--torch_python", default="/usr/bin/python3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", default="", help="e.g. mlp,256,1;cnn,64,2 (default: all)")
    args = parser.parse_args()
    rows = ROWS
    if args.rows:
        rows = [(m, int(b), int(t)) for m, b, t in (r.split(",") for r in args.rows.split(";"))]
    peers = {}
    if available(args.tf_python, "tensorflow_estimator"):
        peers["TF 2.15 Estimator"] = lambda m, b, t, s: [
            args.tf_python, os.path.join(here, "tf_estimator.py"), "--model", m,
            "--batch_size", str(b), "--threads", str(t), "--train_steps", str(s)]
    if available(args.torch_python, "torch"):
        peers["PyTorch"] = lambda m, b, t, s: [
            args.torch_python, os.path.join(here, "torch_peer.py"), "--model", m,
            "--batch_size", str(b), "--threads", str(t), "--train_steps", str(s)]
    names = ["Cadre Estimator"] + list(peers)
    print("| model, batch, threads | " + " | ".join(names) + " | Cadre / best peer |")
    print("| --- |" + " --- |" * (len(names) + 1))
    for model, batch, threads in rows:
        steps = steps_for(model, batch)
        results = {name: [] for name in names}
        for _ in range(args.rounds):
            r = run([args.cadre_bench, "estimator", f"--model={model}", f"--batch_size={batch}",
                     f"--threads={threads}", f"--train_steps={steps}"])
            if r:
                results["Cadre Estimator"].append(r)
            for name, command in peers.items():
                r = run(command(model, batch, threads, steps))
                if r:
                    results[name].append(r)
        cells, rates = [], {}
        for name in names:
            if not results[name]:
                cells.append("failed")
                continue
            rate = statistics.median(r["examples_per_sec"] for r in results[name])
            low = min(r["window_min"] for r in results[name]) if "window_min" in results[name][0] else None
            high = max(r["window_max"] for r in results[name]) if "window_max" in results[name][0] else None
            rates[name] = rate
            spread = f" ({low / 1e3:.0f}k–{high / 1e3:.0f}k)" if low is not None else ""
            rss = statistics.median(r.get("peak_rss_mb", 0) for r in results[name])
            cells.append(f"{rate / 1e3:.1f}k{spread}, {rss:.0f} MB")
        best_peer = max((rates[n] for n in peers if n in rates), default=None)
        ratio = (f"{rates['Cadre Estimator'] / best_peer:.2f}"
                 if best_peer and "Cadre Estimator" in rates else "")
        print(f"| {model} {batch}, {threads} | " + " | ".join(cells) + f" | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
