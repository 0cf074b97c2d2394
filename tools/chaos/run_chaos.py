#!/usr/bin/env python3
"""Random SIGKILLs (and, with --sigterm_share, SIGTERMs) of any role of real jobs, for minutes.

Runs examples/fashion_mnist under build/tools/cadre_launch, again and again, in turn a
MultiWorkerMirrored job (chief, worker, evaluator), a ParameterServer job (chief, worker,
two ps tasks, evaluator) and an elastic MultiWorkerMirrored job (chief, two workers,
evaluator, --elastic: a killed worker restarts alone and rejoins); --jobs chooses among them. While a job runs it disrupts a random task (any role) at random
times (exponential gaps, --mean_gap_s), at most --kills_per_job times: with SIGKILL, or, a
--sigterm_share of the time, with SIGTERM, a planned stop (a pod evicted, a spot instance
reclaimed, Slurm's time limit). With --sigterm_share > 0 the launcher itself is a target too;
after a launcher ended by a signal the driver runs the same command again, as a user would.
No process is signalled twice (a second SIGTERM kills at once, by design). After each job it
checks what a user relies on:

  - cadre_launch exits 0 in the end (it restarts what died: the evaluator, a ps worker or an
    elastic job's worker alone, the training tasks together otherwise);
  - the chief's checkpoint of max_steps exists, and every checkpoint the state file names
    exists and passes `cadre_ckpt verify` (a missing or damaged one is a checkpoint lost);
  - no temporary file (*.tmp-*) and no lease is left in the model_dir;
  - the evaluator printed its final line, for max_steps;
  - MultiWorkerMirrored: the final variables equal, bit for bit (`cadre_ckpt diff`), those of
    the same job run once without kills;
  - every planned stop of the chief ("a planned stop (...) at step N", whether the SIGTERM
    went to the chief, a worker, a ps task or the launcher) names model.ckpt-N.h5 as its
    checkpoint, which exists when the line is printed (else a checkpoint lost), and the next
    start of the chief resumes from step N (else N - M steps lost); under MultiWorkerMirrored
    the worker stops after the chief's step, under ParameterServer a worker the ps tasks told
    of the job's stop within the steps it had in flight (else the steps past N are lost).

    python3 tools/chaos/run_chaos.py --build build --minutes 10 --out /tmp/chaos
    python3 tools/chaos/run_chaos.py --build build --minutes 10 --sigterm_share 0.5

Prints one line per job and a JSON summary last: jobs, kills and SIGTERMs by role, restarts,
launcher reruns, planned stops checked, checkpoints lost and steps lost (both must be 0),
failures. Exits 1 when any check failed. Needs only Python's standard library and a build;
not run by ./dev test (ChaosTest is its bounded, scheduled cousin).
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
    # A worker killed leaves the others stepping and rejoins alone (docs/DEPLOY.md, Elastic
    # MultiWorkerMirrored); its steps without the worker differ from an undisturbed run.
    "mwms_elastic": {
        "tasks": ["--chief=1", "--workers=2", "--evaluator=1"],
        "launch": ["--elastic"],
        "flags": ["--strategy=multi_worker_mirrored", "--elastic", "--batch_size=129",
                  "--max_steps=1500", "--save_checkpoints_steps=150", "--keep_checkpoint_max=3",
                  "--eval_steps=5"],
        "max_steps": 1500,
        "exact": False,
    },
}

STOP = re.compile(r"^\[(chief|worker):0\] \S+: a planned stop \((.*)\) at step (\d+)"
                  r"(?:; its checkpoint is (\S+?);)?")
RESUME = re.compile(r"^\[chief:0\] .* resuming from (\S+) at step (\d+)")


class Launches:
    """The job's command run until it ends other than by a launcher signal of the chaos
    thread, which is then run again; one log for all, with the chaos thread's lines in it."""

    def __init__(self, build, job, model_dir, log_path):
        self.command = [os.path.join(build, "tools/cadre_launch"), "--max_restarts=100",
                        *job.get("launch", []), *job["tasks"], "--", os.path.join(build, "examples/fashion_mnist"),
                        f"--model_dir={model_dir}", *job["flags"]]
        self.model_dir = model_dir
        self.log = open(log_path, "w")
        self.lock = threading.Lock()
        self.process = None
        self.pids = {}             # of the current launcher's tasks, by "type:index"
        self.signalled = set()     # pids the chaos thread signalled (never twice)
        self.launcher_signal = 0   # what the chaos thread sent the current launcher
        self.finished = False
        self.reruns = 0
        self.missing = []          # checkpoints a planned stop named that were not there

    def write(self, line):
        with self.lock:
            self.log.write(line + "\n")
            self.log.flush()

    def run(self):
        while True:
            process = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, errors="replace")
            with self.lock:
                self.process, self.pids, self.launcher_signal = process, {}, 0
            reader = threading.Thread(target=self.pump, args=(process,))
            reader.start()
            status = process.wait()
            reader.join()
            with self.lock:
                sent = self.launcher_signal
                self.process = None
            if not sent:
                break
            self.reruns += 1
            self.write(f"chaos: the launcher ended with status {status} after "
                       f"{signal.Signals(sent).name}; running the same command again")
        with self.lock:
            self.finished = True
        self.log.close()
        return status

    def pump(self, process):
        for line in process.stdout:
            with self.lock:
                self.log.write(line)
                match = re.match(r"started (\S+) pid=(\d+)", line)
                if match:
                    self.pids[match.group(1)] = int(match.group(2))
            stop = STOP.match(line)
            if stop and stop.group(1) == "chief" and int(stop.group(3)) > 0:
                # Checked now: retention may delete it once training has gone on.
                path = stop.group(4) or ""
                expected = f"model.ckpt-{stop.group(3)}.h5"
                if os.path.basename(path) != expected or not os.path.exists(path):
                    self.missing.append(f"the planned stop at step {stop.group(3)} names "
                                        f"{path or 'no checkpoint'} (exists: "
                                        f"{bool(path) and os.path.exists(path)})")


def disrupt_randomly(rng, args, launches, counts, stop):
    """Up to args.kills_per_job signals to random tasks (and the launcher) of `launches`."""
    done = 0
    while done < args.kills_per_job and not stop.is_set():
        time.sleep(rng.expovariate(1.0 / args.mean_gap_s))
        with launches.lock:
            if launches.finished:
                return
            process = launches.process
            if process is None or process.poll() is not None or not launches.pids:
                continue
            targets = sorted(t for t, pid in launches.pids.items()
                             if pid not in launches.signalled)
            if args.sigterm_share > 0 and not launches.launcher_signal:
                targets.append("launcher")
            if not targets:
                continue
            target = rng.choice(targets)
            sig = signal.SIGTERM if rng.random() < args.sigterm_share else signal.SIGKILL
            if launches.launcher_signal and sig == signal.SIGTERM:
                continue  # the launcher is stopping every task: this would be a second signal
            pid = process.pid if target == "launcher" else launches.pids[target]
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue  # it had just finished
            launches.signalled.add(pid)
            if target == "launcher":
                launches.launcher_signal = sig
            launches.log.write(f"chaos: {sig.name} to {target} pid={pid}\n")
        role = target.split(":")[0]
        key = "sigterms" if sig == signal.SIGTERM else "kills"
        counts[key][role] = counts[key].get(role, 0) + 1
        done += 1


def checkpoint_files(model_dir):
    state = os.path.join(model_dir, "checkpoint")
    if not os.path.exists(state):
        return None
    return re.findall(r'all_model_checkpoint_paths: "([^"]+)"', open(state).read())


# A parameter-server worker told of the job's stop by the ps tasks may finish the steps it
# had in flight after the chief's checkpoint; more is steps lost.
PS_STEPS_IN_FLIGHT = 5


def check_planned_stops(text, job):
    """Every planned stop of the chief resumed from its step; the workers stopped after the
    chief's step (MultiWorkerMirrored), or within the steps in flight of it (a ParameterServer
    job's stop, which the ps tasks tell the workers). Returns (problems, stops checked, steps
    lost)."""
    problems, checked, steps_lost = [], 0, 0
    pending = None  # the chief's last planned stop not yet resumed from
    chief, workers = None, []  # the planned stops since the chief last started

    def end_of_generation():
        nonlocal steps_lost
        if chief is None:
            return
        for reason, step in workers:
            if job["exact"] and step != chief:
                problems.append(f"the worker stopped after step {step}, the chief after {chief}")
            elif (not job["exact"] and "told by a ps task" in reason
                  and step > chief + PS_STEPS_IN_FLIGHT):
                steps_lost += step - chief
                problems.append(f"the worker stepped on to step {step} after the chief's "
                                f"checkpoint of step {chief}")

    for line in text.splitlines():
        if line.startswith("started chief:0 ") or line.startswith("chaos: the launcher ended"):
            end_of_generation()
            chief, workers = None, []
            continue
        stop = STOP.match(line)
        if stop:
            step = int(stop.group(3))
            if stop.group(1) == "worker":
                workers.append((stop.group(2), step))
            else:
                chief = step
                if step > 0:
                    pending = step
            continue
        resume = RESUME.match(line)
        if resume and pending is not None:
            checked += 1
            step = int(resume.group(2))
            if step != pending:
                steps_lost += max(0, pending - step)
                problems.append(f"the chief stopped at step {pending}, the next run resumed "
                                f"from {resume.group(1)} at step {step}")
            pending = None
    end_of_generation()
    if pending is not None:
        problems.append(f"no run resumed after the planned stop at step {pending}")
    return problems, checked, steps_lost


def check_job(build, job, model_dir, log_path, status, reference, missing):
    problems, lost = list(missing), len(missing)
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
    stop_problems, stops, steps_lost = check_planned_stops(text, job)
    problems += stop_problems
    launches = len(re.findall(r"^chaos: the launcher ended", text, re.M)) + 1
    restarts = len(re.findall(r"^started ", text, re.M)) - launches * sum(
        int(re.search(r"--(\w+)=(\d+)", t).group(2)) for t in job["tasks"])
    return problems, lost, restarts, stops, steps_lost


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--out", default="/tmp/cadre_chaos")
    parser.add_argument("--mean_gap_s", type=float, default=2.0)
    parser.add_argument("--kills_per_job", type=int, default=4)
    parser.add_argument("--sigterm_share", type=float, default=0.0,
                        help="the share of signals that are SIGTERM (planned stops), the "
                             "launcher among their targets; 0: SIGKILLs of tasks only")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", default=",".join(JOBS),
                        help="the kinds of job to run in turn, of " + ", ".join(JOBS))
    args = parser.parse_args()
    order = args.jobs.split(",")
    for name in order:
        if name not in JOBS:
            sys.exit(f"--jobs: unknown job '{name}'; expected some of {', '.join(JOBS)}")
    rng = random.Random(args.seed)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)

    references = {}
    for name, job in ((n, JOBS[n]) for n in order):
        if job["exact"]:
            references[name] = os.path.join(args.out, f"{name}-reference")
            status = Launches(args.build, job, references[name], references[name] + ".log").run()
            if status != 0:
                sys.exit(f"the reference {name} job failed: see {references[name]}.log")

    summary = {"jobs": 0, "kills": {}, "sigterms": {}, "restarts": 0, "launcher_reruns": 0,
               "planned_stops_checked": 0, "checkpoints_lost": 0, "steps_lost": 0,
               "failures": [], "minutes": args.minutes, "sigterm_share": args.sigterm_share,
               "seed": args.seed}
    deadline = time.time() + args.minutes * 60
    while time.time() < deadline:
        name = order[summary["jobs"] % len(order)]
        job = JOBS[name]
        model_dir = os.path.join(args.out, f"{name}-{summary['jobs']}")
        log_path = model_dir + ".log"
        counts, stop = {"kills": {}, "sigterms": {}}, threading.Event()
        started = time.time()
        launches = Launches(args.build, job, model_dir, log_path)
        chaos = threading.Thread(target=disrupt_randomly,
                                 args=(rng, args, launches, counts, stop))
        chaos.start()
        status = launches.run()
        stop.set()
        chaos.join()
        problems, lost, restarts, stops, steps_lost = check_job(
            args.build, job, model_dir, log_path, status, references.get(name), launches.missing)
        summary["jobs"] += 1
        summary["restarts"] += restarts
        summary["launcher_reruns"] += launches.reruns
        summary["planned_stops_checked"] += stops
        summary["checkpoints_lost"] += lost
        summary["steps_lost"] += steps_lost
        for key in ("kills", "sigterms"):
            for role, n in counts[key].items():
                summary[key][role] = summary[key].get(role, 0) + n
        verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
        sigterms = f", SIGTERMs {counts['sigterms']}" if args.sigterm_share > 0 else ""
        print(f"{name} job {summary['jobs']}: {time.time() - started:.0f} s, kills "
              f"{counts['kills']}{sigterms}, restarts {restarts}, planned stops checked "
              f"{stops}: {verdict}", flush=True)
        if problems:
            summary["failures"].append({"job": model_dir, "problems": problems})
        else:
            shutil.rmtree(model_dir, ignore_errors=True)
    print(json.dumps(summary))
    sys.exit(1 if summary["failures"] else 0)


if __name__ == "__main__":
    main()
