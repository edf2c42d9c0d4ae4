#!/usr/bin/env bash
# On a GPU machine: builds a variant of this tree for an A/B run in the same session, so that the
# tree and the tree with changes taken out are timed side by side (one machine, one run).
#   tools/gpu-ab-build.sh NAME "TARGETS" [PATCH ...]
# copies the working tree (without build/ and .git) to /tmp/src_NAME, reverses each PATCH there
# (patch -R -p1: a diff of the change to take out), and builds TARGETS into /tmp/b_NAME with
# libfabric from .deps/ when carried. The log goes to $R/build_NAME.log (R: $OUT/r by default);
# its tail is printed when the build fails. For a change that is not yet committed (the lent GPU
# machines get the working tree without its history). tools/gpu-compare.sh takes /tmp/src_NAME as
# its base directory when only mkccl-perf rows are to be compared; this serves any command
# (tests, probes, ncu) on /tmp/b_NAME.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NAME \"TARGETS\" [PATCH ...]"; exit 2; }
name=$1 targets=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
R=${R:-${OUT:-/tmp}/r}; mkdir -p "$R"
export PATH=/usr/local/cuda/bin:$PATH
src=/tmp/src_$name
rm -rf "$src"; mkdir -p "$src"
(cd "$root" && tar cf - --exclude=./build --exclude=./.git .) | tar xf - -C "$src"
for p in "$@"; do
  p=$(realpath "$p")
  (cd "$src" && patch -s -f -R -p1 < "$p") || { echo "gpu-ab-build: $p does not reverse on $name"; exit 1; }
done
extra=""
[ -d "$root/.deps/libfabric/include" ] && extra="-DLIBFABRIC_ROOT=$root/.deps/libfabric"
(cd "$src" && cmake -S . -B "/tmp/b_$name" -G Ninja -DCMAKE_BUILD_TYPE=Release $extra >/dev/null &&
  cmake --build "/tmp/b_$name" -j "$(nproc)" --target $targets) > "$R/build_$name.log" 2>&1 ||
  { tail -20 "$R/build_$name.log"; exit 1; }
