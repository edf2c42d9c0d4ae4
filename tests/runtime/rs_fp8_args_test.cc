// CPU: mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8's argument checks that need no GPU
// (runtime/rs_fp8_args.cc compiled in: libmkccl hides it). Each mistake is refused with a message
// naming the call and the argument; valid calls of both ops pass, with per-tensor and with block scales. Block scales' sizes
// ([M][ceil(K/128)], [ceil(N/128)][ceil(K/128)]) show in the overlap checks; the allocations they
// must fit are checked on a GPU (gemm_rs_fp8_test, BadArguments).
#include <gtest/gtest.h>
#include <stdint.h>
#include <string>
#include "base/log.h"
#include "runtime/rs_fp8_args.h"
#include "../common/fp8_scale_refusals.h"

using namespace mkccl;

namespace {

// Fake, 16-byte aligned and far apart device addresses (nothing is dereferenced here).
char* at(uintptr_t mib) { return reinterpret_cast<char*>(mib << 20); }

struct Call {
  bool ar = false;
  int ws = 2;
  const void* A = at(1);
  const void* W = at(100);
  void* C = at(200);
  size_t M = 256, N = 384, K = 512;
  mkcclFp8Scales_t scales = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, reinterpret_cast<const float*>(at(300)),
                                                  reinterpret_cast<const float*>(at(301)));
  bool noScales = false;
  mkcclDataType_t out = mkcclBfloat16;
  const char* op() const { return ar ? "mkcclGemmAllReduceFp8" : "mkcclGemmReduceScatterFp8"; }
  mkcclResult_t run() const {
    return gemmReduceFp8ArgsCheck(op(), ar, ws, A, W, C, M, N, K, noScales ? nullptr : &scales, out);
  }
};

void refused(const Call& c, const char* needle, mkcclResult_t want = mkcclInvalidArgument) {
  SCOPED_TRACE(needle);
  EXPECT_EQ(want, c.run());
  const std::string msg = lastError();
  EXPECT_NE(msg.find(c.op()), std::string::npos) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}

TEST(GemmReduceFp8Args, Accepted) {
  for (bool ar : {false, true}) {
    SCOPED_TRACE(ar ? "AllReduce" : "ReduceScatter");
    Call c;
    c.ar = ar;
    EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
    c.scales.kind = mkcclFp8ScaleBlock;
    EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
    c = Call();
    c.ar = ar;
    c.out = mkcclFloat16;
    c.N = 8;
    c.K = 16;
    c.ws = 4;
    c.M = 4;
    EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
    c = Call();
    c.ar = ar;
    c.ws = 1;
    c.M = 1;
    EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  }
  // AllReduce: M need not divide by the ranks.
  Call c;
  c.ar = true;
  c.ws = 3;
  c.M = 7;
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  // ReduceScatter: C holds M / ws rows, so a C ending where A starts does not overlap it.
  c = Call();
  c.C = at(1);
  c.A = at(1) + 128 * 384 * 2;
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
  // A per-tensor scale 2 KiB before C is clear of it (as block scales it would reach into C).
  c = Call();
  c.scales.scaleA = reinterpret_cast<const float*>(at(200) - 2048);
  EXPECT_EQ(mkcclSuccess, c.run()) << lastError();
}

TEST(GemmReduceFp8Args, Refused) {
  test::fusedFp8ShapeRefusals<Call>(refused, 12);  // N = 12: 24 bytes of bf16 per row of C
  Call c;
  c.out = mkcclFloat32;
  refused(c, "outType");
  c = Call();
  c.out = mkcclFloat8e4m3;
  refused(c, "outType");
  c = Call();
  c.A = nullptr;
  refused(c, "NULL");
  c = Call();
  c.W = at(100) + 8;
  refused(c, "16-byte aligned");
  for (bool ar : {false, true}) {
    SCOPED_TRACE(ar ? "AllReduce" : "ReduceScatter");
    auto refusedAs = [ar](Call c, const char* needle, mkcclResult_t want) {
      c.ar = ar;
      refused(c, needle, want);
    };
    test::fp8ScaleRefusals<Call>(refusedAs);
  }
  c = Call();
  c.C = at(1);  // C over A
  c.A = at(1) + 128 * 384 * 2 - 4096;
  refused(c, "C overlaps A or W");
  c = Call();
  c.ar = true;  // AllReduce: C holds all M rows, so it reaches A here
  c.C = at(1);
  c.A = at(1) + 128 * 384 * 2;
  refused(c, "C overlaps A or W");
  c = Call();
  c.W = at(200) + 1024;  // inside C
  refused(c, "C overlaps A or W");
  c = Call();
  c.scales.scaleW = reinterpret_cast<const float*>(at(200) + 64);  // inside C
  refused(c, "C overlaps a scale");
  // Block scales: A's are [256][4] floats (4 KiB), W's [3][4] (48 bytes); from 2 KiB / 16 bytes
  // before C they reach into it.
  c = Call();
  c.scales.kind = mkcclFp8ScaleBlock;
  c.scales.scaleA = reinterpret_cast<const float*>(at(200) - 2048);
  refused(c, "C overlaps a scale");
  c = Call();
  c.scales.kind = mkcclFp8ScaleBlock;
  c.scales.scaleW = reinterpret_cast<const float*>(at(200) - 16);
  refused(c, "C overlaps a scale");
}

}  // namespace
