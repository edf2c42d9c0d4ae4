// mkcclGemmFp8's argument checks that need no GPU (CI runs them): each mistake is refused with
// mkcclInvalidArgument and a message naming it, before any CUDA call. The pointers are never
// dereferenced: every case fails a check that comes first.
#include <stdint.h>
#include <string>
#include "mkccl.h"
#include <gtest/gtest.h>
#include "../common/fp8_scale_refusals.h"

namespace {

void* fakePtr(uintptr_t addr) { return reinterpret_cast<void*>(addr); }

struct Call {
  const void* A = fakePtr(0x10000);
  const void* W = fakePtr(0x20000);
  void* C = fakePtr(0x40000000);
  size_t M = 256, N = 256, K = 256;
  mkcclFp8Scales_t scales = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, static_cast<const float*>(fakePtr(0x30000)),
                                                  static_cast<const float*>(fakePtr(0x30010)));
  bool noScales = false;
  mkcclDataType_t out = mkcclBfloat16;
  mkcclResult_t run() const { return mkcclGemmFp8(A, W, C, M, N, K, noScales ? nullptr : &scales, out, nullptr); }
};

// The call is refused (as an invalid argument unless said) and the message contains `what`.
void expectRefused(const Call& c, const char* what, mkcclResult_t want = mkcclInvalidArgument) {
  SCOPED_TRACE(what);
  EXPECT_EQ(want, c.run());
  const std::string msg = mkcclGetLastError(nullptr);
  EXPECT_NE(msg.find("mkcclGemmFp8"), std::string::npos) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

TEST(GemmFp8Args, Refused) {
  Call c;
  c.M = 0;
  expectRefused(c, "M=0");
  c = Call();
  c.K = 24;  // 24 bytes of e4m3 per row: not a TMA pitch
  expectRefused(c, "K=24");
  c = Call();
  c.K = 1ull << 31;
  expectRefused(c, "2^31");
  c = Call();
  c.N = 4;  // 8 bytes of bf16 per row of C
  expectRefused(c, "N=4");
  c = Call();
  c.out = mkcclFloat32;
  c.N = 2;  // 8 bytes of fp32 per row of C
  expectRefused(c, "N=2");
  c = Call();
  c.out = mkcclFloat8e4m3;
  expectRefused(c, "outType");
  c = Call();
  c.A = nullptr;
  expectRefused(c, "NULL");
  c = Call();
  c.W = fakePtr(0x20008);
  expectRefused(c, "16-byte aligned");
  mkccl::test::fp8ScaleRefusals<Call>(expectRefused);
  c = Call();
  c.C = fakePtr(0x10000 + 4096);  // inside A
  expectRefused(c, "overlaps");
  c = Call();
  c.scales.kind = mkcclFp8ScaleBlock;  // 256 x 2 scales of A from 0x30000 reach C placed right after
  c.C = fakePtr(0x30000 + 1024);
  expectRefused(c, "overlaps");
}

}  // namespace
