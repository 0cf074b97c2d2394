#!/usr/bin/env bash
# Builds one fuzz target with libFuzzer, ASan and UBSan (clang, in build-fuzz) and fuzzes it
# for SECONDS over a working copy of its seed corpus, on JOBS processes:
#
#   tools/fuzz/run.sh TARGET SECONDS [JOBS]      e.g. tools/fuzz/run.sh tfrecord 600
#
# TARGET is a tests/fuzz/<TARGET>_fuzz.cc. The corpus grows in /tmp/cadre_fuzz/TARGET (not in
# the repository); an input that crashes, hangs or runs out of memory is written to
# /tmp/cadre_fuzz/TARGET/artifacts, and once fixed belongs in tests/fuzz/corpus/TARGET, where
# FuzzCorpusTest.TARGET replays it in every ./dev test. With JOBS > 1 each job's log is
# /tmp/cadre_fuzz/TARGET/fuzz-N.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 2 ]; then
  echo "usage: tools/fuzz/run.sh TARGET SECONDS [JOBS]; targets:" $(ls tests/fuzz/corpus) >&2
  exit 2
fi
target=$1 seconds=$2 jobs=${3:-1}
if [ ! -d "tests/fuzz/corpus/$target" ]; then
  echo "tools/fuzz/run.sh: no target '$target'; targets:" $(ls tests/fuzz/corpus) >&2
  exit 2
fi
build=${CADRE_FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCADRE_SANITIZE=fuzz -DCADRE_CUDA=OFF >/dev/null
fi
ninja -C "$build" "tests/fuzz/${target}_fuzz" | grep -vE '^\[[0-9]+/[0-9]+\] ' || true
work=${CADRE_FUZZ_WORK:-/tmp/cadre_fuzz}/$target
mkdir -p "$work/corpus" "$work/artifacts"
cp -n "tests/fuzz/corpus/$target"/* "$work/corpus/"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
binary=$(cd "$build" && pwd)/tests/fuzz/${target}_fuzz
flags=(-max_total_time="$seconds" -artifact_prefix="$work/artifacts/" -rss_limit_mb=2048
  -timeout=10 -print_final_stats=1)
# With -jobs libFuzzer writes one fuzz-N.log per job into the working directory; keep them
# beside the corpus. One job runs in this process, reporting on stderr.
if [ "$jobs" -gt 1 ]; then
  cd "$work"
  flags+=(-jobs="$jobs" -workers="$jobs")
fi
exec "$binary" "$work/corpus" "${flags[@]}"
