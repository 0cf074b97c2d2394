#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU: the GPU tests (every kernel against the
# CPU's, training against the CPU's losses, NCCL and gradient buckets on its stream), a
# one-worker MultiWorkerMirrored job over NCCL with gradient buckets summed beside the
# backward pass and after it (the two checkpoints compared bit for bit by `cadre_ckpt
# diff`), the Estimator on gpu:0 saving every 100 steps and never, then rounds of
# `cadre_bench train` on gpu:0 (float32 and TF32; the CNN with convolutions autotuned,
# through cuDNN and through im2col) alternating with PyTorch (tools/bench/torch_gpu_peer.py).
#
#   tools/bench/gpu_check.sh OUT_DIR [DATA_DIR] [ROUNDS]
#
# Run from the repository root. Programs come from build/ (configured with -DCADRE_CUDA=ON
# or AUTO where nvcc is found), or, with BUNDLE=DIR, through DIR/run NAME (a bundle of the
# programs and their libraries built elsewhere; docs/GPU.md). Logs: OUT_DIR/{tests,bench}.log,
# and OUT_DIR/summary.txt with each step's status and every result's JSON line.
set -u
out=${1:?usage: gpu_check.sh OUT_DIR [DATA_DIR] [ROUNDS]}
data=${2:-/usr/share/datasets/fashion-mnist}
rounds=${3:-2}
mkdir -p "$out"
summary=$out/summary.txt

# The command that starts a program by name (no spaces in the paths: it is word-split).
program() {
  if [ -n "${BUNDLE:-}" ]; then
    echo "$BUNDLE/run $1"
  else
    find build/tests build/tools -maxdepth 2 -type f -name "$1" | head -1
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

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$summary" 2>&1
step kernels 120 tests.log $(program core_test) --gtest_filter='CudaTest.*:GpuRuntimeTest.*'
step training 90 tests.log $(program integration_test) --gtest_filter='CudaTest.*'
step nccl 60 tests.log $(program strategies_test) --gtest_filter='Nccl*:GradientBuckets*'
grep -E '^\[  (PASSED|FAILED)' "$out/tests.log" >>"$summary"

# Small buckets and a kernel in pieces, so that many sums are queued while the pass runs.
mwms="--strategy=multi_worker_mirrored --devices=gpu:0 --model=mlp --batch_size=256
  --train_steps=400 --data_dir=$data --first_bucket_bytes=4096 --bucket_bytes=65536
  --piece_bytes=262144"
for overlap in true false; do
  rm -rf "$out/mwms_$overlap"
  step "mwms overlap=$overlap" 60 mwms.log $(program cadre_launch) --chief=1 --workers=0 -- \
    $(program cadre_bench) estimator $mwms --overlap=$overlap --model_dir="$out/mwms_$overlap"
done
step "mwms same variables" 30 mwms.log $(program cadre_ckpt) diff "$out/mwms_true" "$out/mwms_false"
rm -rf "$out/mwms_true" "$out/mwms_false"
for model in mlp cnn; do
  for every in 100 0; do
    step "estimator $model save_every=$every" 60 bench.log $(program cadre_bench) estimator \
      --devices=gpu:0 --model=$model --train_steps=3000 --save_every=$every --data_dir="$data"
  done
done

for round in $(seq "$rounds"); do
  for model in mlp cnn; do
    for batch in 256 4096; do
      # The CNN under each way of running convolutions (docs/GPU.md), the MLP has none.
      convolutions=autotune
      [ $model = cnn ] && convolutions="autotune cudnn im2col"
      for precision in float32 tf32; do
        for convolution in $convolutions; do
          step "r$round cadre $model $batch $precision $convolution" 60 bench.log \
            $(program cadre_bench) train --model=$model --batch_size=$batch --devices=gpu:0 \
            --data_dir="$data" --float32_precision=$precision --gpu_convolution=$convolution
        done
      done
      step "r$round torch $model $batch" 60 bench.log \
        python3 tools/bench/torch_gpu_peer.py --model $model --batch_size $batch --data_dir "$data"
    done
  done
done
grep -h "^{" "$out/bench.log" >>"$summary" 2>/dev/null
