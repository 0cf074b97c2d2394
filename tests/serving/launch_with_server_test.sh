#!/usr/bin/env bash
# cadre_launch running a chief, an evaluator with a LatestExporter (fashion_mnist --export)
# and a model server beside them (--serve_args; docs/SERVING.md): the server, started before
# any export, serves a prediction from a version the evaluator wrote; SIGTERM to the launcher
# stops it with the job; a job that ends by itself stops it too, and the launcher's exit
# status is the job's. Everything on 127.0.0.1, free ports.
#   launch_with_server_test.sh CADRE_LAUNCH FASHION_MNIST
set -euo pipefail
launch=$1
program=$2
work=$(mktemp -d)
launcher=""
cleanup() {
  if [ -n "$launcher" ]; then kill -KILL "$launcher" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The pid cadre_launch printed for a task ("started server:0 pid=N").
pid_of() { sed -n "s/.*started $1 pid=\([0-9]*\).*/\1/p" "$2" | tail -1; }

# Waits until a process is gone (5 s at most).
gone() {
  for _ in $(seq 50); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# One HTTP request over bash's /dev/tcp; prints the reply.
http() {  # METHOD PORT TARGET [BODY]
  local body=${4:-}
  exec 3<>"/dev/tcp/127.0.0.1/$2" || return 1
  printf '%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
    "$1" "$3" "${#body}" "$body" >&3
  cat <&3
  exec 3<&-
}

# 1. A long job, stopped by SIGTERM once the server has answered.
: >"$work/job.log"
"$launch" --chief=1 --evaluator=1 --grace_secs=20 \
  --serve_args="--serve=$work/model/export/latest --rest_port=0 --grpc_port=-1 --model_name=fmnist" \
  -- "$program" --model_dir="$work/model" --max_steps=1000000 --save_checkpoints_steps=100 \
  --eval_steps=1 --export >"$work/job.log" 2>&1 &
launcher=$!
port=""
for _ in $(seq 300); do
  port=$(sed -n 's/^\[server:0\] .*REST on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$work/job.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/job.log"; echo "the server did not start"; exit 1; }
grep -q '^started server:0 pid=' "$work/job.log"
server=$(pid_of server:0 "$work/job.log")
# The server has no training role: TF_CONFIG is not in its environment.
if tr '\0' '\n' <"/proc/$server/environ" | grep -q '^TF_CONFIG='; then
  echo "the server got a TF_CONFIG"; exit 1
fi

# Until the evaluator's first export is served (the server polls every second).
status=""
for _ in $(seq 1200); do
  status=$(http GET "$port" /v1/models/fmnist 2>/dev/null || true)
  echo "$status" | grep -q '"AVAILABLE"' && break
  kill -0 "$launcher" 2>/dev/null || { cat "$work/job.log"; echo "the job ended early"; exit 1; }
  sleep 0.1
done
echo "$status" | grep -q '"AVAILABLE"' || { tail -30 "$work/job.log"; echo "no version served"; exit 1; }
version=$(echo "$status" | sed -n 's/.*"version":"\([0-9]*\)".*/\1/p')
[ -d "$work/model/export/latest/$version" ] || { echo "version $version is not an export"; exit 1; }
grep -q '^\[evaluator:0\]' "$work/job.log"

body="{\"instances\": [[$(printf '0.5,%.0s' $(seq 783))0.5]]}"
reply=$(http POST "$port" /v1/models/fmnist/versions/$version:predict "$body")
echo "$reply" | head -c 200
echo
echo "$reply" | grep -q '^HTTP/1.1 200' || { echo "predict failed"; exit 1; }
echo "$reply" | grep -q '"probabilities":\[' || { echo "no probabilities"; exit 1; }

kill -TERM "$launcher"
set +e
wait "$launcher"
code=$?
set -e
launcher=""
echo "launcher exit status after SIGTERM: $code"
gone "$server" || { echo "the server outlived the launcher"; exit 1; }
grep -q '^\[server:0\] .*the model server has stopped' "$work/job.log" ||
  { tail -20 "$work/job.log"; echo "the server was not stopped cleanly"; exit 1; }
[ "$code" = 143 ] || { tail -20 "$work/job.log"; echo "expected 143 (every task stopped cleanly)"; exit 1; }

# 2. A job that ends by itself: the server is stopped with it, the exit status is the job's.
"$launch" --chief=1 --evaluator=1 \
  --serve_args="--serve=$work/short/export/latest --rest_port=0 --grpc_port=-1" \
  -- "$program" --model_dir="$work/short" --max_steps=100 --save_checkpoints_steps=100 \
  --eval_steps=1 --export >"$work/short.log" 2>&1 || { tail -30 "$work/short.log"; echo "the short job failed"; exit 1; }
server=$(pid_of server:0 "$work/short.log")
[ -n "$server" ] || { echo "no server in the short job"; exit 1; }
gone "$server" || { echo "the server outlived the short job"; exit 1; }
grep -q '^\[server:0\] .*the model server has stopped' "$work/short.log" ||
  { tail -20 "$work/short.log"; echo "the server was not stopped when the job ended"; exit 1; }

# 3. A server that fails is reported and does not change the job's exit status.
"$launch" --chief=1 --serve_program=false --serve_args="--serve=nowhere" \
  -- "$program" --model_dir="$work/failing" --max_steps=20 --save_checkpoints_steps=20 \
  --eval_steps=1 >"$work/failing.log" 2>&1 || { tail -30 "$work/failing.log"; echo "a failed server failed the job"; exit 1; }
grep -q 'cadre_launch: server:0 ended (exit status 1); training goes on without it' "$work/failing.log" ||
  { tail -20 "$work/failing.log"; echo "the server's failure was not reported"; exit 1; }
echo "served version $version beside the job; stopped with it (SIGTERM, and at the job's end)"
