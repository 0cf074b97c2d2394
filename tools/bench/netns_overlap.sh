#!/usr/bin/env bash
# Two workers as two hosts on one machine: each in its own network namespace and on a CPU
# of its own (as separate machines have their own cores), joined by a veth pair limited to
# RATE by a token bucket (tc tbf), so that MultiWorkerMirrored's gradients cross a
# "network" as between real hosts (Gloo over TCP; separate namespaces count as separate
# hosts, so no shared memory). For each round it runs the MLP with the
# gradient buckets overlapping the backward pass and without (the same buckets after the
# pass), and one process on the per-worker batch (the compute-only step); prints the
# medians and the fraction of the all-reduce hidden behind the backward pass:
#   hidden = (step without overlap - step with) / (step without overlap - compute-only step)
# Needs root (ip netns, tc). This kernel has no netem, so links have a rate but no added
# delay. Everything it makes is removed on exit.
#
# EXTRA: further cadre_bench flags for both workers (e.g. "--piece_bytes=262144").
# BURST: the token bucket's burst (1mb; a step's gradients of 1 MB then cross at the
# veth's own speed, so a smaller burst makes the link's rate the limit).
# PROFILE=N: the chief profiles every N steps, and the script also prints the medians of
# its backward pass and of its wait for the all-reduce at the step's end (ms per step,
# over each run's windows but the first).
#
#   sudo tools/bench/netns_overlap.sh [BUILD=build] [RATE=10gbit] [BATCH=256] [ROUNDS=3] [MODEL=mlp]
set -euo pipefail
BUILD=${1:-build}
RATE=${2:-10gbit}
BATCH=${3:-256}
ROUNDS=${4:-3}
MODEL=${5:-mlp}
BENCH=$(realpath "$BUILD/tools/cadre_bench")
if [ "$(nproc)" -lt 2 ]; then echo "needs 2 CPUs, one per simulated host" >&2; exit 2; fi
NS=(cadre_bench_h0 cadre_bench_h1)
ADDR=(10.77.0.1 10.77.0.2)
PIDS=()

PHASES=$(mktemp -d)  # with PROFILE, the chief's phases per run

cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for ns in "${NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$PHASES"
}
trap cleanup EXIT INT TERM

for ns in "${NS[@]}"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add cadre_bv0 netns "${NS[0]}" type veth peer name cadre_bv1 netns "${NS[1]}"
for i in 0 1; do
  ip -n "${NS[$i]}" addr add "${ADDR[$i]}/24" dev "cadre_bv$i"
  ip -n "${NS[$i]}" link set "cadre_bv$i" up
  # A token bucket at RATE; a burst of 1 MB and 5 ms of queue keep TCP at the rate.
  ip netns exec "${NS[$i]}" tc qdisc add dev "cadre_bv$i" root tbf rate "$RATE" \
    burst "${BURST:-1mb}" latency 5ms
done

export CADRE_JOB_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
COMMON=(estimator --model="$MODEL" --threads=1 --autotune=false --train_steps=1500)
read -r -a EXTRA_FLAGS <<<"${EXTRA:-}"
if [ -n "${PROFILE:-}" ]; then EXTRA_FLAGS+=(--profile_every_n_steps="$PROFILE"); fi

# One two-host run; prints the chief's examples/sec. With PROFILE, appends its windows'
# backward and all_reduce phases (but the first window's) to $PHASES/<overlap>.
two_hosts() {
  local overlap=$1 port=$((20000 + RANDOM % 20000))
  local cluster="\"cluster\": {\"chief\": [\"${ADDR[0]}:$port\"], \"worker\": [\"${ADDR[1]}:$((port + 1))\"]}"
  local out log
  out=$(mktemp)
  log=$(mktemp)
  TF_CONFIG="{$cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
    ip netns exec "${NS[1]}" taskset -c 1 "$BENCH" "${COMMON[@]}" --batch_size="$BATCH" \
    --strategy=multi_worker_mirrored --overlap="$overlap" "${EXTRA_FLAGS[@]}" >/dev/null 2>&1 &
  PIDS+=($!)
  TF_CONFIG="{$cluster, \"task\": {\"type\": \"chief\", \"index\": 0}}" \
    ip netns exec "${NS[0]}" taskset -c 0 "$BENCH" "${COMMON[@]}" --batch_size="$BATCH" \
    --strategy=multi_worker_mirrored --overlap="$overlap" "${EXTRA_FLAGS[@]}" >"$out" 2>"$log"
  wait
  grep -o '"examples_per_sec":[0-9.]*' "$out" | cut -d: -f2
  awk '/profile of/ {w++} w > 1 && ($1 == "backward" || $1 == "all_reduce") {print $1, $2}' \
    "$log" >>"$PHASES/$overlap"
  rm -f "$out" "$log"
}

one_process() {
  taskset -c 0 "$BENCH" "${COMMON[@]}" --batch_size=$((BATCH / 2)) 2>/dev/null |
    grep -o '"examples_per_sec":[0-9.]*' | cut -d: -f2
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

on=() off=() alone=()
for ((r = 0; r < ROUNDS; r++)); do
  on+=("$(two_hosts true)")
  off+=("$(two_hosts false)")
  alone+=("$(one_process)")
  echo "round $r: overlap ${on[-1]} ex/s, after the pass ${off[-1]}, one process at batch $((BATCH / 2)) ${alone[-1]}" >&2
done
ON=$(printf '%s\n' "${on[@]}" | median)
OFF=$(printf '%s\n' "${off[@]}" | median)
ALONE=$(printf '%s\n' "${alone[@]}" | median)
# Step times in ms: a step of the two-host job is BATCH examples, the compute-only step
# BATCH/2 examples on one process.
awk -v on="$ON" -v off="$OFF" -v alone="$ALONE" -v b="$BATCH" -v rate="$RATE" 'BEGIN {
  t_on = 1e3 * b / on; t_off = 1e3 * b / off; t_c = 1e3 * (b / 2) / alone;
  printf "| link | global batch | step, overlapped | step, buckets after the pass | compute-only step | all-reduce hidden |\n";
  printf "| --- | --- | --- | --- | --- | --- |\n";
  hidden = (t_off > t_c) ? (t_off - t_on) / (t_off - t_c) : 0;
  printf "| %s | %d | %.3f ms (%.0f ex/s) | %.3f ms (%.0f ex/s) | %.3f ms | %.0f%% |\n", rate, b, t_on, on, t_off, off, t_c, 100 * hidden;
}'
if [ -n "${PROFILE:-}" ]; then
  for overlap in true false; do
    for phase in backward all_reduce; do
      printf '%s, overlap %s: median %s ms per step\n' "$phase" "$overlap" \
        "$(awk -v p="$phase" '$1 == p {print $2}' "$PHASES/$overlap" | median)"
    done
  done
fi
