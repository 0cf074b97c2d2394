#!/usr/bin/env python3
"""Elastic MultiWorkerMirrored: from a worker's death to the survivors' next step (#47).

Runs `cadre_launch --chief=1 --workers=2 --elastic -- fashion_mnist --elastic` and, once the
chief has logged step --kill_after_step, SIGKILLs worker:1 and times, from the kill:
  - broke: the survivors' collective broke (their "the collective of generation 1 broke");
  - group: the survivors took the state of the re-formed group ("members took step");
  - next: the chief's next step after that (its "step N/M" progress line of every step,
    --log_step_count_steps=1), the time the issue counts (target <= 5 s).
With --max_restarts=1 the launcher restarts the worker, which the group admits as it
re-forms; with --max_restarts=0 the survivors go on without it after the heartbeat timeout.
Times are wall clock from the driver's kill to the task's glog timestamp (one machine).

    python3 tools/bench/elastic_recovery.py --build build --rounds 3 --max_restarts 1
    python3 tools/bench/elastic_recovery.py --build build --rounds 3 --max_restarts 0 \\
        --heartbeat_timeout_secs 3
"""
import argparse
import datetime
import os
import re
import shutil
import signal
import subprocess
import time

STARTED = re.compile(r"^started (\S+) pid=(\d+)")
GLOG = re.compile(r"^\[(\S+)\] [IWE](\d{8} \d\d:\d\d:\d\d\.\d+)")
STEP = re.compile(r"^\[chief:0\] .*basic_hooks.cc:\d+\] step (\d+)/")


def stamp(line):
    m = GLOG.match(line)
    if not m:
        return None, None
    when = datetime.datetime.strptime(m.group(2), "%Y%m%d %H:%M:%S.%f")
    return m.group(1), when.timestamp()


def one_round(args, model_dir):
    shutil.rmtree(model_dir, ignore_errors=True)
    command = [
        os.path.join(args.build, "tools/cadre_launch"), "--chief=1", "--workers=2", "--elastic",
        f"--max_restarts={args.max_restarts}", "--",
        os.path.join(args.build, "examples/fashion_mnist"), f"--model_dir={model_dir}",
        "--strategy=multi_worker_mirrored", "--elastic",
        f"--heartbeat_timeout_secs={args.heartbeat_timeout_secs}", "--batch_size=120",
        f"--max_steps={args.max_steps}", "--save_checkpoints_steps=500",
        "--log_step_count_steps=1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, bufsize=1)
    pids, killed_at, times = {}, None, {}
    for line in process.stdout:
        m = STARTED.match(line)
        if m:
            pids[m.group(1)] = int(m.group(2))
        task, when = stamp(line)
        step = STEP.match(line)
        if killed_at is None and step and int(step.group(1)) >= args.kill_after_step:
            os.kill(pids["worker:1"], signal.SIGKILL)
            killed_at = time.time()
            continue
        if killed_at is None or when is None:
            continue
        if "broke; waiting for the next generation" in line and task == "chief:0":
            times.setdefault("broke", when - killed_at)
        if "members took step" in line and task == "chief:0":
            times.setdefault("group", when - killed_at)
        if step and "group" in times:
            times.setdefault("next", when - killed_at)
    process.wait()
    times["exit"] = process.returncode
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max_restarts", type=int, default=1)
    parser.add_argument("--heartbeat_timeout_secs", type=float, default=3)
    parser.add_argument("--kill_after_step", type=int, default=300)
    parser.add_argument("--max_steps", type=int, default=1500)
    parser.add_argument("--model_dir", default="/tmp/elastic_recovery")
    args = parser.parse_args()
    for r in range(args.rounds):
        times = one_round(args, args.model_dir)
        shown = ", ".join(f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}"
                          for k, v in times.items())
        print(f"round {r + 1}: {shown}", flush=True)
    shutil.rmtree(args.model_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
