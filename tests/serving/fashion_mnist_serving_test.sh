#!/usr/bin/env bash
# The example's serving command line (README.md, "Serving"): train briefly with --export,
# serve the export with --serve on free ports, predict over REST with a plain socket (bash's
# /dev/tcp), and stop with SIGTERM, which must end the server cleanly and at once.
#   fashion_mnist_serving_test.sh FASHION_MNIST_BINARY
set -euo pipefail
program=$1
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill -KILL "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$program" --model_dir="$work/model" --max_steps=200 --save_checkpoints_steps=200 \
  --eval_steps=1 --export 2>"$work/train.log" >/dev/null
versions=$(ls "$work/model/export/latest")
[ -n "$versions" ] || { echo "no version exported"; exit 1; }

# Created first: the loop below may read it before the server's shell has opened it.
: >"$work/serve.log"
"$program" --serve="$work/model/export/latest" --rest_port=0 --grpc_port=0 \
  --model_name=fmnist 2>"$work/serve.log" &
server=$!
for _ in $(seq 100); do
  port=$(sed -n 's/.*REST on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$work/serve.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log"; echo "the server did not start"; exit 1; }

body="{\"instances\": [[$(printf '0.5,%.0s' $(seq 783))0.5]]}"
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/models/fmnist:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
  "${#body}" "$body" >&3
reply=$(cat <&3)
exec 3<&-
echo "$reply" | head -c 300
echo
echo "$reply" | grep -q '^HTTP/1.1 200' || { echo "predict failed"; exit 1; }
echo "$reply" | grep -q '"probabilities":\[' || { echo "no probabilities"; exit 1; }

kill -TERM "$server"
for _ in $(seq 50); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$server" 2>/dev/null; then echo "still serving 5 s after SIGTERM"; exit 1; fi
wait "$server"
server=""
grep -q "the model server has stopped" "$work/serve.log"
echo "served version $versions and stopped on SIGTERM"
