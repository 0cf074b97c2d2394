#!/bin/bash
# Runs `cadre_launch ARGS...` and prints, when it ends, each task's peak RSS (VmHWM, sampled
# every 0.5 s from /proc) and the checkpoint lines that say how long training waited per save
# and how long each ps task took to mark (or copy) and write its part. The launcher's own output goes to
# LOG (default /tmp/launch_peak_rss.log).
#
#   tools/bench/launch_peak_rss.sh build/tools/cadre_launch --chief=1 --ps=2 --workers=1 -- \
#     build/examples/embedding_classifier --vocab_size=8388608 --embedding_dim=32 \
#     --max_steps=300 --save_checkpoints_steps=100 --model_dir=/tmp/m1g
set -u
log=${LOG:-/tmp/launch_peak_rss.log}
"$@" > "$log" 2>&1 &
launcher=$!
declare -A peak
while kill -0 "$launcher" 2>/dev/null; do
  for pid in $(pgrep -P "$launcher"); do
    task=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep '^TF_CONFIG=' |
           grep -o '"task": *{[^}]*}' | tr -d ' "')
    kb=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    if [ -n "$task" ] && [ -n "$kb" ] && [ "$kb" -gt "${peak[$task]:-0}" ]; then
      peak[$task]=$kb
    fi
  done
  sleep 0.5
done
wait "$launcher"
status=$?
for task in "${!peak[@]}"; do echo "peak RSS $task: $((peak[$task] / 1024)) MiB"; done
grep -E "training waited|checkpoint part .*(marked|copied|wrote)|kept aside" "$log"
echo "cadre_launch exit status $status"
exit $status
