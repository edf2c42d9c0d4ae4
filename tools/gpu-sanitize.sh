#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over the GPU tests (ctest label "gpu"), each under a time
# limit, with a summary of which ran clean, which reported errors, and which cannot run under the
# sanitizer (timed out, or failed before running).
#
#   tools/gpu-sanitize.sh [--build DIR] [--tools memcheck,racecheck] [--limit SECONDS] [--budget SECONDS]
#                         [--tests REGEX] [--out DIR]
#     --build   the build tree with the tests (default: build)
#     --tools   compute-sanitizer tools to run (default: memcheck,racecheck)
#     --limit   seconds per test and tool (default: 300); past it the run counts as "cannot run"
#     --budget  seconds for everything (default: none): once spent, the rest is listed "not run"
#     --tests   only the ctest tests whose name matches (default: every test labelled gpu)
#     --out     where the logs and summary.md go (default: $OUT if set, else <build>/sanitize)
#   MKCCL_SANITIZE_GTEST_FILTER: passed to every test as --gtest_filter (shorter runs).
#
# The kernels run many times slower under the sanitizer: MKCCL_TIMEOUT_MS is raised (unless set) so
# that the device waits do not time out on their own. Multi-process tests (under mkccl-run) are
# sanitized in every process (--target-processes all). Exit status: 0 when no tool reported an
# error (tests that cannot run under it are listed, not counted as errors), 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build tools=memcheck,racecheck limit=300 budget=0 tests="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --tools) tools=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu-sanitize: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${out:-${OUT:-$build/sanitize}}
mkdir -p "$out"
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer=$c
done
[ -n "$sanitizer" ] && [ -x "$sanitizer" ] || {
  echo "gpu-sanitize: compute-sanitizer not found (CUDA toolkit; or set COMPUTE_SANITIZER)" >&2
  exit 2
}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MKCCL_TIMEOUT_MS=${MKCCL_TIMEOUT_MS:-600000}

# The gpu tests and their command lines, from ctest (one per line: name<TAB>arg<TAB>arg...).
list=$(cd "$build" && ctest --show-only=json-v1 -L gpu 2>/dev/null | python3 -c '
import json, re, sys
d = json.load(sys.stdin)
pat = re.compile(sys.argv[1]) if sys.argv[1] else None
for t in d.get("tests", []):
    if pat and not pat.search(t["name"]):
        continue
    print("\t".join([t["name"]] + t.get("command", [])))
' "$tests")
[ -n "$list" ] || { echo "gpu-sanitize: no gpu test found in $build (built with tests?)" >&2; exit 2; }

summary="$out/summary.md"
{
  echo "# compute-sanitizer over the GPU tests"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs), limit ${limit} s per test and tool, MKCCL_TIMEOUT_MS=$MKCCL_TIMEOUT_MS${MKCCL_SANITIZE_GTEST_FILTER:+, --gtest_filter=$MKCCL_SANITIZE_GTEST_FILTER}"
  echo
  echo "| test | tool | result | errors | seconds |"
  echo "|---|---|---|---|---|"
} > "$summary"

bad=0 clean=0 cannot=0 skipped=0
start=$(date +%s)
while IFS=$'\t' read -r name cmd; do
  IFS=$'\t' read -r -a argv <<< "$cmd"
  if [ ${#argv[@]} -eq 0 ] || [ ! -x "${argv[0]}" ]; then
    echo "| $name | - | not built | - | - |" >> "$summary"
    continue
  fi
  [ -n "${MKCCL_SANITIZE_GTEST_FILTER:-}" ] && argv+=("--gtest_filter=$MKCCL_SANITIZE_GTEST_FILTER")
  for tool in ${tools//,/ }; do
    if [ "$budget" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$budget" ]; then
      echo "| $name | $tool | not run (budget of ${budget} s spent) | - | - |" >> "$summary"
      skipped=$((skipped + 1))
      continue
    fi
    log="$out/$name.$tool.log"
    t0=$(date +%s)
    # cuBLAS's kernels (the tests' references, names nvjet_*) are not ours to check: racecheck
    # reports hazards inside them that say nothing about this library.
    timeout --kill-after=30 "$limit" "$sanitizer" --tool "$tool" --target-processes all --error-exitcode 99 \
      --kernel-name-exclude kns=nvjet --print-limit 50 "${argv[@]}" > "$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    # memcheck (and synccheck, initcheck) end with "ERROR SUMMARY: n errors", racecheck with
    # "RACECHECK SUMMARY: h hazards displayed (e errors, w warnings)": count errors from both.
    errors=$( { grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | awk '{print $3}'
                grep -Eo 'RACECHECK SUMMARY: .*\(([0-9]+) errors?' "$log" | grep -Eo '\([0-9]+' | tr -d '('; } |
              awk '{s += $1} END {print s + 0}')
    summarised=0
    grep -Eq '(ERROR|RACECHECK) SUMMARY' "$log" && summarised=1
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      result="cannot run: timed out"; cannot=$((cannot + 1))
    elif grep -q 'Internal Sanitizer Error' "$log"; then
      # The tool itself broke (seen: racecheck on the GEMM engine's cluster kernels, "failed to
      # handle a hardware exception", then every later CUDA call fails): no verdict on the code.
      result="cannot run: the sanitizer's internal error"; cannot=$((cannot + 1))
    elif [ "$errors" -gt 0 ] || [ $rc -eq 99 ]; then
      result="ERRORS"; bad=$((bad + 1))
    elif [ $summarised = 1 ] && grep -Eq '\[ +(PASSED|SKIPPED) +\]' "$log" && ! grep -Eq '\[ +FAILED +\]' "$log" &&
         [ $rc -eq 0 ]; then
      if grep -Eq '\[ +PASSED +\] 0 tests' "$log" || ! grep -Eq '\[ +PASSED +\]' "$log"; then
        result="clean (every test skipped)"
      else
        result="clean"
      fi
      clean=$((clean + 1))
    elif [ $summarised = 0 ]; then
      result="cannot run: exit $rc before the sanitizer's summary"; cannot=$((cannot + 1))
    else
      result="test failures under the sanitizer (exit $rc)"; bad=$((bad + 1))
    fi
    echo "| $name | $tool | $result | $errors | $secs |" >> "$summary"
    echo "gpu-sanitize: $name $tool: $result ($errors errors, ${secs} s)"
  done
done <<< "$list"

{
  echo
  echo "clean: $clean, with errors or failures: $bad, cannot run under the sanitizer: $cannot, not run (budget): $skipped (logs: $out)"
} >> "$summary"
tail -1 "$summary"
[ $bad -eq 0 ]
