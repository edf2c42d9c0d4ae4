#!/usr/bin/env bash
# The host code under AddressSanitizer and UndefinedBehaviorSanitizer, then the bootstrap wire under
# libFuzzer for a bounded time (docs/HARDENING.md). No GPU, no CUDA kernels: the standalone build of
# tests/fuzz/CMakeLists.txt (bootstrap, socket, settings, parser, config and their tests, the
# hostile-peer tests, the wire fuzzers), with clang.
#   tests/fuzz/host_sanitize.sh [build dir (default build-san)]
#   MKCCL_FUZZ_SECONDS   the fork-per-case wire fuzzer's time under ctest (default 60)
#   MKCCL_LIBFUZZER_SECONDS  libFuzzer's time (default 120; 0: skip)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-san}
cxx=$(command -v clang++ || true)
[ -n "$cxx" ] || { echo "host-sanitize: clang++ is needed (tools/install-deps.sh installs it)" >&2; exit 1; }
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" $launcher \
  -DMKCCL_FUZZ_SECONDS="${MKCCL_FUZZ_SECONDS:-60}" >/dev/null
cmake --build "$build" -j "${MKCCL_JOBS:-$(nproc)}"
# A sanitizer report fails the test that made it (-fno-sanitize-recover, and leaks at exit).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=23}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
(cd "$build" && ctest --output-on-failure --timeout 900)
secs=${MKCCL_LIBFUZZER_SECONDS:-120}
if [ "$secs" != 0 ] && [ -x "$build/bootstrap_wire_libfuzzer" ]; then
  mkdir -p "$build/wire-corpus" "$build/wire-artifacts"
  echo "host-sanitize: libFuzzer on the bootstrap wire for ${secs} s"
  "$build/bootstrap_wire_libfuzzer" -max_total_time="$secs" -max_len=256 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$build/wire-artifacts/" "$build/wire-corpus" 2>&1 | tail -25
fi
