// CPU: the checks and defaults of the fused ops' argument struct (runtime/fused_args.cc compiled
// in: libmkccl hides it). Every mistake is mkcclInvalidArgument with a message that names the field;
// what is accepted comes back with its defaults resolved.
#include <gtest/gtest.h>
#include <stdint.h>
#include <string>
#include "base/log.h"
#include "runtime/fused_args.h"

using namespace mkccl;

namespace {

// Fake, 16-byte aligned and far apart device addresses (nothing is dereferenced here).
char* at(uintptr_t mib) { return reinterpret_cast<char*>(mib << 20); }

mkcclFusedGemmArgs_t valid() {
  mkcclFusedGemmArgs_t a = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
  a.A = at(1);
  a.M = 256;
  a.K = 512;
  a.weights[0].W = at(100);
  a.weights[0].C = at(200);
  a.weights[0].N = 384;
  return a;
}

// Expects a refusal whose message contains `needle`.
void refused(FusedKind kind, int ws, const mkcclFusedGemmArgs_t& a, const char* needle) {
  FusedArgs r;
  EXPECT_EQ(mkcclInvalidArgument, fusedArgsResolve("op", kind, ws, 0, &a, &r)) << needle;
  EXPECT_NE(std::string::npos, std::string(lastError()).find(needle)) << lastError();
}

TEST(FusedArgsCheck, InitializerAndDefaults) {
  const mkcclFusedGemmArgs_t a = valid();
  EXPECT_EQ(sizeof(mkcclFusedGemmArgs_t), a.size);
  if (sizeof(void*) == 8) EXPECT_EQ(464u, sizeof(mkcclFusedGemmArgs_t)) << "python/mkccl/_library.py mirrors it";
  EXPECT_EQ(1, a.numWeights);
  FusedArgs r;
  ASSERT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::AllGatherGemm, 2, 1, &a, &r)) << lastError();
  EXPECT_EQ(512u, r.lda);
  EXPECT_EQ(512u, r.w[0].ldw);
  EXPECT_EQ(384u, r.w[0].ldc);
  EXPECT_EQ(mkcclBfloat16, r.outType) << "mkcclNumTypes: the input type";
  EXPECT_EQ(mkcclBfloat16, r.biasType);
  EXPECT_EQ(128u, r.aRows) << "AllGather+GEMM: A holds M / nranks rows";
  EXPECT_EQ(256u, r.cRows);
  EXPECT_TRUE(r.contiguous(0));
  EXPECT_FALSE(r.epilogueExtras(0));
  ASSERT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::GemmReduceScatter, 4, 0, &a, &r)) << lastError();
  EXPECT_EQ(256u, r.aRows);
  EXPECT_EQ(64u, r.cRows);
  mkcclFusedGemmArgs_t b = valid();
  b.inType = mkcclFloat16;
  b.outType = mkcclFloat32;
  b.weights[0].ldc = 388;
  ASSERT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::GemmAllReduce, 3, 2, &b, &r)) << lastError();
  EXPECT_EQ(mkcclFloat16, r.biasType);
  EXPECT_EQ(256u, r.cRows) << "AllReduce: M need not divide by the ranks";
  EXPECT_TRUE(r.epilogueExtras(0));
}

TEST(FusedArgsCheck, VersionedStruct) {
  FusedArgs r;
  EXPECT_EQ(mkcclInvalidArgument, fusedArgsResolve("op", FusedKind::AllGatherGemm, 1, 0, nullptr, &r));
  mkcclFusedGemmArgs_t a = valid();
  a.magic = 0;
  refused(FusedKind::AllGatherGemm, 1, a, "MKCCL_FUSED_GEMM_ARGS_INITIALIZER");
  a = valid();
  a.version = 2;
  refused(FusedKind::AllGatherGemm, 1, a, "version");
  a = valid();
  a.size = 8;
  refused(FusedKind::AllGatherGemm, 1, a, "size");
}

TEST(FusedArgsCheck, TypesAndShapes) {
  mkcclFusedGemmArgs_t a = valid();
  a.inType = mkcclFloat32;
  refused(FusedKind::AllGatherGemm, 1, a, "inType");
  a = valid();
  a.outType = mkcclInt32;
  refused(FusedKind::AllGatherGemm, 1, a, "outType");
  a = valid();
  a.biasType = mkcclFloat64;
  refused(FusedKind::AllGatherGemm, 1, a, "biasType");
  a = valid();
  a.M = 0;
  refused(FusedKind::AllGatherGemm, 1, a, "M=0");
  a = valid();
  a.M = 255;
  refused(FusedKind::AllGatherGemm, 2, a, "divisible");
  refused(FusedKind::GemmReduceScatter, 2, a, "divisible");
  FusedArgs r;
  EXPECT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::GemmAllReduce, 2, 0, &a, &r)) << lastError();
  a = valid();
  a.K = 12;
  refused(FusedKind::GemmAllReduce, 1, a, "K=12");
  a = valid();
  a.weights[0].N = 0;
  refused(FusedKind::AllGatherGemm, 1, a, "weights[0].N=0");
  a = valid();
  a.weights[0].N = 131;
  a.weights[0].ldc = 136;
  // (A TMA store writes the last 16-byte piece of a row whole: seen on an H100 writing C's padding.)
  refused(FusedKind::AllGatherGemm, 1, a, "must be a multiple of 16 bytes (TMA stores whole");
  refused(FusedKind::GemmReduceScatter, 1, a, "multiple of 8");
  a.weights[0].N = 132;  // bf16: 264 bytes
  refused(FusedKind::AllGatherGemm, 1, a, "weights[0].N=132");
  a.outType = mkcclFloat32;  // 528 bytes
  a.weights[0].ldc = 136;
  EXPECT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::AllGatherGemm, 1, 0, &a, &r)) << lastError();
}

TEST(FusedArgsCheck, Pitches) {
  mkcclFusedGemmArgs_t a = valid();
  a.lda = 256;
  refused(FusedKind::AllGatherGemm, 1, a, "lda = 256 is below");
  a = valid();
  a.lda = 516;  // 1032 bytes
  refused(FusedKind::AllGatherGemm, 1, a, "multiple of 16 bytes");
  a = valid();
  a.weights[0].ldw = 520;
  FusedArgs r;
  EXPECT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::AllGatherGemm, 1, 0, &a, &r)) << lastError();
  EXPECT_FALSE(r.contiguous(0));
  a.weights[0].ldw = 514;
  refused(FusedKind::AllGatherGemm, 1, a, "weights[0].ldw");
  a = valid();
  a.weights[0].ldc = 386;  // bf16: 772 bytes
  refused(FusedKind::AllGatherGemm, 1, a, "weights[0].ldc");
  a.outType = mkcclFloat32;
  a.weights[0].ldc = 388;  // fp32: 1552 bytes
  EXPECT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::AllGatherGemm, 1, 0, &a, &r)) << lastError();
  a = valid();
  a.weights[0].ldc = 388;  // bf16 776 bytes
  refused(FusedKind::AllGatherGemm, 1, a, "weights[0].ldc = 388 elements (776 bytes)");
}

TEST(FusedArgsCheck, PointersAndOverlaps) {
  mkcclFusedGemmArgs_t a = valid();
  a.A = nullptr;
  refused(FusedKind::AllGatherGemm, 1, a, "A is NULL");
  a = valid();
  a.A = at(1) + 8;
  refused(FusedKind::AllGatherGemm, 1, a, "16-byte aligned");
  a = valid();
  a.weights[0].C = nullptr;
  refused(FusedKind::AllGatherGemm, 1, a, "weights[0]: W and C");
  a = valid();
  a.weights[0].bias = at(300) + 1;
  refused(FusedKind::AllGatherGemm, 1, a, "weights[0].bias");
  a = valid();
  a.biasType = mkcclFloat32;
  a.weights[0].bias = at(300) + 2;
  refused(FusedKind::AllGatherGemm, 1, a, "4-byte aligned");
  a = valid();
  a.weights[0].C = at(1) + 4096;
  refused(FusedKind::AllGatherGemm, 1, a, "overlaps A");
  a = valid();
  a.weights[0].bias = at(200) + 64;
  refused(FusedKind::AllGatherGemm, 1, a, "overlaps weights[0].bias");
  a = valid();
  a.gatheredA = at(400);
  refused(FusedKind::GemmReduceScatter, 1, a, "AllGather+GEMM only");
  a.weights[0].C = at(400) + 1024;
  refused(FusedKind::AllGatherGemm, 1, a, "overlaps gatheredA");
  // In place: A is this rank's block of gatheredA (only with lda = K).
  a = valid();
  a.gatheredA = at(400);
  a.A = at(400) + 128 * 512 * 2;  // rank 1 of 2
  FusedArgs r;
  EXPECT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::AllGatherGemm, 2, 1, &a, &r)) << lastError();
  refused(FusedKind::AllGatherGemm, 2, a, "this rank's block");  // rank 0 of 2
  a.lda = 520;
  FusedArgs r1;
  EXPECT_EQ(mkcclInvalidArgument, fusedArgsResolve("op", FusedKind::AllGatherGemm, 2, 1, &a, &r1));
}

TEST(FusedArgsCheck, SeveralWeights) {
  mkcclFusedGemmArgs_t a = valid();
  a.numWeights = 3;
  a.weights[1] = mkcclFusedWeight_t{at(110), at(210), nullptr, 128, 0, 0};
  a.weights[2] = mkcclFusedWeight_t{at(120), at(220), at(320), 72, 520, 80};
  FusedArgs r;
  ASSERT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::AllGatherGemm, 2, 0, &a, &r)) << lastError();
  EXPECT_EQ(3, r.numWeights);
  EXPECT_EQ(128u, r.w[1].ldc);
  EXPECT_EQ(520u, r.w[2].ldw);
  refused(FusedKind::GemmReduceScatter, 2, a, "numWeights=3");
  refused(FusedKind::GemmAllReduce, 2, a, "numWeights=3");
  a.weights[2].C = at(210) + 128;  // into weight 1's C
  refused(FusedKind::AllGatherGemm, 2, a, "weights[1].C overlaps weights[2].C");
  a.weights[2].C = at(220);
  a.weights[1].W = at(100) + 64;  // weights may share memory (one stacked tensor)
  EXPECT_EQ(mkcclSuccess, fusedArgsResolve("op", FusedKind::AllGatherGemm, 2, 0, &a, &r)) << lastError();
  a.numWeights = 0;
  refused(FusedKind::AllGatherGemm, 2, a, "numWeights=0");
  a.numWeights = MKCCL_FUSED_MAX_WEIGHTS + 1;
  refused(FusedKind::AllGatherGemm, 2, a, "numWeights=9");
  a.numWeights = 2;
  a.weights[1].C = at(100);  // onto weight 0's W
  refused(FusedKind::AllGatherGemm, 2, a, "weights[1].C overlaps weights[0].W");
}

}  // namespace
