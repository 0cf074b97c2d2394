#!/bin/bash
# What a planned stop costs: the seconds from SIGTERM to a durable checkpoint of the step
# reached (the chief logs it), for the Fashion-MNIST MLP in one process and for an embedding
# model of 512 MiB (2M x 64 float32, plus Adagrad's accumulators) on three ps tasks under
# cadre_launch. Each SIGTERM comes once training has logged `WAIT_LINES` progress lines.
#
#   tools/bench/planned_stop_cost.sh [ROUNDS]    (from the repository root, after ./dev build)
#
# Prints one line per run: the model and the seconds; docs/BENCHMARKS.md#planned-stop-cost
# has the table.
set -euo pipefail
rounds=${1:-5}
build=${BUILD_DIR:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# stop_after LOG PATTERN N PID: SIGTERM to PID once LOG has N lines matching PATTERN.
stop_after() {
  local log=$1 pattern=$2 n=$3 pid=$4
  for _ in $(seq 3000); do
    kill -0 "$pid" 2>/dev/null || return 0
    [ "$(grep -cE "$pattern" "$log" 2>/dev/null || true)" -ge "$n" ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
}

durable() { grep -oE 'is durable [0-9.e-]+ s after' "$1" | awk '{print $3}' | tail -1; }

for round in $(seq "$rounds"); do
  dir=$tmp/mlp_$round
  "$build/examples/fashion_mnist" --model_dir="$dir" --max_steps=100000000 \
    --save_checkpoints_steps=100000000 >"$dir.log" 2>&1 &
  pid=$!
  stop_after "$dir.log" ' step [0-9]+/' 3 $pid
  wait $pid || true
  [ -n "$(durable "$dir.log")" ] || { tail -20 "$dir.log" >&2; exit 1; }
  echo "mlp $(durable "$dir.log") s"

  dir=$tmp/emb_$round
  "$build/tools/cadre_launch" --chief=1 --ps=3 -- "$build/examples/embedding_classifier" \
    --model_dir="$dir" --vocab_size=2097152 --embedding_dim=64 --max_steps=100000000 \
    --save_checkpoints_steps=100000000 --examples=100000 >"$dir.log" 2>&1 &
  pid=$!
  stop_after "$dir.log" '\[chief:0\].* step [0-9]+/' 2 $pid
  wait $pid || true
  [ -n "$(durable "$dir.log")" ] || { tail -20 "$dir.log" >&2; exit 1; }
  echo "embedding-512MiB $(durable "$dir.log") s ($(du -sm "$dir"/model.ckpt-*.h5 | awk '{print $1}') MB checkpoint)"
done
