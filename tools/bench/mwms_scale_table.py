#!/usr/bin/env python3
"""The MultiWorkerMirrored rows of docs/BENCHMARKS.md's scale table (issue #46).

For each size, examples/fashion_mnist's dense model `--model=mlp:N` (784-N-N-10; Adam, so
variables + slots are three times the variables) trains on a chief and one worker through
cadre_launch, sharded checkpoints on (the default above 16 MiB of variables):
  1. trains --saves checkpoints, one every --save_every steps: each worker writes its half of
     the variables and slots as its part while training goes on, the chief commits the
     manifest; every task's peak RSS is sampled by launch_peak_rss.sh;
  2. resumes from that model_dir for one more step (the restore: every worker reads the
     variables from both parts, then takes the chief's);
  3. writes the bytes of one checkpoint's parts with `dd bs=4M conv=fsync` into the same
     directory (the median of three).
Prints a Markdown row per size: training blocked per save (each task's handover of its part:
the save id, the part before and the snapshot's start; the chief's save call; and what the
chief's updates after a save waited for its snapshot's copy: for the pieces the copier was
at, an update claiming the others, rows of a variable split by rows too, and copying them in
its own pass; then that with the whole of those updates, an upper bound; and both after the
first save alone, whose snapshot is the run's first memory of its kind), the parts
written (both parts' bytes over the slower part's time from handover to durable) against
dd's, the restore against a fresh start (the chief's "variable ... made in" lines: reading or
initializing each variable and slot of 16 MiB or more, then the chief's value received), and
each task's peak RSS, also as a multiple of the model (every worker holds all of it) after
what the same task holds with the 256-unit MLP.

Run from the repository root, with the build lock held around each run when --lock names it:
  tools/bench/mwms_scale_table.py --sizes_mib 512,2048 --lock /tmp/cadre-build.lock
"""
import argparse
import math
import os
import re
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ps_scale_table import dd_rate_mb, peaks, run  # noqa: E402


def units_for(mib):
    """Hidden units N whose 784-N-N-10 MLP holds `mib` MiB of float32 variables + Adam's two
    slots: 3 * 4 * (N^2 + 796 N + 10) bytes."""
    params = mib * (1 << 20) / 12
    return int((-796 + math.sqrt(796 ** 2 + 4 * params)) / 2)


def launch(args, model_dir, units, max_steps):
    return [
        "tools/bench/launch_peak_rss.sh", args.launch, "--chief=1", "--workers=1", "--",
        args.example, "--strategy=multi_worker_mirrored", f"--model=mlp:{units}",
        f"--batch_size={args.batch_size}", f"--max_steps={max_steps}",
        f"--save_checkpoints_steps={args.save_every}", "--eval_steps=1",
        f"--model_dir={model_dir}"
    ]


def made_seconds(log):
    """The chief's seconds making its large variables and slots, and receiving its values."""
    made = received = 0.0
    for m in re.finditer(r"^\[chief:0\].*variable \S+ \(\d+ bytes\): made in ([\d.e+-]+) s, "
                         r"the chief's value received in ([\d.e+-]+) s", log, re.M):
        made += float(m.group(1))
        received += float(m.group(2))
    return made, received


def one_size(args, mib):
    units = units_for(mib)
    model_dir = os.path.join(args.dir, f"mwms_scale_{mib}")
    shutil.rmtree(model_dir, ignore_errors=True)
    steps = args.saves * args.save_every
    train_log = f"/tmp/mwms_scale_{mib}_train.log"
    out, _ = run(launch(args, model_dir, units, steps), args.lock, train_log)
    if "exit status 0" not in out:
        sys.exit(f"training at {mib} MiB failed; see {train_log}\n{out[-2000:]}")
    log = open(train_log, errors="replace").read()
    hook = re.search(r"training waited ([\d.]+) ms per save on average, ([\d.]+) ms at most; "
                     r"updates waited for background copies ([\d.]+) ms per save", out)
    handovers = [float(ms) for ms in
                 re.findall(r"checkpoint part \S+: training waited ([\d.e+-]+) ms", log)]
    # The chief's updates after each save but the last: blocked for the snapshot, and that with
    # the whole of the updates that made its copies in their pass; per save, as the hook's.
    waits = re.findall(r"^\[chief:0\].*since the save before, updates waited ([\d.e+-]+) ms for "
                       r"its snapshot \(([\d.e+-]+) ms with", log, re.M)
    saves = max(1, len(re.findall(r"^\[chief:0\].*checkpoint part \S+: training waited", log,
                                  re.M)))
    blocked = sum(float(b) for b, _ in waits) / saves
    with_copies = sum(float(w) for _, w in waits) / saves
    # The first save's apart: its snapshot's memory is the run's first (#46).
    first = (f"; after the first save {float(waits[0][0]):.0f} ms ({float(waits[0][1]):.0f} ms)"
             if waits else "")
    by_step = {}
    for step, size, secs in re.findall(r"wrote checkpoint part model\.ckpt-(\d+)\S* \((\d+) "
                                       r"bytes\) in ([\d.e+-]+) s", log):
        by_step.setdefault(step, []).append((int(size), float(secs)))
    rates = [sum(b for b, _ in parts) / max(s for _, s in parts) / 1e6
             for parts in by_step.values() if len(parts) == 2]
    part_bytes = max(sum(b for b, _ in parts) for parts in by_step.values())
    fresh = made_seconds(log)
    train_peaks = peaks(out)

    resume_log = f"/tmp/mwms_scale_{mib}_resume.log"
    out, _ = run(launch(args, model_dir, units, steps + 1), args.lock, resume_log)
    if "exit status 0" not in out:
        sys.exit(f"resuming at {mib} MiB failed; see {resume_log}\n{out[-2000:]}")
    restored = made_seconds(open(resume_log, errors="replace").read())
    resume_peaks = peaks(out)

    dd_rate = dd_rate_mb(args, model_dir, part_bytes)
    shutil.rmtree(model_dir, ignore_errors=True)

    def rss_of(task):
        peak = max(train_peaks.get(task, 0), resume_peaks.get(task, 0))
        return f"{task} {peak} ({(peak - args.baseline.get(task, 0)) / mib:.2f}x)"

    rate = min(rates) if rates else float("nan")
    return (f"| {mib} MiB (`--model=mlp:{units}`) | {statistics.mean(handovers):.1f} / "
            f"{max(handovers):.1f} ms handover, + {float(hook.group(1)):.1f} / "
            f"{float(hook.group(2)):.1f} ms chief's save; the chief's updates waited "
            f"{blocked:.0f} ms per save for the snapshot ({with_copies:.0f} ms with the updates "
            f"that made its copies in their pass){first} | "
            f"{rate:.0f} MB/s ({rate / dd_rate:.2f}x dd's {dd_rate:.0f} MB/s) | "
            f"{restored[0]:.1f} s read + {restored[1]:.1f} s chief's values (fresh start: "
            f"{fresh[0]:.1f} s + {fresh[1]:.1f} s) | {rss_of('chief0')}, {rss_of('worker0')} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes_mib", default="512,2048",
                        help="variables + slots, MiB, comma-separated")
    parser.add_argument("--save_every", type=int, default=8)
    parser.add_argument("--saves", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--dir", default="/tmp", help="where the model_dirs (and dd) go")
    parser.add_argument("--launch", default="build/tools/cadre_launch")
    parser.add_argument("--example", default="build/examples/fashion_mnist")
    parser.add_argument("--lock", default="", help="a lock file to hold around each run")
    args = parser.parse_args()
    print("| variables + slots | training blocked per save (mean / max) | parts written "
          "(slower part) against dd | restore (chief) | peak RSS MiB (x the model, above "
          "the 256-unit MLP's) |")
    print("| --- | --- | --- | --- | --- |")
    base_dir = os.path.join(args.dir, "mwms_scale_baseline")
    shutil.rmtree(base_dir, ignore_errors=True)
    out, _ = run(launch(args, base_dir, 256, args.save_every), args.lock,
                 "/tmp/mwms_scale_baseline.log")
    shutil.rmtree(base_dir, ignore_errors=True)
    args.baseline = peaks(out)
    print(f"baseline peak RSS (784-256-256-10), MiB: {args.baseline}", file=sys.stderr)
    for mib in [int(s) for s in args.sizes_mib.split(",")]:
        print(one_size(args, mib), flush=True)


if __name__ == "__main__":
    main()
