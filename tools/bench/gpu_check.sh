#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU. PARTS (default "tests nccl estimator speed")
# chooses what runs:
#   tests      every kernel against the CPU's, training against the CPU's losses
#   nccl       NCCL and gradient buckets on its stream, and a one-worker MultiWorkerMirrored
#              job over NCCL with buckets summed beside the backward pass and after it (the
#              two checkpoints compared bit for bit by `cadre_ckpt diff`)
#   estimator  examples/fashion_mnist on gpu:0 to its accuracy, resumed on cpu:0, then back
#              on gpu:0; the CNN on $gpu
#   speed      rounds of `cadre_bench train` on gpu:0 (float32, TF32, bf16) alternating with
#              PyTorch in each configuration of tools/bench/torch_gpu_peer.py, then the
#              Estimator's step on gpu:0 with its profile
#
#   PARTS="estimator speed" tools/bench/gpu_check.sh OUT_DIR [DATA_DIR] [ROUNDS]
#
# Run from the repository root. Programs come from build/ (configured with -DCADRE_CUDA=ON
# or AUTO where nvcc is found), or, with BUNDLE=DIR, through DIR/run NAME (a bundle of the
# programs and their libraries built elsewhere; docs/GPU.md). GPU_DEVICE (default gpu:0) is
# the device checked. OUT_DIR gets one log per part,
# precompile.log (torch.compile's first compiles) and summary.txt with each step's status and
# every result's JSON line; model_dirs go to a temporary directory, removed at the end.
set -u
out=${1:?usage: gpu_check.sh OUT_DIR [DATA_DIR] [ROUNDS]}
data=${2:-/usr/share/datasets/fashion-mnist}
rounds=${3:-1}
parts=" ${PARTS:-tests nccl estimator speed} "
torch_configs=${TORCH_CONFIGS:-eager,eager-tf32,eager-bf16,graphs-tf32,graphs-bf16,compile-tf32,max-autotune-tf32}
windows="--windows=5 --window_s=0.4"
gpu=${GPU_DEVICE:-gpu:0}  # cpu:0 runs the script's steps on a host without one
shapes="mlp:256 mlp:4096 cnn:256 cnn:4096"
mkdir -p "$out"
summary=$out/summary.txt
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT

# The command that starts a program by name (no spaces in the paths: it is word-split).
program() {
  if [ -n "${BUNDLE:-}" ]; then
    echo "$BUNDLE/run $1"
  else
    find build/tests build/tools build/examples -maxdepth 2 -type f -name "$1" | head -1
  fi
}
# step NAME SECONDS LOG COMMAND...: runs a bounded step, appends its output to LOG.
step() {
  local name=$1 limit=$2 log=$3; shift 3
  local start=$SECONDS
  echo "=== $name" >>"$out/$log"
  timeout "$limit" "$@" >>"$out/$log" 2>&1
  echo "$name rc=$? $((SECONDS - start))s" >>"$summary"
}
has() { [[ $parts == *" $1 "* ]]; }
any_alive() {
  local p
  for p; do kill -0 "$p" 2>/dev/null && return 0; done
  return 1
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$summary" 2>&1

# torch.compile's first compile of each shape (a minute or more under max-autotune) runs, the
# shapes side by side, beside the untimed parts, so that the timed runs find its caches
# warm; it is over, or stopped, before anything is timed.
compiled=$(tr , '\n' <<<"$torch_configs" | grep -E 'compile|autotune' | paste -sd, -)
precompiling=()
if has speed && [ -n "$compiled" ]; then
  for s in $shapes; do
    timeout 300 python3 tools/bench/torch_gpu_peer.py --model "${s%:*}" --batch_size "${s#*:}" \
      --configs "$compiled" --windows 1 --window_s 0.1 --data_dir "$data" \
      >>"$out/precompile.log" 2>&1 &
    precompiling+=($!)
  done
fi

if has tests; then
  step kernels 120 tests.log $(program core_test) --gtest_filter='CudaTest.*:GpuRuntimeTest.*'
  step training 90 tests.log $(program integration_test) --gtest_filter='CudaTest.*'
  grep -E '^\[  (PASSED|FAILED)' "$out/tests.log" >>"$summary"
fi

if has nccl; then
  step nccl 60 nccl.log $(program strategies_test) --gtest_filter='Nccl*:GradientBuckets*'
  # Small buckets and a kernel in pieces, so that many sums are queued while the pass runs.
  mwms="--strategy=multi_worker_mirrored --devices=$gpu --model=mlp --batch_size=256
    --train_steps=400 --data_dir=$data --first_bucket_bytes=4096 --bucket_bytes=65536
    --piece_bytes=262144"
  for overlap in true false; do
    step "mwms overlap=$overlap" 60 nccl.log $(program cadre_launch) --chief=1 --workers=0 -- \
      $(program cadre_bench) estimator $mwms --overlap=$overlap --model_dir="$models/mwms_$overlap"
  done
  step "mwms same variables" 30 nccl.log $(program cadre_ckpt) diff "$models/mwms_true" \
    "$models/mwms_false"
fi

if has estimator; then
  # A model_dir trained on the GPU, resumed on the CPU, and back: the accuracy after each.
  fm="--model=mlp --batch_size=256 --save_checkpoints_steps=500 --data_dir=$data"
  step "fashion_mnist mlp $gpu to 3000" 120 estimator.log $(program fashion_mnist) $fm \
    --devices=$gpu --max_steps=3000 --model_dir="$models/mlp"
  step "fashion_mnist mlp cpu:0 to 3500" 120 estimator.log $(program fashion_mnist) $fm \
    --devices=cpu:0 --max_steps=3500 --model_dir="$models/mlp"
  step "fashion_mnist mlp $gpu to 4000" 120 estimator.log $(program fashion_mnist) $fm \
    --devices=$gpu --max_steps=4000 --model_dir="$models/mlp"
  step "fashion_mnist cnn $gpu to 2000" 120 estimator.log $(program fashion_mnist) \
    --model=cnn --batch_size=256 --devices=$gpu --max_steps=2000 --data_dir="$data" \
    --model_dir="$models/cnn"
  grep -h '^{' "$out/estimator.log" >>"$summary"
fi

if has speed; then
  while [ "${#precompiling[@]}" -gt 0 ] && [ "$SECONDS" -lt "${PRECOMPILE_WAIT:-200}" ] &&
    any_alive "${precompiling[@]}"; do
    sleep 1
  done
  if [ "${#precompiling[@]}" -gt 0 ]; then
    kill "${precompiling[@]}" 2>/dev/null
    wait "${precompiling[@]}"
    echo "precompile over at ${SECONDS}s" >>"$summary"
    grep -h '^{' "$out/precompile.log" >>"$summary"
  fi
  for model in mlp cnn; do
    step "estimator $model $gpu" 90 bench.log $(program cadre_bench) estimator --devices=$gpu \
      --model=$model --train_steps=3000 --float32_precision=tf32 --profile_every_n_steps=1000 \
      --data_dir="$data"
  done
  for round in $(seq "$rounds"); do
    for s in $shapes; do
      model=${s%:*} batch=${s#*:}
      for precision in float32 tf32 bf16; do
        extra=
        [ "$s:$precision" = cnn:4096:tf32 ] && extra=--peak_phases
        step "r$round cadre $model $batch $precision" 60 bench.log $(program cadre_bench) train \
          --model="$model" --batch_size="$batch" --devices=$gpu --data_dir="$data" \
          --float32_precision="$precision" $windows $extra
      done
      if [ "$s" = cnn:256 ]; then
        step "r$round cadre cnn 256 tf32, convolution kept" 60 bench.log \
          $(program cadre_bench) train --model=cnn --batch_size=256 --devices=$gpu \
          --data_dir="$data" --float32_precision=tf32 --pool_as_computed=false $windows
      fi
      step "r$round torch $model $batch" 180 bench.log python3 tools/bench/torch_gpu_peer.py \
        --model "$model" --batch_size "$batch" --configs "$torch_configs" --windows 5 \
        --window_s 0.4 --data_dir "$data"
    done
  done
  grep -h "^{" "$out/bench.log" >>"$summary" 2>/dev/null
fi
