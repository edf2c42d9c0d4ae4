// CPU: mkcclAllGatherGemmFp8's argument checks that need no GPU (runtime/ag_fp8_args.cc compiled
// in: libmkccl hides it). Each mistake is refused with a message naming the call and the argument;
// a valid call, in place included, passes, with per-tensor and with block scales. Block scales'
// sizes (this rank's shard's [M / nranks][ceil(K/128)], W's [ceil(N/128)][ceil(K/128)]) show in
// the overlap checks; the allocations they must fit are checked on a GPU (ag_gemm_fp8_test).
#include <gtest/gtest.h>
#include <stdint.h>
#include <string>
#include "base/log.h"
#include "runtime/ag_fp8_args.h"
#include "../common/fp8_scale_refusals.h"

using namespace mkccl;

namespace {

// Fake, 16-byte aligned and far apart device addresses (nothing is dereferenced here).
char* at(uintptr_t mib) { return reinterpret_cast<char*>(mib << 20); }

struct Call {
  int ws = 2, rank = 1;
  const void* A = at(1);
  const void* W = at(100);
  void* C = at(200);
  void* G = nullptr;
  size_t M = 256, N = 384, K = 512;
  mkcclFp8Scales_t scales = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, reinterpret_cast<const float*>(at(300)),
                                                  reinterpret_cast<const float*>(at(301)));
  bool noScales = false;
  mkcclDataType_t out = mkcclBfloat16;
  mkcclResult_t run() const {
    return agGemmFp8ArgsCheck("mkcclAllGatherGemmFp8", ws, rank, A, W, C, G, M, N, K, noScales ? nullptr : &scales,
                              out);
  }
};

void refused(const Call& c, const char* needle, mkcclResult_t want = mkcclInvalidArgument) {
  SCOPED_TRACE(needle);
  EXPECT_EQ(want, c.run());
  const std::string msg = lastError();
  EXPECT_NE(msg.find("mkcclAllGatherGemmFp8"), std::string::npos) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}

TEST(AgGemmFp8Args, Accepted) {
  Call c;
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  c.scales.kind = mkcclFp8ScaleBlock;
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  // Block scales of A cover the shard's 128 rows only: [128][4] floats end 2 KiB after scaleA.
  c.scales.scaleA = reinterpret_cast<const float*>(at(200) - 2048);
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  c = Call();
  c.G = at(400);
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  c.A = at(400) + 128 * 512;  // rank 1's block of gatheredA: in place
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  c = Call();
  c.out = mkcclFloat32;
  c.N = 4;  // 16 bytes of fp32
  c.K = 16;
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  c = Call();
  c.ws = 1;
  c.rank = 0;
  c.M = 1;
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
}

TEST(AgGemmFp8Args, Refused) {
  test::fusedFp8ShapeRefusals<Call>(refused, 4);  // N = 4: 8 bytes of bf16 per row of C
  Call c;
  c.out = mkcclFloat8e4m3;
  refused(c, "outType");
  c = Call();
  c.W = nullptr;
  refused(c, "NULL");
  c = Call();
  c.C = at(200) + 8;
  refused(c, "16-byte aligned");
  c = Call();
  c.G = at(400) + 4;
  refused(c, "16-byte aligned");
  test::fp8ScaleRefusals<Call>(refused);
  c = Call();
  c.C = at(1);  // C over A
  c.A = at(1) + 256 * 384 * 2 - 4096;
  refused(c, "C overlaps");
  c = Call();
  c.scales.scaleA = reinterpret_cast<const float*>(at(200) + 64);  // inside C
  refused(c, "C overlaps a scale");
  // Block scales: A's are the shard's [128][4] floats (2 KiB), W's [3][4] (48 bytes).
  c = Call();
  c.scales.kind = mkcclFp8ScaleBlock;
  c.scales.scaleA = reinterpret_cast<const float*>(at(200) - 2044);
  refused(c, "C overlaps a scale");
  c = Call();
  c.G = at(400);
  c.scales.kind = mkcclFp8ScaleBlock;
  c.scales.scaleW = reinterpret_cast<const float*>(at(400) - 16);
  refused(c, "gatheredA overlaps W or a scale");
  c = Call();
  c.G = at(400);
  c.W = at(400) + 1024;
  refused(c, "gatheredA overlaps W");
  c = Call();
  c.G = at(400);
  c.A = at(400);  // rank 0's block, on rank 1
  refused(c, "gatheredA overlaps A");
}

}  // namespace
