// The set-up the BadArguments tests of the fused fp8 calls share (ag_gemm_fp8_test:
// mkcclAllGatherGemmFp8; gemm_rs_fp8_test: mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8),
// for the mistakes found only with a GPU or on a communicator, and the refusals of theirs that
// are the same for every fused fp8 call. (The refusals needing no GPU: fp8_scale_refusals.h.)
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <string>
#include <vector>
#include "mkccl.h"
#include "rank_threads.h"
#include "test_util.h"

namespace mkccl {
namespace test {

// Two ranks sharing device 0 and, on it, the e4m3 inputs of a call of M, N <= 256 and K <= 64 (A
// and W 256 x 64 bytes), C for 256 x 256 fp32, four device floats for scales and a 2 MiB buffer
// for block scales (big: whole allocation granules, so that a pointer near its end has exactly the
// bytes before the end left). Members in the order the tests made them (the ranks before the
// buffers, freed after them).
struct FusedFp8BadArgs {
  static constexpr size_t kBigBytes = 2u << 20;
  const std::vector<int> devs{0, 0};
  const SharedGpus shared{devs};
  InProcessRanks w{devs};
  DeviceBuf A, W, C, s, big;

  // Checks the ranks exist and allocates the buffers: call through ASSERT_NO_FATAL_FAILURE.
  void setUp() {
    ASSERT_TRUE(w.ok());
    cudaSetDevice(0);
    A.alloc(256 * 64);
    W.alloc(256 * 64);
    C.alloc(256 * 256 * 4);
    s.alloc(16);
    big.alloc(kBigBytes);
    ASSERT_TRUE(A.p && W.p && C.p && s.p && big.p);
  }
  // n floats of big: at its start, or ending 4 bytes past its end (one float short).
  const float* bigFloats() const { return static_cast<const float*>(big.p); }
  const float* shortFloats(size_t n) const {
    return reinterpret_cast<const float*>(static_cast<const char*>(big.p) + kBigBytes - (n - 1) * sizeof(float));
  }
  // The four device floats (dev(), dev() + 1: a valid pair of per-tensor scales).
  const float* dev() const { return static_cast<const float*>(s.p); }
  // A scale in host memory, which the calls must refuse (static: it outlives every call).
  static const float* host() {
    alignas(16) static float hostScale[4] = {1, 1, 1, 1};
    return hostScale;
  }
  // The last error of rank 0's communicator contains `needle` and names the call `op`.
  void expectMsg(const char* op, const char* needle) const {
    const std::string msg = mkcclGetLastError(w.comms[0]);
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(op), std::string::npos) << msg;
  }
  // scaleA in host memory, then scaleW; then block scales of A (nA floats expected), then of W
  // (nW), one float short of their allocation's end: each refused with mkcclInvalidArgument and a
  // message naming `op` and the scale. call(sc): rank 0's call with scales sc, the rest valid.
  template <class Call>
  void hostAndShortScaleRefusals(const char* op, size_t nA, size_t nW, const Call& call) const {
    ASSERT_LE((nA + nW) * sizeof(float), kBigBytes / 2);
    mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, host(), dev());
    EXPECT_EQ(mkcclInvalidArgument, call(sc));
    expectMsg(op, "scaleA");
    sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, dev(), host());
    EXPECT_EQ(mkcclInvalidArgument, call(sc));
    expectMsg(op, "scaleW");
    sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleBlock, shortFloats(nA), bigFloats());
    EXPECT_EQ(mkcclInvalidArgument, call(sc));
    expectMsg(op, "scales->scaleA");
    expectMsg(op, "past the end");
    sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleBlock, bigFloats(), shortFloats(nW));
    EXPECT_EQ(mkcclInvalidArgument, call(sc));
    expectMsg(op, "scales->scaleW");
    expectMsg(op, "past the end");
  }
};

}  // namespace test
}  // namespace mkccl
