#!/usr/bin/env bash
# Session-6 call 10 (1 x H200, warm): fused_reg_test's GemmReduceScatterCRegistered, three copies at
# once (as gpu-check's --test-jobs 3 ran it in call 8, where it failed once), two rounds.
. "$(dirname "$0")/common.sh"
F='--gtest_filter=*GemmReduceScatterCRegistered*:*GemmAllReduceCRegistered*'
for round in 1 2; do
  for j in 1 2 3; do timeout 90 $B/tests/fused/fused_reg_test $F > $R/conc-$round-$j.log 2>&1 & done; wait
  for j in 1 2 3; do echo "round $round copy $j: $(grep -cE '^\[       OK' $R/conc-$round-$j.log) ok, $(grep -cE '^\[  FAILED  \] FusedReg' $R/conc-$round-$j.log) failed"; grep -h "Which is\|, tuning" $R/conc-$round-$j.log | head -4; done
done
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c10.tgz r)
