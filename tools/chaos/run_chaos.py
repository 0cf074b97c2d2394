#!/usr/bin/env python3
"""Random SIGKILLs of any role of real jobs, for minutes, and what survived them.

Runs examples/fashion_mnist under build/tools/cadre_launch, again and again, alternating a
MultiWorkerMirrored job (chief, worker, evaluator) and a ParameterServer job (chief, worker,
two ps tasks, evaluator). While a job runs it kills a random task (any role) with SIGKILL at
random times (exponential gaps, --mean_gap_s), at most --kills_per_job times. After each job
it checks what a user relies on:

  - cadre_launch exits 0 (it restarts what died: the evaluator or a ps worker alone, the
    training tasks together otherwise);
  - the chief's checkpoint of max_steps exists, and every checkpoint the state file names
    exists and passes `cadre_ckpt verify` (a missing or damaged one is a checkpoint lost);
  - no temporary file (*.tmp-*) and no lease is left in the model_dir;
  - the evaluator printed its final line, for max_steps;
  - MultiWorkerMirrored: the final variables equal, bit for bit (`cadre_ckpt diff`), those of
    the same job run once without kills.

    python3 tools/chaos/run_chaos.py --build build --minutes 10 --out /tmp/chaos

Prints one line per job and a JSON summary last: jobs, kills by role, restarts, checkpoints
lost (must be 0), failures. Exits 1 when any check failed. Needs only Python's standard
library and a build; not run by ./dev test (ChaosTest is its bounded, scheduled cousin).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

JOBS = {
    "mwms": {
        "tasks": ["--chief=1", "--workers=1", "--evaluator=1"],
        "flags": ["--strategy=multi_worker_mirrored", "--max_steps=1500",
                  "--save_checkpoints_steps=150", "--keep_checkpoint_max=3", "--eval_steps=5"],
        "max_steps": 1500,
        "exact": True,
    },
    "ps": {
        "tasks": ["--chief=1", "--workers=1", "--ps=2", "--evaluator=1"],
        "flags": ["--strategy=parameter_server", "--max_steps=1500",
                  "--save_checkpoints_steps=150", "--keep_checkpoint_max=3", "--eval_steps=5"],
        "max_steps": 1500,
        "exact": False,  # asynchronous workers: no two runs are alike
    },
}


def launch(build, job, model_dir, log_path, on_started=None):
    command = [os.path.join(build, "tools/cadre_launch"), "--max_restarts=100", *job["tasks"],
               "--", os.path.join(build, "examples/fashion_mnist"),
               f"--model_dir={model_dir}", *job["flags"]]
    pids = {}
    lock = threading.Lock()
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, errors="replace")

        def pump():
            for line in process.stdout:
                log.write(line)
                match = re.match(r"started (\S+) pid=(\d+)", line)
                if match:
                    with lock:
                        pids[match.group(1)] = int(match.group(2))
        reader = threading.Thread(target=pump)
        reader.start()
        if on_started:
            on_started(process, pids, lock)
        status = process.wait()
        reader.join()
    return status


def kill_randomly(rng, mean_gap_s, max_kills, kills, stop):
    def run(process, pids, lock):
        done = 0
        while done < max_kills and not stop.is_set():
            time.sleep(rng.expovariate(1.0 / mean_gap_s))
            if process.poll() is not None:
                return
            with lock:
                if not pids:
                    continue
                task = rng.choice(sorted(pids))
                pid = pids[task]
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue  # it had just finished
            role = task.split(":")[0]
            kills[role] = kills.get(role, 0) + 1
            done += 1
    return run


def checkpoint_files(model_dir):
    state = os.path.join(model_dir, "checkpoint")
    if not os.path.exists(state):
        return None
    return re.findall(r'all_model_checkpoint_paths: "([^"]+)"', open(state).read())


def check_job(build, job, model_dir, log_path, status, reference):
    problems, lost = [], 0
    text = open(log_path, errors="replace").read()
    if status != 0:
        problems.append(f"cadre_launch exited {status}")
    names = checkpoint_files(model_dir) or []
    final = f"model.ckpt-{job['max_steps']}.h5"
    if job["exact"] and final not in names:
        problems.append(f"{final} is not in the state file")
    for name in names:
        path = os.path.join(model_dir, name)
        if not os.path.exists(path):
            lost += 1
            problems.append(f"{name} is named by the state file but missing")
            continue
        verify = subprocess.run([os.path.join(build, "tools/cadre_ckpt"), "verify", path],
                                capture_output=True, text=True)
        if verify.returncode != 0:
            lost += 1
            problems.append(f"{name} fails verify: {verify.stdout.strip()} {verify.stderr.strip()}")
    for root, _, files in os.walk(model_dir):
        for name in files:
            if ".tmp-" in name or name.endswith(".lease"):
                problems.append(f"{os.path.join(root, name)} was left behind")
    evaluator = re.findall(r'\[evaluator:0\] (\{"task":"evaluator".*\})', text)
    if not evaluator:
        problems.append("no final line from the evaluator")
    elif f'"global_step":{job["max_steps"]}' not in evaluator[-1] and job["exact"]:
        problems.append(f"the evaluator ended at {evaluator[-1]}")
    if job["exact"] and reference:
        diff = subprocess.run([os.path.join(build, "tools/cadre_ckpt"), "diff",
                               os.path.join(reference, final), os.path.join(model_dir, final)],
                              capture_output=True, text=True)
        if diff.returncode != 0:
            problems.append("final variables differ from the run without kills: "
                            + diff.stdout.strip().splitlines()[-1])
    restarts = len(re.findall(r"^started ", text, re.M)) - sum(
        int(re.search(r"--(\w+)=(\d+)", t).group(2)) for t in job["tasks"])
    return problems, lost, restarts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--out", default="/tmp/cadre_chaos")
    parser.add_argument("--mean_gap_s", type=float, default=2.0)
    parser.add_argument("--kills_per_job", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)

    references = {}
    for name, job in JOBS.items():
        if job["exact"]:
            references[name] = os.path.join(args.out, f"{name}-reference")
            status = launch(args.build, job, references[name],
                            references[name] + ".log")
            if status != 0:
                sys.exit(f"the reference {name} job failed: see {references[name]}.log")

    summary = {"jobs": 0, "kills": {}, "restarts": 0, "checkpoints_lost": 0, "failures": [],
               "minutes": args.minutes, "seed": args.seed}
    deadline = time.time() + args.minutes * 60
    order = list(JOBS)
    while time.time() < deadline:
        name = order[summary["jobs"] % len(order)]
        job = JOBS[name]
        model_dir = os.path.join(args.out, f"{name}-{summary['jobs']}")
        log_path = model_dir + ".log"
        kills, stop = {}, threading.Event()
        started = time.time()
        status = launch(args.build, job, model_dir, log_path,
                        kill_randomly(rng, args.mean_gap_s, args.kills_per_job, kills, stop))
        stop.set()
        problems, lost, restarts = check_job(args.build, job, model_dir, log_path, status,
                                             references.get(name))
        summary["jobs"] += 1
        summary["restarts"] += restarts
        summary["checkpoints_lost"] += lost
        for role, n in kills.items():
            summary["kills"][role] = summary["kills"].get(role, 0) + n
        verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
        print(f"{name} job {summary['jobs']}: {time.time() - started:.0f} s, kills {kills}, "
              f"restarts {restarts}: {verdict}", flush=True)
        if problems:
            summary["failures"].append({"job": model_dir, "problems": problems})
        else:
            shutil.rmtree(model_dir, ignore_errors=True)
    print(json.dumps(summary))
    sys.exit(1 if summary["failures"] else 0)


if __name__ == "__main__":
    main()
