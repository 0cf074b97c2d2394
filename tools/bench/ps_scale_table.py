#!/usr/bin/env python3
"""The parameter-server scale table of docs/BENCHMARKS.md (issue #46).

For each size of examples/embedding_classifier's table (Adagrad: variables + slots are twice
the table), on a chief, one worker and 2 ps tasks through cadre_launch:
  1. trains with a checkpoint every --save_every steps (sharded: each ps task writes its part),
     each task's peak RSS sampled by launch_peak_rss.sh;
  2. resumes from that model_dir for --resume_steps more steps (the restore);
  3. writes the same bytes as the checkpoint's parts with `dd bs=4M conv=fsync` to the same
     directory.
Prints a Markdown table: training blocked per save (the chief's "training waited" line), the
parts' write throughput (both parts' bytes over the slower part's time) against dd's, the
restore (the chief's start of variable creation to its placement line, which follows the
ps tasks' taking every restored slice), and every task's peak RSS, a ps task's also as what
it holds beyond a run with a table of 4096 rows against its own share (half the variables +
slots); the chief and worker hold no share, only the rows they fetch.

Run from the repository root, with the build lock held around each run when --lock names it:
  tools/bench/ps_scale_table.py --sizes_mib 64,512,2048 --lock /tmp/cadre-build.lock

With --restore_table it makes the restore table instead: for each size it trains to one
checkpoint (a fresh start: its creation and peaks are the first row; with --restore_rounds 0
the only one), then resumes 2 x --restore_rounds times for --resume_steps more steps each,
alternating the chief's restore (--restore_on_ps_tasks=false: it reads the table and sends each
ps task its rows) with the ps tasks' own (each reads its rows from the checkpoint's parts), each
resume restoring the checkpoint the one before wrote; it prints each resume's restore seconds
and every task's peak RSS during it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

EMBEDDING_DIM = 32


def run(command, lock, log):
    env = dict(os.environ, LOG=log)
    full = (["flock", lock] if lock else []) + command
    started = time.time()
    out = subprocess.run(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    return out, time.time() - started


def peaks(output):
    """Each task's peak RSS in MiB, as launch_peak_rss.sh prints them ("chief0", "ps1", ...)."""
    return {f"{t}{i}": int(m) for t, i, m in
            re.findall(r"peak RSS task:\{type:(\w+),index:(\d+)\}: (\d+) MiB", output)}


def launch(args, model_dir, max_steps, save_every, extra=()):
    return [
        "tools/bench/launch_peak_rss.sh", args.launch, "--chief=1", "--ps=2", "--workers=1", "--",
        args.example, f"--vocab_size={args.vocab}", f"--embedding_dim={EMBEDDING_DIM}",
        f"--max_steps={max_steps}", f"--save_checkpoints_steps={save_every}",
        f"--model_dir={model_dir}", *extra
    ]


def chief_seconds(log, first, second):
    """Seconds between the chief's first line matching `first` and the next matching `second`."""
    stamp = re.compile(r"^\[chief:0\] [IWE]\d{8} (\d\d):(\d\d):(\d\d\.\d+)")
    start = None
    for line in open(log, errors="replace"):
        m = stamp.match(line)
        if not m:
            continue
        t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        if start is None and re.search(first, line):
            start = t
        elif start is not None and re.search(second, line):
            return t - start
    return float("nan")


def dd_rate_mb(args, directory, size):
    """MB/s of `dd bs=4M conv=fsync` writing `size` bytes into `directory`: the median of three
    (this virtual disk's rate moves by 2-4x from minute to minute)."""
    dd_file = os.path.join(directory, "dd.bin")
    count = (size + (4 << 20) - 1) // (4 << 20)
    rates = []
    for _ in range(3):
        out, _ = run(["dd", "if=/dev/zero", f"of={dd_file}", "bs=4M", f"count={count}",
                      "conv=fsync"], args.lock, "/dev/null")
        os.remove(dd_file)
        m = re.search(r"copied, ([\d.]+) s, ([\d.]+) ([GM])B/s", out)
        if m:
            rates.append(float(m.group(2)) * (1000 if m.group(3) == "G" else 1))
    return sorted(rates)[len(rates) // 2] if rates else float("nan")


def one_size(args, mib):
    args.vocab = mib * (1 << 20) // (2 * EMBEDDING_DIM * 4)
    model_dir = os.path.join(args.dir, f"ps_scale_{mib}")
    shutil.rmtree(model_dir, ignore_errors=True)
    train_log = f"/tmp/ps_scale_{mib}_train.log"
    out, _ = run(launch(args, model_dir, 2 * args.save_every, args.save_every), args.lock,
                 train_log)
    if "exit status 0" not in out:
        sys.exit(f"training at {mib} MiB failed; see {train_log}\n{out[-2000:]}")
    waited = re.search(r"training waited ([\d.]+) ms per save on average, ([\d.]+) ms at most",
                       out)
    writes = re.findall(r"(ps:\d): wrote checkpoint part model\.ckpt-(\d+)\S* \((\d+) bytes\) in "
                        r"([\d.e+-]+) s", open(train_log, errors="replace").read())
    by_step = {}
    for task, step, size, secs in writes:
        by_step.setdefault(step, []).append((int(size), float(secs)))
    rates = [sum(b for b, _ in parts) / max(s for _, s in parts) / 1e6
             for parts in by_step.values() if len(parts) == 2]
    part_bytes = max(sum(b for b, _ in parts) for parts in by_step.values())
    train_peaks = peaks(out)
    create = chief_seconds(train_log, r"connecting to \d+ parameter server", r"placement:")

    resume_log = f"/tmp/ps_scale_{mib}_resume.log"
    out, _ = run(launch(args, model_dir, 2 * args.save_every + args.resume_steps,
                        10 * args.save_every), args.lock, resume_log)
    if "exit status 0" not in out:
        sys.exit(f"resuming at {mib} MiB failed; see {resume_log}\n{out[-2000:]}")
    restore = chief_seconds(resume_log, r"connecting to \d+ parameter server", r"placement:")
    resume_peaks = peaks(out)

    dd_rate = dd_rate_mb(args, model_dir, part_bytes)
    shutil.rmtree(model_dir, ignore_errors=True)

    share = mib / 2

    def rss_of(task):
        peak = max(train_peaks.get(task, 0), resume_peaks.get(task, 0))
        if not task.startswith("ps"):
            return f"{task} {peak}"
        # Above what the same task holds with a table of 4096 rows (its code, gRPC, HDF5).
        return f"{task} {peak} ({(peak - args.baseline.get(task, 0)) / share:.2f}x)"

    rss = ", ".join(rss_of(task) for task in ("chief0", "worker0", "ps0", "ps1"))
    rate = min(rates) if rates else float("nan")
    return (f"| {mib} MiB (`--vocab_size={args.vocab}`) | {waited.group(1)} / {waited.group(2)} "
            f"ms | {rate:.0f} MB/s ({rate / dd_rate:.2f}x dd's {dd_rate:.0f} MB/s) | "
            f"{restore:.1f} s (fresh start: {create:.1f} s) | {rss} |")


def restore_rounds(args, mib):
    """Rows of the restore table for one size: the chief's restore against the ps tasks'."""
    args.vocab = mib * (1 << 20) // (2 * EMBEDDING_DIM * 4)
    model_dir = os.path.join(args.dir, f"ps_restore_{mib}")
    shutil.rmtree(model_dir, ignore_errors=True)
    log = f"/tmp/ps_restore_{mib}_train.log"
    steps = args.resume_steps
    out, _ = run(launch(args, model_dir, steps, steps), args.lock, log)
    if "exit status 0" not in out:
        sys.exit(f"training at {mib} MiB failed; see {log}\n{out[-2000:]}")
    create = chief_seconds(log, r"connecting to \d+ parameter server", r"placement:")
    p = peaks(out)
    rss = ", ".join(str(p.get(t, 0)) for t in ("chief0", "worker0", "ps0", "ps1"))
    rows = [f"| {mib} MiB | (fresh start) | {create:.1f} s | {rss} |"]
    for r in range(args.restore_rounds):
        for on_ps in (False, True):
            steps += args.resume_steps
            log = f"/tmp/ps_restore_{mib}_{r}_{'ps' if on_ps else 'chief'}.log"
            flag = f"--restore_on_ps_tasks={'true' if on_ps else 'false'}"
            out, _ = run(launch(args, model_dir, steps, 100 * steps, [flag]), args.lock, log)
            if "exit status 0" not in out:
                sys.exit(f"resuming at {mib} MiB failed; see {log}\n{out[-2000:]}")
            restore = chief_seconds(log, r"connecting to \d+ parameter server", r"placement:")
            p = peaks(out)
            rss = ", ".join(str(p.get(t, 0)) for t in ("chief0", "worker0", "ps0", "ps1"))
            who = "ps tasks" if on_ps else "chief"
            rows.append(f"| {mib} MiB | {who} | {restore:.1f} s | {rss} |")
    shutil.rmtree(model_dir, ignore_errors=True)
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes_mib", default="64,512,2048",
                        help="variables + slots, MiB, comma-separated")
    parser.add_argument("--save_every", type=int, default=1500)
    parser.add_argument("--resume_steps", type=int, default=100)
    parser.add_argument("--dir", default="/tmp", help="where the model_dirs (and dd) go")
    parser.add_argument("--launch", default="build/tools/cadre_launch")
    parser.add_argument("--example", default="build/examples/embedding_classifier")
    parser.add_argument("--lock", default="", help="a lock file to hold around each run")
    parser.add_argument("--restore_table", action="store_true",
                        help="the restore table: a fresh start, then the chief's and the ps "
                        "tasks' restores --restore_rounds times each")
    parser.add_argument("--restore_rounds", type=int, default=2)
    args = parser.parse_args()
    if args.restore_table:
        print("| variables + slots | restored by | restore (chief: start to placement) | "
              "peak RSS MiB during the resume: chief, worker, ps:0, ps:1 |")
        print("| --- | --- | --- | --- |")
        for mib in [int(s) for s in args.sizes_mib.split(",")]:
            print(restore_rounds(args, mib), flush=True)
        return
    print("| variables + slots | training blocked per save (mean / max) | parts written "
          "(slower save) against dd | restore (chief: start to placement) | peak RSS MiB: "
          "chief, worker, ps tasks (x own share) |")
    print("| --- | --- | --- | --- | --- |")
    # Each task's peak RSS with a table of 4096 rows: what a ps task's own share adds to.
    args.vocab = 4096
    base_dir = os.path.join(args.dir, "ps_scale_baseline")
    shutil.rmtree(base_dir, ignore_errors=True)
    out, _ = run(launch(args, base_dir, 200, 100), args.lock, "/tmp/ps_scale_baseline.log")
    shutil.rmtree(base_dir, ignore_errors=True)
    args.baseline = peaks(out)
    print(f"baseline peak RSS (a table of 4096 rows), MiB: {args.baseline}", file=sys.stderr)
    for mib in [int(s) for s in args.sizes_mib.split(",")]:
        print(one_size(args, mib), flush=True)


if __name__ == "__main__":
    main()
