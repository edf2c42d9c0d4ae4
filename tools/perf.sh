#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs mkccl-perf for every op on the local GPUs
# (every world size that fits) with NCCL / cuBLAS measured beside it in the same run. JSON results go
# under perf/results/<date>-<gpus>/. Extra arguments go to gpu-check (e.g. --bench-ops "allreduce").
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "perf: no NVIDIA GPU here: nothing to measure (the tests run without one: tools/test.sh)"
  exit 1
fi
MKCCL_BUILD_DIR=${MKCCL_BUILD_DIR:-build} exec tools/gpu-check.sh --no-tests "$@"
