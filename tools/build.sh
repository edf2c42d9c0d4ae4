#!/usr/bin/env bash
# Configures and builds everything (library, tools, mkccl-perf, tests) into ${MKCCL_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
build=${MKCCL_BUILD_DIR:-build}
jobs=${MKCCL_JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MKCCL_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$jobs"
