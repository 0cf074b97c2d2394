#!/usr/bin/env python3
"""Two workers on one host against one process: Cadre's Estimator with MultiWorkerMirrored
beside TF 2.15's Estimator with its MultiWorkerMirroredStrategy (RING), MLP, every process
one intra-op thread, global examples/sec.

For each global batch it runs, one after the other and --rounds times over: Cadre in one
process, Cadre's two workers (cadre_launch --chief=1 --workers=1), TF in one process and
TF's two workers; then prints a Markdown table of the medians and the ratios. With
--cadre_only the TF columns are left out. Raw JSON lines go to stderr.

  python3 tools/bench/mwms_table.py --build build --tf_python /tmp/tfenv/bin/python --rounds 3
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from json_lines import last_json

HERE = os.path.dirname(os.path.abspath(__file__))


def run(command, chief_only=False):
    out = subprocess.run(command, capture_output=True, text=True, timeout=900)
    text = out.stdout
    if chief_only:  # cadre_launch prefixes each task's lines
        text = "\n".join(l for l in text.splitlines() if l.startswith("[chief:0]"))
    result = last_json(text)
    if out.returncode != 0 or result is None:
        print(f"failed ({out.returncode}): {' '.join(command)}\n{out.stderr[-2000:]}",
              file=sys.stderr)
        return None
    print(json.dumps(result), file=sys.stderr, flush=True)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--tf_python", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", default="256,2048")
    parser.add_argument("--cadre_only", action="store_true")
    parser.add_argument("--extra", default="", help="more cadre_bench flags, e.g. --overlap=false")
    args = parser.parse_args()
    launch = os.path.join(args.build, "tools", "cadre_launch")
    bench = os.path.join(args.build, "tools", "cadre_bench")
    tf = os.path.join(HERE, "tf_estimator.py")
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        steps = 3000 if batch <= 256 else 600
        common = ["--model=mlp", f"--batch_size={batch}", "--threads=1", f"--train_steps={steps}"]
        cadre = [bench, "estimator", "--autotune=false"] + common + args.extra.split()
        runs = {"cadre 1": lambda: run(cadre),
                "cadre 2": lambda: run([launch, "--chief=1", "--workers=1", "--"] + cadre +
                                       ["--strategy=multi_worker_mirrored"], chief_only=True)}
        if not args.cadre_only:
            tf_args = ["--model", "mlp", "--batch_size", str(batch), "--threads", "1",
                       "--train_steps", str(steps)]
            runs["tf 1"] = lambda: run([args.tf_python, tf] + tf_args)

            def tf_two():
                model_dir = tempfile.mkdtemp(prefix="tf_mwms.")
                try:
                    return run([launch, "--chief=1", "--workers=1", "--", args.tf_python, tf] +
                               tf_args + ["--strategy", "multi_worker_mirrored",
                                          "--model_dir", model_dir], chief_only=True)
                finally:
                    shutil.rmtree(model_dir, ignore_errors=True)
            runs["tf 2"] = tf_two
        rates = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, go in runs.items():
                result = go()
                if result:
                    rates[name].append(result["examples_per_sec"])
        rows.append((batch, {k: statistics.median(v) if v else None for k, v in rates.items()}))

    def cell(v):
        return f"{v / 1000:.1f}k" if v else "—"

    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "—"

    print("| global batch | Cadre, 1 process | Cadre, 2 workers | 2 / 1 | TF, 1 process | "
          "TF, 2 workers | TF 2 / 1 | Cadre 2 / TF 2 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for batch, m in rows:
        c1, c2, t1, t2 = m.get("cadre 1"), m.get("cadre 2"), m.get("tf 1"), m.get("tf 2")
        print(f"| {batch} | {cell(c1)} | {cell(c2)} | {ratio(c2, c1)} | {cell(t1)} | {cell(t2)} | "
              f"{ratio(t2, t1)} | {ratio(c2, t2)} |")


if __name__ == "__main__":
    main()
