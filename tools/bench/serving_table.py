#!/usr/bin/env python3
"""Cadre's model server beside TensorFlow 2.15 serving the same model in-process.

For each model (the Fashion-MNIST MLP and CNN, exported once by `fashion_mnist --export`
into --work), each round runs, in turn: `fashion_mnist --serve` with batching and without,
loaded by `cadre_bench serve` at each concurrency (one image a request) over each protocol
of --protocols (REST: keep-alive connections; gRPC: PredictionService.Predict calls on one
channel), then tools/bench/tf_serving_peer.py at the same concurrencies. Rounds alternate so that the
machine's drift falls on both; with --lock each round holds that file (flock), so that no
build sharing it runs meanwhile. Prints every run as a JSON line, then a Markdown table of
the medians over rounds (requests/s min-max beside them) and the ratios to TensorFlow.

  /usr/bin/python3 tools/bench/serving_table.py --build build --tf_python /tmp/tfvenv/bin/python \\
      --rounds 3 --lock /tmp/cadre-build.lock
"""
import argparse
import fcntl
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_lines import last_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def export_dir(args, model):
    base = os.path.join(args.work, model, "export", "latest")
    if not glob.glob(os.path.join(base, "*")):
        subprocess.run([os.path.join(args.build, "examples", "fashion_mnist"), f"--model={model}",
                        f"--model_dir={os.path.join(args.work, model)}", "--max_steps=300",
                        "--save_checkpoints_steps=300", "--eval_steps=2", "--export"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return base


def cpu_secs(pid):
    """utime + stime of a process, from /proc (clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(args, model, base, batching):
    log = open(os.path.join(args.work, f"serve_{model}.log"), "w+")
    server = subprocess.Popen(
        [os.path.join(args.build, "examples", "fashion_mnist"), f"--serve={base}", f"--model={model}",
         "--rest_port=0", "--grpc_port=0", f"--enable_batching={str(batching).lower()}"]
        + args.server_flags, stderr=log, stdout=subprocess.DEVNULL)
    for _ in range(300):
        log.seek(0)
        found = re.search(r"REST on 127\.0\.0\.1:(\d+), gRPC on 127\.0\.0\.1:(\d+)", log.read())
        if found:
            return server, {"rest": int(found.group(1)), "grpc": int(found.group(2))}
        if server.poll() is not None:
            break
        time.sleep(0.05)
    server.kill()
    raise SystemExit(f"the server did not start; see {log.name}")


def run_cadre(args, model, base, batching):
    server, ports = start_server(args, model, base, batching)
    results = []
    try:
        for protocol in args.protocols:
            for c in args.concurrency:
                before = cpu_secs(server.pid)
                out = subprocess.run(args.client_prefix + [
                    os.path.join(args.build, "tools", "cadre_bench"), "serve",
                    f"--protocol={protocol}", f"--port={ports[protocol]}", f"--concurrency={c}",
                    f"--seconds={args.seconds}", f"--warmup_secs={args.warmup}"],
                    check=True, capture_output=True, text=True).stdout
                result = last_json(out)
                result["server_cpu"] = round((cpu_secs(server.pid) - before) / (args.seconds + args.warmup), 3)
                results.append(result)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    return results


def run_tf(args, model, base):
    version = sorted(glob.glob(os.path.join(base, "*")))[-1]
    out = subprocess.run([args.tf_python, os.path.join(HERE, "tf_serving_peer.py"), "--export", version,
                          "--model", model, "--concurrency", ",".join(map(str, args.concurrency)),
                          "--seconds", str(args.seconds), "--warmup_secs", str(args.warmup)],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def one_round(args, round_index, table):
    for model in args.models:
        base = export_dir(args, model)
        runs = [("cadre_batching", lambda: run_cadre(args, model, base, True)),
                ("cadre_no_batching", lambda: run_cadre(args, model, base, False)),
                ("tf", lambda: run_tf(args, model, base))]
        for peer, run in runs:
            for result in run():
                # REST keeps the peer names of the tables before gRPC was measured.
                name = peer if result.get("protocol", "rest") == "rest" else f"{peer}_grpc"
                result.update(round=round_index, model=model, peer=name)
                print(json.dumps(result), flush=True)
                table.setdefault((model, result["concurrency"], name), []).append(result)


def summary(table, args):
    def cell(results):
        rates = [r["requests_per_sec"] for r in results]
        p50 = statistics.median(r["p50_ms"] for r in results)
        p99 = statistics.median(r["p99_ms"] for r in results)
        return (statistics.median(rates),
                f"{statistics.median(rates):,.0f} ({min(rates):,.0f}–{max(rates):,.0f}), "
                f"{p50:.2f} / {p99:.2f} ms")
    print("| model, concurrency | Cadre, batching | Cadre, no batching | TF 2.15 in-process | "
          "batching / TF | no batching / TF |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model in args.models:
        for c in args.concurrency:
            cells = [cell(table[(model, c, peer)]) for peer in ("cadre_batching", "cadre_no_batching", "tf")]
            print(f"| {model}, {c} | {cells[0][1]} | {cells[1][1]} | {cells[2][1]} | "
                  f"{cells[0][0] / cells[2][0]:.2f} | {cells[1][0] / cells[2][0]:.2f} |")
    if "grpc" not in args.protocols:
        return
    print()
    print("| model, concurrency | Cadre gRPC, batching | Cadre gRPC, no batching | "
          "gRPC / TF, batching | no batching | gRPC / REST, batching | no batching |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models:
        for c in args.concurrency:
            grpc = [cell(table[(model, c, f"{peer}_grpc")]) for peer in ("cadre_batching", "cadre_no_batching")]
            rest = [cell(table[(model, c, peer)]) for peer in ("cadre_batching", "cadre_no_batching")]
            tf = cell(table[(model, c, "tf")])
            print(f"| {model}, {c} | {grpc[0][1]} | {grpc[1][1]} | {grpc[0][0] / tf[0]:.2f} | "
                  f"{grpc[1][0] / tf[0]:.2f} | {grpc[0][0] / rest[0][0]:.2f} | {grpc[1][0] / rest[1][0]:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--tf_python", required=True)
    parser.add_argument("--work", default="/tmp/serving_table")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--protocols", default="rest", help="rest, grpc or rest,grpc")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--warmup", type=float, default=1)
    parser.add_argument("--lock", default="", help="a file each round holds with flock")
    parser.add_argument("--server_flags", default="", help="more flags for fashion_mnist --serve")
    parser.add_argument("--client_prefix", default="", help="e.g. 'taskset -c 1' before cadre_bench")
    args = parser.parse_args()
    args.models = args.models.split(",")
    args.protocols = args.protocols.split(",")
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.server_flags = args.server_flags.split()
    args.client_prefix = args.client_prefix.split()
    os.makedirs(args.work, exist_ok=True)
    table = {}
    for round_index in range(args.rounds):
        with open(args.lock or os.devnull) as lock:
            if args.lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
            print(f"round {round_index + 1}: {os.getloadavg()[0]:.2f} load", file=sys.stderr, flush=True)
            one_round(args, round_index + 1, table)
    summary(table, args)


if __name__ == "__main__":
    main()
