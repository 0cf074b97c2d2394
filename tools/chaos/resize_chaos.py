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

With --elastic_share, that share of the multi-worker runs are elastic groups (cadre_launch
--elastic): the driver SIGKILLs one of their workers (once the group has stepped), which is
restarted alone while the others step on. The examples a killed worker's steps took count
unless its group stepped on without them (steps at or past the one the survivors took when
they went on without it). The examples then come in order (no shuffle), and each input
shard's must be a prefix of its numbers (v, v + 8, v + 16, ... over the epochs): read once,
in order, none skipped; a job whose elastic worker died may end before that worker's shards
do (its input waits for it while it is away), so only jobs without such a death must read
every example --epochs times.

With --ps_share, that share of the runs of 2-4 workers are ParameterServer jobs (a chief,
1-3 workers and a ps task, under cadre_launch --max_restarts=1): the driver SIGKILLs one of
their workers, which is restarted alone while the others push on, or SIGTERMs the launcher.
A killed worker's steps all count (the ps task kept them, and its restart reads on from what
ps 0 counted); a run's steps at or past the checkpoint the next run resumes from count for
nothing, as for the others. A worker killed between its push and the program's record of
what the push counted leaves that batch's examples pending: each may be read one time fewer.

With --client_share, that share of the runs of 2-4 workers are coordinator-mode jobs
(cadre_launch --client=1 --ps=1 --workers=N --max_restarts=1: no chief; a client task drives
the workers). The driver SIGKILLs the client, which is restarted alone (the new client, of
generation G+1, resumes from the last checkpoint and the workers read their input again from
that checkpoint's positions), or one worker, restarted alone (it reads on from the position ps
0 kept), or SIGTERMs the launcher. The program writes a worker's examples under the client of
generation G > 1 to SEEN_PREFIX-<pid>-g<G>: of those written under generation G, the steps at
or past the one a newer client of the same run resumed from ("client (generation G'):
resuming from ... at step S"; step 0 for one that found no checkpoint) count for nothing, as
do a run's steps at or past the checkpoint the next run resumes from. Pending examples (a
worker killed between its push and its record) may be read one time fewer, as for ps jobs;
every other example exactly --epochs times. A coordinator run that hangs, exits non-zero
other than after the launcher's SIGTERM, or ends without the client's "every worker's input
has ended" is a failure too.

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
SURVIVORS_TOOK = re.compile(r"\[chief:0\].*members took step (\d+)")
# A client of coordinator mode that resumed, and one a worker followed (from its first unit).
CLIENT_RESUMED = re.compile(r"client \(generation (\d+)\): resuming from \S+ at step (\d+)")
NEW_CLIENT = re.compile(r"a new client \(generation (\d+), after (\d+)\)")
INPUT_ENDED = "client: every worker's input has ended"
SEEN_FILE = re.compile(r"seen-(\d+)(?:-g(\d+))?$")
EXAMPLES = 480
SHARDS = 8


def latest_step(model_dir):
    try:
        with open(os.path.join(model_dir, "checkpoint")) as f:
            match = STATE.search(f.read())
    except FileNotFoundError:
        return 0
    return int(match.group(1)) if match else 0


def kill_one(rng, tasks, prefix, label):
    """SIGKILLs one of the running tasks whose name starts with `prefix`; returns the
    outcome's words and the task's name (None when none was running)."""
    name = rng.choice(sorted(n for n in tasks if n.startswith(prefix)) or [None])
    if not name:
        return "ran to its end", None
    try:
        os.kill(tasks[name], signal.SIGKILL)
    except ProcessLookupError:
        return "ran to its end", name
    return f"SIGKILL {label} {name}", name


def run_once(args, rng, model_dir, seen_dir, log):
    """One run with a random number of workers; returns (workers, outcome, status, output,
    the pid of an elastic worker killed or None)."""
    workers = rng.choice([1, 2, 3, 4])
    # Drawn only when asked for, so that the other modes' runs stay those of their seed.
    on_client = workers > 1 and args.client_share > 0 and rng.random() < args.client_share
    on_ps = workers > 1 and not on_client and rng.random() < args.ps_share
    elastic = workers > 1 and not on_ps and not on_client and rng.random() < args.elastic_share
    helper = [os.path.join(args.build, "tests/integration/input_shards_helper"), model_dir,
              "1000000000", os.path.join(seen_dir, "seen")]
    launch = (["--elastic", "--max_restarts=3"] if elastic else
              ["--ps=1", "--max_restarts=1"] if on_ps else ["--max_restarts=0"])
    command = helper if workers == 1 else [
        os.path.join(args.build, "tools/cadre_launch"), *launch, "--chief=1",
        f"--workers={workers - 1}", "--", *helper]
    if on_client:  # no chief: the client drives `workers` workers
        command = [os.path.join(args.build, "tools/cadre_launch"), "--client=1", "--ps=1",
                   f"--workers={workers}", "--max_restarts=1", "--", *helper]
    env = dict(os.environ, INPUT_SHARDS_EPOCHS=str(args.epochs),
               INPUT_SHARDS_STEP_MS=str(args.step_ms), INPUT_SHARDS_SAVE_STEPS=str(args.save_steps),
               INPUT_SHARDS_SHUFFLE="0" if args.elastic_share > 0 else "1",
               INPUT_SHARDS_ELASTIC="1" if elastic else "0")
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
    outcome, killed, name = "ran to its end", None, None
    try:
        process.wait(timeout=rng.expovariate(1.0 / args.mean_gap_s))
    except subprocess.TimeoutExpired:
        choice = rng.random()
        if choice < args.sigterm_share:
            outcome = "SIGTERM"
            process.send_signal(signal.SIGTERM)
        elif elastic:
            # A worker of a group that has stepped: before its first step a death restarts
            # the group as without --elastic.
            while process.poll() is None and not any("saved checkpoint" in l for l in lines):
                time.sleep(0.05)
            name = rng.choice(sorted(n for n in tasks if n.startswith("worker:")))
            outcome = f"SIGKILL elastic {name}"
            try:
                os.kill(tasks[name], signal.SIGKILL)
                killed = tasks[name]
            except ProcessLookupError:
                outcome = "ran to its end"
        elif on_client:
            # The client (restarted alone: the new one resumes from the last checkpoint) or a
            # worker (restarted alone: it reads on from the position ps 0 kept).
            kind = "client" if rng.random() < 0.5 else "worker"
            while process.poll() is None and not any(n.startswith(kind) for n in tasks):
                time.sleep(0.05)
            outcome, name = kill_one(rng, tasks, kind, "client-job")
        elif on_ps:
            # A worker only: a chief or ps task that dies restarts the cluster within the
            # run, whose steps past its checkpoint this driver could not tell apart.
            outcome, name = kill_one(rng, tasks, "worker:", "ps-job")
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
    if on_client and outcome.startswith("SIGKILL") and \
            f"{name} failed (killed by signal 9); restarting it" not in "".join(lines):
        outcome += " (not restarted)"  # it had ended, or the launcher was ending
    label = f"{workers}c" if on_client else f"{workers}ps" if on_ps else workers
    return label, outcome, process.returncode, "".join(lines), killed


def records(path):
    with open(path) as f:
        for line in f:
            step, example = line.split()
            yield int(step), int(example)


def run_job(args, rng, job_dir, log):
    model_dir, seen_dir = os.path.join(job_dir, "model"), os.path.join(job_dir, "seen")
    os.makedirs(seen_dir)
    taken, runs, failures = [], [], []  # taken: (step, example) of the steps that count
    unconfirmed = set()  # examples of pushes whose worker died before recording them
    elastic_deaths = 0
    runs_output = []  # the coordinator runs' output, kept in the job's directory on a failure
    while True:
        before = set(os.listdir(seen_dir))
        workers, outcome, status, output, killed = run_once(args, rng, model_dir, seen_dir, log)
        resumed_from = latest_step(model_dir)
        # A killed elastic worker's steps from the one its group went on from count for nothing.
        void_from = {}
        if killed is not None:
            elastic_deaths += 1
            if match := SURVIVORS_TOOK.search(output):
                void_from[f"seen-{killed}"] = int(match.group(1))
            elif '"task":"chief"' not in output:  # else it died as the group finished
                failures.append(f"a run of {workers} worker(s) lost an elastic worker but its "
                                "group never went on without it")
        new_files = set(os.listdir(seen_dir)) - before
        on_client = str(workers).endswith("c")
        # Coordinator mode: the step each client of this run resumed from, by generation (0
        # for one that found no checkpoint: every file's generation dispatched units).
        starts = {int(g): int(s) for g, s in CLIENT_RESUMED.findall(output)} if on_client else {}
        for generation in [generation_of(name) for name in new_files] + \
                [int(g) for g, _ in NEW_CLIENT.findall(output)]:
            if on_client:
                starts.setdefault(generation, 0)
        for name in new_files:
            pending = collections.Counter()
            # A newer client of this run restored a checkpoint: what the workers took under
            # this file's client from its step counts for nothing.
            newer = min((s for g, s in starts.items() if g > generation_of(name)),
                        default=resumed_from)
            for step, example in records(os.path.join(seen_dir, name)):
                pending[example] += 1 if step < 0 else -1
                if 0 <= step < min(resumed_from, void_from.get(name, resumed_from), newer):
                    taken.append((step, example))
            unconfirmed.update(e for e, n in pending.items() if n > 0)
        if on_client:
            if "hung" in outcome:
                failures.append(f"a coordinator run of {workers} ({outcome}) hung")
            elif status != 0 and outcome != "SIGTERM":
                failures.append(f"a coordinator run of {workers} ({outcome}) exited {status}")
            elif status == 0 and INPUT_ENDED not in output:
                failures.append(f"a coordinator run of {workers} ({outcome}) exited 0 without "
                                "the client's end of the input")
            runs_output.append(output)
        runs.append(f"{workers}:{outcome}->{resumed_from}")
        for lost in ("from its start", "from the start"):
            if lost in output:
                failures.append(f"a run of {workers} worker(s) read its input {lost}")
        if status == 0 and '"global_step"' in output:
            break
        if len(runs) > 200:
            failures.append("no run reached the end of the input in 200 runs")
            break
    if args.elastic_share > 0:
        failures += out_of_order(taken)
    counts = collections.Counter(example for _, example in taken)
    wrong = {e: counts[e] for e in range(EXAMPLES)
             if counts[e] != args.epochs and not (e in unconfirmed and counts[e] == args.epochs - 1)}
    # Pending examples accepted one time fewer (their push counted, only ps 0 knows).
    read_fewer = sum(e in unconfirmed and counts[e] == args.epochs - 1 for e in range(EXAMPLES))
    if wrong and not elastic_deaths:
        sample = dict(list(sorted(wrong.items()))[:8])
        failures.append(f"{len(wrong)} example(s) not read {args.epochs} times: {sample}")
    if failures and runs_output:
        with open(os.path.join(job_dir, "coordinator_runs.txt"), "w") as f:
            f.write("".join(f"==== run\n{o}" for o in runs_output))
    return runs, failures, read_fewer


def generation_of(name):
    """The client generation a seen file's examples were taken under (1 without -g<G>)."""
    match = SEEN_FILE.search(name)
    return int(match.group(2) or 1) if match else 1


def out_of_order(taken):
    """Where an input shard's examples, by step, are not a prefix of its numbers."""
    by_shard = collections.defaultdict(list)
    for step, example in sorted(taken, key=lambda record: record[0]):  # stable within a step
        by_shard[example % SHARDS].append((step, example))
    failures = []
    for shard, examples in sorted(by_shard.items()):
        for i, (step, example) in enumerate(examples):
            if example != (shard + SHARDS * i) % EXAMPLES:
                failures.append(f"input shard {shard}: example {i} (step {step}) is {example}, "
                                f"expected {(shard + SHARDS * i) % EXAMPLES}")
                break
    return failures


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
    parser.add_argument("--elastic_share", type=float, default=0.0)
    parser.add_argument("--ps_share", type=float, default=0.0)
    parser.add_argument("--client_share", type=float, default=0.0)
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
            runs, failures, read_fewer = run_job(args, rng, os.path.join(args.out, f"job-{job}"),
                                                 log)
            summary["pending_read_fewer"] += read_fewer
            summary["jobs"] += 1
            summary["runs"] += len(runs)
            summary["sigkills"] += sum("SIGKILL" in r for r in runs)
            summary["elastic_sigkills"] += sum("SIGKILL elastic" in r for r in runs)
            summary["ps_runs"] += sum(r.split(":")[0].endswith("ps") for r in runs)
            summary["ps_sigkills"] += sum("SIGKILL ps-job" in r for r in runs)
            summary["client_runs"] += sum(r.split(":")[0].endswith("c") for r in runs)
            summary["client_sigkills"] += sum("SIGKILL client-job client" in r and
                                              "not restarted" not in r for r in runs)
            summary["client_worker_sigkills"] += sum("SIGKILL client-job worker" in r and
                                                     "not restarted" not in r for r in runs)
            summary["client_sigterms"] += sum(r.split(":")[0].endswith("c") and "SIGTERM" in r
                                              for r in runs)
            summary["sigterms"] += sum("SIGTERM" in r for r in runs)
            summary["resizes"] += sum(a.split(":")[0] != b.split(":")[0]
                                      for a, b in zip(runs, runs[1:]))
            fewer = f" ({read_fewer} pending read one time fewer)" if read_fewer else ""
            print(f"job {job}: {' '.join(runs)}: {'; '.join(failures) or 'exactly once'}{fewer}",
                  flush=True)
            all_failures += [f"job {job}: {f}" for f in failures]
            job += 1
    summary["failures"] = len(all_failures)
    print(json.dumps({**summary, "failed": all_failures[:20]}))
    return 1 if all_failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
