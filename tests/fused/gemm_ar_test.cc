// mkcclGemmAllReduce on GPUs: odd shapes (M need not split evenly), both plans, bf16 and fp16
// against a cuBLAS reference of the whole product; 64 calls back to back; bad arguments; one
// process over 1, 2 and all GPUs, also every rank driven from one thread; a rank that never
// joins. Run alone and under mkccl-run.
// The bodies are shared with gemm_rs_test.cc (gemm_rs_check.cc).
#include "gemm_rs_check.h"

using namespace mkccl::test;

TEST(GemmAllReduce, OddShapesBothPlans) { worldShapes(true); }
TEST(GemmAllReduce, BackToBackCalls) { worldBackToBack(true); }
TEST(GemmAllReduce, BadArguments) { worldBadArguments(true); }
TEST(GemmAllReduceInProcess, OneTwoAllGpus) { inProcessWorlds(true); }
TEST(GemmAllReduceInProcess, AllRanksFromOneThread) { inProcessOneThread(true); }
TEST(GemmAllReduceInProcess, RankThatNeverJoinsTimesOut) { inProcessTimeout(true); }
TEST(GemmAllReduceInProcess, RanksSharingGpus) { inProcessSharedGpus(true); }
