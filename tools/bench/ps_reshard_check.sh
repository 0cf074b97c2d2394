#!/bin/bash
# embedding_classifier with default options at a given table size (#46): trains under 2 ps
# tasks, resumes under 1 ps task, then under 3 with an evaluator, then in one process
# (one_device), each run from the checkpoints the one before left; prints each run's exit
# status, the step it resumed from, its peak RSS per task, and the evaluator's last result.
#
#   tools/bench/ps_reshard_check.sh 16777216 /tmp/emb16m   # a 2 GiB table (+ 2 GiB slots)
set -u
vocab=${1:?vocab_size}
dir=${2:?model_dir}
build=${BUILD:-build}
example=(build/examples/embedding_classifier --vocab_size="$vocab" --embedding_dim=32
         --model_dir="$dir")
example[0]=$build/examples/embedding_classifier
rm -rf "$dir"
run() {  # NAME LAUNCH-ARGS... -- EXTRA-ARGS...
  local name=$1; shift
  local launch=() extra=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  extra=("$@")
  local started=$SECONDS
  if [ ${#launch[@]} -eq 0 ]; then
    /usr/bin/time -v "${example[@]}" "${extra[@]}" > "/tmp/reshard_$name.log" 2>&1
    status=$?
    echo "$name: exit status $status in $((SECONDS - started)) s;" \
      "peak RSS $(awk '/Maximum resident/ {print int($6 / 1024)}' "/tmp/reshard_$name.log") MiB"
  else
    LOG=/tmp/reshard_$name.log tools/bench/launch_peak_rss.sh "$build/tools/cadre_launch" \
      "${launch[@]}" -- "${example[@]}" "${extra[@]}" > "/tmp/reshard_$name.out" 2>&1
    status=$?
    echo "$name: exit status $status in $((SECONDS - started)) s;" \
      $(grep -o "peak RSS task:{type:[a-z]*,index:[0-9]*}: [0-9]* MiB" "/tmp/reshard_$name.out" |
        sed 's/peak RSS task:{type:\([a-z]*\),index:\([0-9]*\)}:/\1\2/' | tr '\n' ';')
  fi
  grep -hoE "restor[a-z]* [^;]*step [0-9]+|starting from step [0-9]+|from the checkpoint of step [0-9]+" \
    "/tmp/reshard_$name.log" | head -2
  grep -hE "training waited" "/tmp/reshard_$name.log" | sed 's/.*\] //' | head -1
  grep -hoE '\{"task":"(chief|local|evaluator)"[^}]*\}' "/tmp/reshard_$name.log" | tail -1
  [ "$status" -eq 0 ] || exit "$status"
}
run ps2 --chief=1 --workers=1 --ps=2 -- --max_steps=1000
run ps1 --chief=1 --workers=1 --ps=1 -- --max_steps=2000
run ps3_evaluator --chief=1 --workers=1 --ps=3 --evaluator=1 -- --max_steps=3000
run one_process -- --strategy=one_device --max_steps=4000
ls -la "$dir" | grep -c "part-" | sed 's/^/part files left: /'
