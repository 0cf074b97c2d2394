#!/usr/bin/env python3
"""Reads the summaries of a whole distributed run with TensorBoard's own loaders.

Needs TensorBoard (pip install tensorboard; the TensorFlow of check_tf_reads_cadre.py is
optional); it is NOT run by ./dev test. The model_dir comes from a local cluster of a
chief, a worker and an evaluator (see tools/compat/README.md and docs/DEPLOY.md):

    rm -rf /tmp/tbrun
    build/tools/cadre_launch --chief=1 --workers=1 --evaluator=1 -- \
        build/examples/fashion_mnist --model_dir=/tmp/tbrun \
        --strategy=multi_worker_mirrored --max_steps=600 --save_checkpoints_steps=200 \
        --eval_steps=5
    python3 tools/compat/check_tensorboard_reads_run.py /tmp/tbrun

It checks, as TensorBoard would load them:
  (a) model_dir/eval holds exactly one events.out.tfevents.* file: one evaluator process
      writes one file, however many checkpoints it evaluates;
  (b) in it, the scalars `loss` and `accuracy` are at the checkpoints' steps (200, 400, 600
      by default, --eval_steps to change), once each and in increasing order, both in the
      records of the file (event_file_loader) and in what EventAccumulator returns;
  (c) model_dir itself (training) has the scalars `loss`, `learning_rate`,
      `global_step/sec` and `examples/sec`, each readable by EventAccumulator with finite
      values at increasing steps no later than the last evaluated step, and the scalars
      plugin (plugin_event_accumulator, what the TensorBoard server loads) lists them.
Exits 1 naming what differs.
"""
import argparse
import glob
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # when TensorBoard finds TensorFlow

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.backend.event_processing import plugin_event_accumulator

EVAL_TAGS = ("loss", "accuracy")
TRAIN_TAGS = ("loss", "learning_rate", "global_step/sec", "examples/sec")

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)
    return condition


def event_files(directory):
    return sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")))


def raw_scalar_steps(path):
    """{tag: [step, ...]} in the order of the file's records, as TensorBoard's loader reads
    them (CRCs checked), before any accumulator reorders, purges or samples."""
    steps = {}
    first = None
    for event in event_file_loader.LegacyEventFileLoader(path).Load():
        if first is None:
            first = event
        if event.HasField("summary"):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    steps.setdefault(value.tag, []).append(event.step)
    return first, steps


def accumulator(directory):
    # purge_orphaned_data=False: a step going backwards must show, not be dropped silently.
    acc = event_accumulator.EventAccumulator(
        directory, size_guidance={event_accumulator.SCALARS: 0}, purge_orphaned_data=False)
    acc.Reload()
    return acc


def increasing(steps):
    return all(a < b for a, b in zip(steps, steps[1:]))


def check_eval(model_dir, want_steps):
    eval_dir = os.path.join(model_dir, "eval")
    files = event_files(eval_dir)
    # (a) one evaluator process, one file.
    if not check(len(files) == 1, f"(a) {eval_dir} holds {len(files)} events.out.tfevents.* "
                 f"file(s) (want exactly 1): {[os.path.basename(f) for f in files]}"):
        if not files:
            return
    # (b) in the file's own record order.
    for path in files:
        first, raw = raw_scalar_steps(path)
        check(first is not None and first.file_version == "brain.Event:2",
              f"(b) {os.path.basename(path)}: first event file_version "
              f"{first.file_version if first else None!r} (want 'brain.Event:2')")
        for tag in EVAL_TAGS:
            got = raw.get(tag, [])
            check(got == want_steps,
                  f"(b) {os.path.basename(path)}: records of eval scalar '{tag}' at steps "
                  f"{got} (want {want_steps}, increasing, once each)")
    # (b) as EventAccumulator returns them.
    acc = accumulator(eval_dir)
    tags = acc.Tags()["scalars"]
    for tag in EVAL_TAGS:
        if not check(tag in tags, f"(b) EventAccumulator({eval_dir}) has scalar '{tag}' "
                     f"(scalars: {sorted(tags)})"):
            continue
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        values = [e.value for e in events]
        check(steps == want_steps and increasing(steps),
              f"(b) EventAccumulator eval '{tag}' steps {steps} (want {want_steps})")
        ok_values = all(math.isfinite(v) for v in values) and (
            tag != "accuracy" or all(0.0 <= v <= 1.0 for v in values))
        check(ok_values, f"(b) EventAccumulator eval '{tag}' values "
              f"{[round(v, 4) for v in values]} finite"
              + (" and in [0, 1]" if tag == "accuracy" else ""))


def check_training(model_dir, last_step):
    files = event_files(model_dir)
    if not check(len(files) >= 1, f"(c) {model_dir} holds {len(files)} training "
                 f"events.out.tfevents.* file(s) (want at least 1)"):
        return
    acc = accumulator(model_dir)  # the directory itself, not eval/ (not recursive)
    tags = acc.Tags()["scalars"]
    for tag in TRAIN_TAGS:
        if not check(tag in tags, f"(c) EventAccumulator({model_dir}) has scalar '{tag}' "
                     f"(scalars: {sorted(tags)})"):
            continue
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        values = [e.value for e in events]
        good = (len(events) > 0 and increasing(steps) and steps[-1] <= last_step
                and all(math.isfinite(v) for v in values)
                and (tag == "loss" or all(v > 0 for v in values)))
        check(good, f"(c) training '{tag}': {len(events)} points at steps {steps} "
              f"(want increasing, <= {last_step}), values "
              f"{[float(f'{v:.4g}') for v in values]} (want finite"
              + (")" if tag == "loss" else ", > 0)"))
    # What the TensorBoard server loads: the scalars plugin must list every tag.
    plugin_acc = plugin_event_accumulator.EventAccumulator(model_dir)
    plugin_acc.Reload()
    plugin_tags = plugin_acc.PluginTagToContent("scalars")
    missing = [tag for tag in TRAIN_TAGS if tag not in plugin_tags]
    check(not missing, f"(c) plugin_event_accumulator files {sorted(plugin_tags)} under the "
          f"scalars plugin (missing: {missing})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="the --model_dir of the run")
    parser.add_argument("--eval_steps", default="200,400,600",
                        help="the evaluated checkpoints' steps, comma-separated")
    args = parser.parse_args()
    if not os.path.isdir(args.model_dir):
        sys.exit(f"check_tensorboard_reads_run.py: no directory {args.model_dir}")
    want_steps = [int(s) for s in args.eval_steps.split(",")]
    check_eval(args.model_dir, want_steps)
    check_training(args.model_dir, want_steps[-1])
    print(f"{len(failures)} failure(s)" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
