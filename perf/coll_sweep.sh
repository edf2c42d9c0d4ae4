#!/usr/bin/env bash
# The collective figures (issue 3) and the tuning runs behind their defaults, on one GPU machine:
#   1. mkccl-perf for the four collectives against NCCL, 8 B .. 1 GiB (JSON beside the logs);
#   2. the protocol crossover: LL everywhere it fits vs simple only, 8 B .. 8 MiB;
#   3. large AllReduce / ReduceScatter / AllToAll: channels x ring slot size, 64 MiB .. 1 GiB.
# Every run is bounded by `timeout`; a summary line per run says its exit status.
#   perf/coll_sweep.sh BUILD_DIR OUT_DIR [GPUS=4] [PARTS="1 2 3"]
set -uo pipefail
build=${1:?usage: coll_sweep.sh BUILD_DIR OUT_DIR [GPUS] [PARTS]}
out=${2:?usage: coll_sweep.sh BUILD_DIR OUT_DIR [GPUS] [PARTS]}
g=${3:-4}
parts=${4:-1 2 3}
perf=$build/perf/mkccl-perf
[ -x "$perf" ] || { echo "no $perf"; exit 2; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast

# run NAME [VAR=value ...] -- mkccl-perf arguments
run() {
  local name=$1 t0=$SECONDS
  shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  timeout "${MKCCL_SWEEP_TIMEOUT:-240}" env "${envs[@]}" "$perf" "$@" > "$out/$name.log" 2>&1
  echo "== $name: exit $? in $((SECONDS - t0)) s ${envs[*]}"
}

for part in $parts; do
  case $part in
    1)
      for op in allreduce allgather reducescatter alltoall; do
        run "$op-ws$g" -- "$op" -g "$g" -b 8 -e 1G --json "$out/$op-ws$g.json"
      done ;;
    2)
      for proto in ll simple; do
        for op in allreduce allgather reducescatter alltoall; do
          run "$op-$proto" MKCCL_TUNING="coll.proto=$proto" -- "$op" -g "$g" -b 8 -e 8M
        done
      done ;;
    3)
      for op in allreduce reducescatter alltoall; do
        for c in 16 32; do
          for s in 256K 1M; do
            run "$op-c$c-s$s" MKCCL_TUNING="coll.channels=$c;coll.slot_bytes=$s" -- $op -g "$g" -b 64M -e 1G -f 4 --no-baseline
          done
        done
      done
      run allgather-c32 MKCCL_TUNING="coll.channels=32" -- allgather -g "$g" -b 64M -e 1G -f 4 --no-baseline ;;
  esac
done
