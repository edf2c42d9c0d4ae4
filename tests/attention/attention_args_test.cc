// Arguments mkcclAttention and mkcclRingAttention refuse before touching a GPU (CI: no GPU here).
#include <gtest/gtest.h>
#include <math.h>
#include <string>
#include "mkccl.h"

namespace {

// 16-byte aligned fake addresses: the shape checks refuse before any pointer is looked at.
void* const kP = reinterpret_cast<void*>(0x10000);
void* const kP2 = reinterpret_cast<void*>(0x20000);
void* const kP3 = reinterpret_cast<void*>(0x30000);
void* const kP4 = reinterpret_cast<void*>(0x40000);

mkcclResult_t call(size_t B, size_t sq, size_t skv, int hq, int hkv, int d, float scale, int causal,
                   mkcclDataType_t t, const void* Q = kP, void* O = kP4) {
  return mkcclAttention(Q, kP2, kP3, O, nullptr, B, sq, skv, hq, hkv, d, scale, causal, t, nullptr);
}

void expectRefused(mkcclResult_t r, const char* what) {
  EXPECT_EQ(mkcclInvalidArgument, r) << what;
  EXPECT_NE(std::string(""), mkcclGetLastError(nullptr)) << what;
}

TEST(AttentionArgs, Refused) {
  expectRefused(call(1, 128, 128, 4, 2, 128, 0.1f, 0, mkcclFloat32), "fp32 inputs");
  expectRefused(call(0, 128, 128, 4, 2, 128, 0.1f, 0, mkcclBfloat16), "batch 0");
  expectRefused(call(1, 0, 128, 4, 2, 128, 0.1f, 0, mkcclBfloat16), "seqQ 0");
  expectRefused(call(1, 128, 0, 4, 2, 128, 0.1f, 0, mkcclBfloat16), "seqKv 0");
  expectRefused(call(1, 128, 128, 4, 2, 96, 0.1f, 0, mkcclBfloat16), "head dim 96");
  expectRefused(call(1, 128, 128, 4, 3, 128, 0.1f, 0, mkcclBfloat16), "heads 4/3");
  expectRefused(call(1, 128, 128, 0, 1, 128, 0.1f, 0, mkcclBfloat16), "no query head");
  expectRefused(call(1, 128, 128, 4, 2, 128, 0.0f, 0, mkcclBfloat16), "scale 0");
  expectRefused(call(1, 128, 128, 4, 2, 128, -1.0f, 0, mkcclBfloat16), "negative scale");
  expectRefused(call(1, 128, 128, 4, 2, 128, NAN, 0, mkcclBfloat16), "NaN scale");
  expectRefused(call(1, 128, 128, 4, 2, 128, 0.1f, 2, mkcclBfloat16), "causal 2");
  expectRefused(call(1, 1ull << 31, 128, 4, 2, 128, 0.1f, 0, mkcclBfloat16), "seqQ 2^31");
  expectRefused(call(1, 128, 128, 4, 2, 128, 0.1f, 0, mkcclBfloat16, nullptr), "Q NULL");
  expectRefused(call(1, 128, 128, 4, 2, 128, 0.1f, 0, mkcclBfloat16, reinterpret_cast<void*>(0x10008)),
                "Q misaligned");
  expectRefused(call(1, 128, 128, 4, 2, 128, 0.1f, 0, mkcclBfloat16, kP, kP), "O is Q");
  EXPECT_NE(mkcclSuccess, mkcclRingAttention(kP, kP2, kP3, kP4, nullptr, 1, 128, 4, 2, 128, 0.1f, 0,
                                             mkcclAttnZigzag, mkcclBfloat16, nullptr, nullptr))
      << "no communicator";
}

}  // namespace
