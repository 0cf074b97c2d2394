#!/bin/bash
# What the job's secret and mutual TLS cost: the same parameter-server and multi-worker runs
# under cadre_launch with --insecure, with the job's secret (the default) and with --tls,
# interleaved round by round so that drift of the machine falls on all three alike.
#
#   tools/bench/security_cost.sh [ROUNDS]    (from the repository root, after ./dev build)
#
# Prints one JSON line per run, prefixed with the mode; docs/BENCHMARKS.md#security-cost has
# the figures.
set -euo pipefail
rounds=${1:-3}
launch=build/tools/cadre_launch
bench=build/tools/cadre_bench
json() { grep -E '^\[chief:0\] \{' | sed "s/^\[chief:0\] /$1 /"; }
for round in $(seq "$rounds"); do
  for mode in insecure secret tls; do
    flags=""
    [ "$mode" = insecure ] && flags=--insecure
    [ "$mode" = tls ] && flags=--tls
    echo "# round $round, $mode" >&2
    # Pulls and pushes of one variable, 4 KiB to 16 MiB.
    for bytes in 4096 65536 1048576 16777216; do
      $launch --chief=1 --ps=1 $flags -- $bench ps --bytes=$bytes 2>&1 | json "$mode ps"
    done
    # Training steps of the Fashion-MNIST MLP, variables on one ps task.
    $launch --chief=1 --ps=1 $flags -- $bench train --strategy=parameter_server \
      --batch_size=256 --windows=5 2>&1 | json "$mode ps-train"
    # A 4 MiB all-reduce between two processes (Gloo; the same in every mode).
    $launch --chief=1 --workers=1 $flags -- $bench allreduce --bytes=4194304 2>&1 | json "$mode allreduce"
    # Training steps of two MultiWorkerMirrored processes (coordination only; Gloo carries
    # the gradients and is the same in every mode).
    $launch --chief=1 --workers=1 $flags -- $bench train --strategy=multi_worker_mirrored \
      --batch_size=256 --windows=5 --threads=1 2>&1 | json "$mode mwms-train"
  done
done
