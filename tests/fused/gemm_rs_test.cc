// mkcclGemmReduceScatter on GPUs: odd shapes, both plans, bf16 and fp16 against a cuBLAS reference
// of the whole product; 64 calls back to back; bad arguments; one process over 1, 2 and all GPUs,
// also every rank driven from one thread; a rank that never joins. Run alone (a world of 1 plus
// the in-process tests) and under mkccl-run.
// The bodies are shared with gemm_ar_test.cc (gemm_rs_check.cc).
#include "gemm_rs_check.h"

using namespace mkccl::test;

TEST(GemmReduceScatter, OddShapesBothPlans) { worldShapes(false); }
TEST(GemmReduceScatter, BackToBackCalls) { worldBackToBack(false); }
TEST(GemmReduceScatter, BadArguments) { worldBadArguments(false); }
TEST(GemmReduceScatterInProcess, OneTwoAllGpus) { inProcessWorlds(false); }
TEST(GemmReduceScatterInProcess, AllRanksFromOneThread) { inProcessOneThread(false); }
TEST(GemmReduceScatterInProcess, RankThatNeverJoinsTimesOut) { inProcessTimeout(false); }
TEST(GemmReduceScatterInProcess, RanksSharingGpus) { inProcessSharedGpus(false); }
