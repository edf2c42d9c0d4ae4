#!/usr/bin/env bash
# The test command: installs what is missing, builds everything, runs every test. GPU tests skip
# (and say so) where there is no GPU; multi-process tests run under tools/mkccl-run.
#   tools/test.sh [ctest args...]     e.g. tools/test.sh -L cpu
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
cd "${MKCCL_BUILD_DIR:-build}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ctest --output-on-failure --timeout 900 "$@"
