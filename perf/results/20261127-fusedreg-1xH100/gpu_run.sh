#!/bin/bash
# One GPU run of the fusedreg branch: prebuilt binaries (built on the CPU machine from this tree),
# else a build of the needed targets here.
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
P=$PWD/prebuilt
export LD_LIBRARY_PATH=$P:$LD_LIBRARY_PATH
S=$OUT/summary.txt
{ date -u; nvidia-smi -L; } > $S 2>&1
if ! $P/fused_reg_test --gtest_list_tests > /dev/null 2>&1; then
  echo "prebuilt binaries do not run here: building" >> $S
  cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build /tmp/b -j16 --target fused_reg_test ag_gemm_test gemm_ar_test gemm_rs_test fused_args_test graph_test reg_coll_test > /tmp/build.log 2>&1 || tail -30 /tmp/build.log >> $S
  mkdir -p /tmp/p && cp /tmp/b/tests/fused/* /tmp/b/tests/graphs/graph_test /tmp/b/tests/coll/reg_coll_test /tmp/p/ 2>/dev/null; P=/tmp/p
  echo "built at ${SECONDS}s" >> $S
fi
t() {  # name limit cmd...
  local name=$1 lim=$2; shift 2
  local left=$((455 - SECONDS))
  if [ $left -lt 15 ]; then echo "$name: NOT RUN (time)" >> $S; return; fi
  [ $lim -gt $left ] && lim=$left
  local t0=$SECONDS
  timeout $lim "$@" > $OUT/$name.txt 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/$name.txt | tr '\n' ' ')" >> $S
}
MKCCL_TIMEOUT_MS=20000 t fused_reg_test 170 $P/fused_reg_test
t gemm_ar_test 60 $P/gemm_ar_test --gtest_filter='GemmAllReduceInProcess.RanksSharingGpus:GemmAllReduceInProcess.AllRanksFromOneThread:GemmAllReduceInProcess.RankThatNeverJoinsTimesOut'
t ag_gemm_test 70 $P/ag_gemm_test --gtest_filter='AgGemmInProcess.RanksSharingGpus:AgGemmInProcess.PeerNeverJoins'
t graph_test 60 $P/graph_test --gtest_filter='Graphs.AllGatherGemm:Graphs.GemmAllReduce:Graphs.GemmReduceScatter:Graphs.OneGraphOfSeveralOps:Graphs.RegistrationErrors:Graphs.AllGatherAndReduceScatter'
t fused_args_test 60 $P/fused_args_test --gtest_filter='FusedArgs.RanksSharingGpus:FusedArgs.CapturedAndReplayed'
t gemm_rs_test 40 $P/gemm_rs_test --gtest_filter='GemmReduceScatterInProcess.RanksSharingGpus'
t reg_coll_test 40 $P/reg_coll_test --gtest_filter='RegColl.DisagreeingRanksFail'
echo "total ${SECONDS}s" >> $S
cat $S
