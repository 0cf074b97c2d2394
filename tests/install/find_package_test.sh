#!/usr/bin/env bash
# Installs the build into a temporary prefix and checks that the installed headers are
# exactly the public ones (include/cadre and the generated version.h) and that the example
# programs and tools run from its bin/, then configures,
# builds and runs a separate CMake project that uses find_package(cadre), links cadre::cadre
# and includes only <cadre/cadre.h>.
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
repo_dir=$(cd "$source_dir/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null

(cd "$work/prefix/include" && find . -type f | sed 's|^\./||' | sort) >"$work/installed"
{ (cd "$repo_dir/include" && find cadre -name '*.h'); echo cadre/version.h; } | sort >"$work/public"
if ! diff -u "$work/public" "$work/installed"; then
  echo "the installed headers differ from the public list (include/cadre): see the diff above" >&2
  exit 1
fi
echo "installed headers: $(wc -l <"$work/installed"), exactly include/cadre"

# The programs docs/DEPLOY.md runs from the prefix (/opt/cadre/bin/fashion_mnist): installed,
# and they run from there (their libraries found through the installed RPATH).
for program in fashion_mnist keras_fashion_mnist custom_training_loop linear_regression \
    embedding_classifier cadre_launch cadre_ckpt cadre_bench cadre_config; do
  if ! "$work/prefix/bin/$program" --help >"$work/help" 2>&1; then
    echo "$program is not installed in bin/ or does not run from there:" >&2
    head -3 "$work/help" >&2
    exit 1
  fi
done
echo "installed programs run from $work/prefix/bin"

# The build's compiler and sanitizer flags (empty for the normal build), which a program
# linking sanitized libraries needs too.
cmake -S "$source_dir/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  ${CADRE_CONSUMER_CXX:+-DCMAKE_CXX_COMPILER="$CADRE_CONSUMER_CXX"} \
  -DCMAKE_CXX_FLAGS="${CADRE_CONSUMER_FLAGS:-}" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer" "$work/model" 2>"$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
# A first program that never initialises glog gets the library's logging, not glog's warning.
if grep -q "Logging before InitGoogleLogging" "$work/stderr"; then
  echo "the consumer's log starts with glog's warning:" >&2
  head -3 "$work/stderr" >&2
  exit 1
fi
