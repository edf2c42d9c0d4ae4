#!/usr/bin/env bash
# On a GPU machine: the working tree against an earlier revision, in one run. Builds both (the
# revision from `git archive`, or a directory holding that revision's tree), then runs mkccl-perf
# for each op alternately (base, new, base, new, ...) and prints, per row, the median time of each
# and new / base. Also the kernels' resources (registers, stack, spills) of both libraries.
#   tools/gpu-compare.sh <base-revision|base-dir> [--ops "gemm ag_gemm"] [--rounds 3] [--gpus n] [-- perf args...]
# Writes compare-<op>.json (both sides' rows and the ratios) under $OUT (or ./gpu-compare-out).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
base=${1:?usage: tools/gpu-compare.sh <base-revision> [--ops "op ..."] [--rounds n] [--gpus n] [-- perf args]}
shift
ops="gemm"; rounds=3; gpus=1; perfArgs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ops) ops="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --gpus) gpus="$2"; shift ;;
    --) shift; perfArgs=("$@"); break ;;
    *) echo "gpu-compare: unknown argument $1"; exit 2 ;;
  esac
  shift
done
out=${OUT:-$root/gpu-compare-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpu-compare.XXXX)
jobs=$(nproc)

build() {  # src build-dir label
  local t0=$(date +%s)
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMKCCL_BUILD_TESTS=OFF > "$work/$3-configure.log" 2>&1 &&
    cmake --build "$2" -j "$jobs" --target mkccl mkccl-perf mkccl-run > "$work/$3-build.log" 2>&1
  local rc=$?
  echo "== build $3: rc $rc, $(( $(date +%s) - t0 )) s"
  [ $rc = 0 ] || { grep -E "error|FAILED" "$work/$3-build.log" | head -20; exit 1; }
}

mkdir -p "$work/base-src"
if [ -d "$base" ]; then
  cp -a "$base/." "$work/base-src/"
else
  git archive "$base" | tar -x -C "$work/base-src" || { echo "gpu-compare: cannot read revision $base"; exit 1; }
fi
build "$root" "$work/new" new &
build "$work/base-src" "$work/base" base &
wait
[ -x "$work/new/perf/mkccl-perf" ] && [ -x "$work/base/perf/mkccl-perf" ] || exit 1

echo "== kernel resources (registers, stack frame, spills) of the GEMM-family kernels, base then new"
for side in base new; do
  cuobjdump -res-usage "$work/$side/libmkccl.so" 2>/dev/null |
    awk -v side="$side" '/Function/ {name=$2} /REG:/ {print side, $0, name}' |
    grep -E "persistentGemmKernel|fusedKernel|reduceGemmKernel" | sed -E 's/Function ([^:]*):/\1/' |
    c++filt | sed -E 's/\(CUtensorMap_st.*//' | cut -c1-220 > "$out/resources-$side.txt"
  cat "$out/resources-$side.txt"
done

for op in $ops; do
  for r in $(seq 1 "$rounds"); do
    for side in base new; do
      "$work/$side/perf/mkccl-perf" "$op" -g "$gpus" "${perfArgs[@]}" --json "$work/$op-$side-$r.json" \
        > "$work/$op-$side-$r.log" 2>&1 || { echo "== $op ($side, round $r) failed:"; tail -5 "$work/$op-$side-$r.log"; }
    done
  done
  python3 - "$work" "$op" "$rounds" "$out/compare-$op.json" <<'EOF'
import json, statistics, sys
work, op, rounds, dest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def rows(side):
    runs = []
    for r in range(1, rounds + 1):
        try:
            runs.append(json.load(open(f"{work}/{op}-{side}-{r}.json"))["results"])
        except Exception:
            pass
    return runs
def key(x):
    s = x.get("shape") or {}
    return (s.get("m"), s.get("n"), s.get("k"), x.get("bytes"), x.get("note", "").split(",")[0])
table = {}
for side in ("base", "new"):
    for run in rows(side):
        for x in run:
            table.setdefault(key(x), {}).setdefault(side, []).append(x["time_us"])
out = []
print(f"== {op}: median of {rounds} alternating runs, us")
print(f"{'shape / bytes':<34} {'base':>10} {'new':>10} {'new/base':>9}")
for k, v in table.items():
    if "base" not in v or "new" not in v:
        continue
    b, n = statistics.median(v["base"]), statistics.median(v["new"])
    label = "x".join(str(d) for d in k[:3]) if k[0] is not None else f"{k[3]} B"
    print(f"{label:<34} {b:>10.1f} {n:>10.1f} {n / b:>9.3f}")
    out.append({"key": label, "base_us": v["base"], "new_us": v["new"], "base_median_us": b, "new_median_us": n,
                "ratio": n / b})
json.dump({"op": op, "rounds": rounds, "rows": out}, open(dest, "w"), indent=1)
EOF
done
