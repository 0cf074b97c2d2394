#!/bin/bash
# What input shards and deterministic steps cost: steps per second of the Fashion-MNIST MLP
# (batch 128) under MultiWorkerMirrored on 2 workers (cadre_launch, shared memory), with the
# input read as one pipeline per worker, as 8 and 64 input shards, and with deterministic
# steps; two rounds, the configurations alternating within each, since runs drift.
#
#   flock /tmp/cadre-build.lock tools/bench/input_shards_cost.sh build 3000
#
# Prints one line per run: the configuration and the median of the chief's steps/s progress
# figures after the first 500 steps.
set -euo pipefail
build=${1:-build}
steps=${2:-3000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
configs=("--input_shards=0" "--input_shards=8" "--input_shards=64"
         "--input_shards=8 --deterministic" "--input_shards=64 --deterministic")
for round in 1 2; do
  for config in "${configs[@]}"; do
    rm -rf "$dir/m"
    # shellcheck disable=SC2086
    "$build/tools/cadre_launch" --chief=1 --workers=1 -- "$build/examples/fashion_mnist" \
      --model_dir="$dir/m" --strategy=multi_worker_mirrored --batch_size=128 \
      --max_steps="$steps" --save_checkpoints_steps="$steps" --eval_steps=1 $config \
      > "$dir/log" 2>&1
    rate=$(grep '^\[chief:0\].* step [0-9]*/' "$dir/log" |
           awk '{for (i = 1; i <= NF; i++) if ($i == "step") split($(i + 1), s, "/");
                 for (i = 1; i <= NF; i++) if ($i == "steps/s" && s[1] > 500) print $(i - 1)}' |
           sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
    echo "round $round: $config: $rate steps/s"
  done
done
