#!/usr/bin/env bash
# Installs the build dependencies with apt-get when they are missing (idempotent).
#   --required   fail if something cannot be installed (CI); otherwise warn and go on: hwloc,
#                libibverbs, libfabric and MPI are optional and the build reports what it found.
set -uo pipefail
required=0
[ "${1:-}" = "--required" ] && required=1

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# clang, its sanitizer and libFuzzer runtimes (libclang-rt-dev) and llvm (the symbolizer): the
# host code's ASan/UBSan build and the wire fuzzer (tests/fuzz/host_sanitize.sh).
for p in cmake ninja-build g++ make pkg-config libgtest-dev libhwloc-dev hwloc libibverbs-dev libfabric-dev \
         libfabric-bin libopenmpi-dev openmpi-bin python3 python3-matplotlib python3-torch python3-pytest python3-numpy \
         clang libclang-rt-dev llvm; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"; } >/tmp/mkccl-apt.log 2>&1; then
    echo "install-deps: apt-get failed (log: /tmp/mkccl-apt.log)"
    tail -5 /tmp/mkccl-apt.log
    [ $required = 1 ] && exit 1
    echo "install-deps: going on with what is installed"
  fi
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: the CUDA toolkit (nvcc, 12.8 or newer, for sm_90a) is required: install it under /usr/local/cuda"
  exit 1
fi
exit 0
