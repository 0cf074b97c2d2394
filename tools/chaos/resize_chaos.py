#!/usr/bin/env python3
"""Jobs resized at random between restarts, for minutes: every example read exactly once.

Runs the input-shards test program (tests/integration/input_shards_helper: epochs of 480
numbered examples read as 8 input shards) again and again on one model_dir, each run with a
random number of workers (1: one process without TF_CONFIG; 2-4: MultiWorkerMirrored under
cadre_launch --max_restarts=0). While a run trains, the driver SIGKILLs a random task, or
SIGTERMs the launcher (a planned stop), or lets it run, at random times; then it starts the
next run with another number of workers, until a run reaches the end of the input. The
program records the examples each training step took with the step's number; a run's steps at
or past the checkpoint the next run resumes from count for nothing (they are trained again).
Checked per job: every example counted exactly --epochs times (none skipped, none repeated),
and no run read its input from the start.

    python3 tools/chaos/resize_chaos.py --build build --minutes 10 --out /tmp/resize_chaos

Prints one line per job and a JSON summary last; exits 1 when any check failed. Needs only
Python's standard library and a build; not run by ./dev test (InputShardsTest is its
deterministic cousin).
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

STARTED = re.compile(r"started (\S+) pid=(\d+)")
STATE = re.compile(r'model_checkpoint_path: "model\.ckpt-(\d+)')
EXAMPLES = 480


def latest_step(model_dir):
    try:
        with open(os.path.join(model_dir, "checkpoint")) as f:
            match = STATE.search(f.read())
    except FileNotFoundError:
        return 0
    return int(match.group(1)) if match else 0


def run_once(args, rng, model_dir, seen_dir, log):
    """One run with a random number of workers; returns (workers, outcome, output)."""
    workers = rng.choice([1, 2, 3, 4])
    helper = [os.path.join(args.build, "tests/integration/input_shards_helper"), model_dir,
              "1000000000", os.path.join(seen_dir, "seen")]
    command = helper if workers == 1 else [
        os.path.join(args.build, "tools/cadre_launch"), "--max_restarts=0", "--chief=1",
        f"--workers={workers - 1}", "--", *helper]
    env = dict(os.environ, INPUT_SHARDS_EPOCHS=str(args.epochs),
               INPUT_SHARDS_STEP_MS=str(args.step_ms), INPUT_SHARDS_SAVE_STEPS=str(args.save_steps))
    env.pop("TF_CONFIG", None)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    tasks, lines = {}, []

    def pump():
        for line in process.stdout:
            lines.append(line)
            log.write(line)
            if match := STARTED.search(line):
                tasks[match.group(1)] = int(match.group(2))

    reader = threading.Thread(target=pump)
    reader.start()
    outcome = "ran to its end"
    try:
        process.wait(timeout=rng.expovariate(1.0 / args.mean_gap_s))
    except subprocess.TimeoutExpired:
        choice = rng.random()
        if choice < args.sigterm_share:
            outcome = "SIGTERM"
            process.send_signal(signal.SIGTERM)
        elif choice < 0.9:
            victims = dict(tasks) if tasks else {"chief:0": process.pid}
            name = rng.choice(sorted(victims))
            outcome = f"SIGKILL {name}"
            try:
                os.kill(victims[name], signal.SIGKILL)
            except ProcessLookupError:
                outcome = "ran to its end"
    try:
        process.wait(timeout=args.run_timeout_s)
    except subprocess.TimeoutExpired:
        outcome += ", then hung (killed)"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join()
    return workers, outcome, process.returncode, "".join(lines)


def records(path):
    with open(path) as f:
        for line in f:
            step, example = line.split()
            yield int(step), int(example)


def run_job(args, rng, job_dir, log):
    model_dir, seen_dir = os.path.join(job_dir, "model"), os.path.join(job_dir, "seen")
    os.makedirs(seen_dir)
    counts, runs, failures = collections.Counter(), [], []
    while True:
        before = set(os.listdir(seen_dir))
        workers, outcome, status, output = run_once(args, rng, model_dir, seen_dir, log)
        resumed_from = latest_step(model_dir)
        for name in set(os.listdir(seen_dir)) - before:
            for step, example in records(os.path.join(seen_dir, name)):
                if step < resumed_from:
                    counts[example] += 1
        runs.append(f"{workers}:{outcome}->{resumed_from}")
        for lost in ("from its start", "from the start"):
            if lost in output:
                failures.append(f"a run of {workers} worker(s) read its input {lost}")
        if status == 0 and '"global_step"' in output:
            break
        if len(runs) > 200:
            failures.append("no run reached the end of the input in 200 runs")
            break
    wrong = {e: counts[e] for e in range(EXAMPLES) if counts[e] != args.epochs}
    if wrong:
        sample = dict(list(sorted(wrong.items()))[:8])
        failures.append(f"{len(wrong)} example(s) not read {args.epochs} times: {sample}")
    return runs, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--out", default="/tmp/cadre_resize_chaos")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--step_ms", type=int, default=5)
    parser.add_argument("--save_steps", type=int, default=25)
    parser.add_argument("--mean_gap_s", type=float, default=3.0)
    parser.add_argument("--sigterm_share", type=float, default=0.3)
    parser.add_argument("--run_timeout_s", type=float, default=120)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    deadline = time.time() + args.minutes * 60
    summary = collections.Counter()
    all_failures = []
    with open(os.path.join(args.out, "log.txt"), "w") as log:
        job = 0
        while time.time() < deadline:
            runs, failures = run_job(args, rng, os.path.join(args.out, f"job-{job}"), log)
            summary["jobs"] += 1
            summary["runs"] += len(runs)
            summary["sigkills"] += sum("SIGKILL" in r for r in runs)
            summary["sigterms"] += sum("SIGTERM" in r for r in runs)
            summary["resizes"] += sum(a.split(":")[0] != b.split(":")[0]
                                      for a, b in zip(runs, runs[1:]))
            print(f"job {job}: {' '.join(runs)}: {'; '.join(failures) or 'exactly once'}",
                  flush=True)
            all_failures += [f"job {job}: {f}" for f in failures]
            job += 1
    summary["failures"] = len(all_failures)
    print(json.dumps({**summary, "failed": all_failures[:20]}))
    return 1 if all_failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
