// mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8 against a reference from the dequantised
// inputs: each rank's partial Σ_k (A_r[m, k] sA_r) (W_r[n, k] sW_r) computed in fp32 on the GPU,
// the partials summed in fp64 on the host. Ranks in one process (a thread per rank; 1 rank, and
// 2, 3 and 4 ranks sharing the GPUs: rank_threads.h). Random e4m3 inputs, scales that are not 1
// and differ per rank (each rank's partial is scaled before the reduction), C poisoned; row counts
// that are not multiples of 128 (AllReduce: M not divisible by the ranks), N and K tails, tiny
// shapes; bf16 and fp16 outputs; every route and push forced (fused with the push team, bulk
// stores, copy engines, the ring reduction; sequential; AllReduce: rs_ag) and auto; shapes and
// routes in sequence; argument errors that need a GPU. The checks that need no GPU:
// rs_fp8_args_test (CPU).
#include <cuda_runtime.h>
#include <math.h>
#include <algorithm>
#include <stdint.h>
#include <string.h>
#include <random>
#include <string>
#include <vector>
#include "fp8_ref.h"
#include "fused_fp8_bad_args.h"
#include "rank_threads.h"
#include "test_util.h"

namespace {

using namespace mkccl::test;

// 2^-3 .. 2^1.5: sA sW <= 8, so that the sum of 4 ranks' partials stays far inside fp16's range
// (|a w| <= 16 per product, sums of up to 2048 random products).
float randomScale(std::mt19937_64& rng) { return randomFp8Scale(rng, -3.f, 1.5f); }

struct Shape {
  size_t m, N, K;  // ReduceScatter: rows of C per rank (M = m ws); AllReduce: M = m ws - 1 (m ws > 1)
};
// 200 rows per rank (tiles straddle the chunks), N and K tails (136, 272: K not a multiple of
// 128), tiny (one row per rank, 8 columns, one 16-byte k step), several waves of 128 x 256 tiles.
const Shape kShapes[] = {{200, 136, 272}, {1, 8, 16}, {384, 776, 1040}, {512, 2048, 2048}};

using Buf = DeviceBuf;

struct RankCall {
  Buf A, W, C, R, sA, sW;
};

// A route of the test: the tuning string for gemm_rs. / gemm_ar.
struct Route {
  const char* name;
  const char* keys;  // after the prefix, ';'-separated; "" for auto
  bool arOnly;
};
const Route kRoutes[] = {
    {"auto", "", false},
    {"fused, team", "plan=fused;push=team", false},
    {"fused, bulk", "plan=fused;push=bulk", false},
    {"fused, ce", "plan=fused;push=ce", false},
    {"fused, ring", "plan=fused;push=team;reduce=ring;order=phases", false},
    {"sequential", "plan=sequential", false},
    {"rs_ag", "plan=rs_ag", true},
};

std::string tuningFor(const Route& rt, bool ar) {
  const std::string prefix = ar ? "gemm_ar." : "gemm_rs.";
  std::string out, keys = rt.keys;
  size_t at = 0;
  while (at < keys.size()) {
    const size_t semi = keys.find(';', at);
    const std::string k = keys.substr(at, semi == std::string::npos ? std::string::npos : semi - at);
    out += (out.empty() ? "" : ";") + prefix + k;
    if (semi == std::string::npos) break;
    at = semi + 1;
  }
  return out;
}

size_t rowsOf(const Shape& s, int ws, bool ar) {
  const size_t M = s.m * size_t(ws);
  return ar && M > 1 ? M - 1 : M;
}

// One call of shape s on every rank of `w`; C checked on every rank.
void runCase(InProcessRanks& w, const Shape& s, bool ar, mkcclDataType_t out, std::mt19937_64& rng) {
  const int ws = w.size();
  const size_t M = rowsOf(s, ws, ar), N = s.N, K = s.K, cRows = ar ? M : M / size_t(ws);
  SCOPED_TRACE(testing::Message() << (ar ? "AllReduce" : "ReduceScatter") << ", " << ws << " ranks, M=" << M
                                  << " N=" << N << " K=" << K << " out " << static_cast<int>(out));
  std::vector<RankCall> calls(ws);
  std::vector<double> P(M * N, 0.0);  // Σ_r of the partials
  for (int r = 0; r < ws; ++r) {
    RankCall& c = calls[r];
    cudaSetDevice(w.devs[r]);
    const std::vector<uint8_t> a = randomFp8(M * K, rng), wt = randomFp8(N * K, rng);
    const float sA = randomScale(rng), sW = randomScale(rng);
    c.A.alloc(M * K);
    c.W.alloc(N * K);
    c.C.alloc(cRows * N * 2);
    c.R.alloc(M * N * 4);
    c.sA.alloc(4);
    c.sW.alloc(4);
    ASSERT_TRUE(c.A.p && c.W.p && c.C.p && c.R.p && c.sA.p && c.sW.p);
    CUDA_OK(cudaMemcpy(c.A.p, a.data(), M * K, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c.W.p, wt.data(), N * K, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c.sA.p, &sA, 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c.sW.p, &sW, 4, cudaMemcpyHostToDevice));
    poison(c.C.p, cRows * N * 2);
    fp8TensorRef(c.A.p, c.W.p, static_cast<const float*>(c.sA.p), static_cast<const float*>(c.sW.p),
                 static_cast<float*>(c.R.p), int(M), int(N), int(K));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<double> part = toHostDouble(c.R.p, M * N, mkcclFloat32);
    for (size_t i = 0; i < M * N; ++i) P[i] += part[i];
  }
  std::vector<mkcclResult_t> res(ws, mkcclInternalError);
  std::vector<cudaError_t> sync(ws, cudaErrorUnknown);
  w.onEveryRank([&](int r) {
    RankCall& c = calls[r];
    const mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, static_cast<const float*>(c.sA.p),
                                                      static_cast<const float*>(c.sW.p));
    res[r] = ar ? mkcclGemmAllReduceFp8(c.A.p, c.W.p, c.C.p, M, N, K, &sc, out, w.comms[r], w.streams[r])
                : mkcclGemmReduceScatterFp8(c.A.p, c.W.p, c.C.p, M, N, K, &sc, out, w.comms[r], w.streams[r]);
    sync[r] = cudaStreamSynchronize(w.streams[r]);
  });
  for (int r = 0; r < ws; ++r) {
    RankCall& c = calls[r];
    SCOPED_TRACE(testing::Message() << "rank " << r);
    EXPECT_EQ(mkcclSuccess, res[r]) << mkcclGetLastError(w.comms[r]);
    ASSERT_EQ(cudaSuccess, sync[r]);
    mkcclResult_t async = mkcclSuccess;
    EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(w.comms[r], &async));
    EXPECT_EQ(mkcclSuccess, async) << mkcclGetLastError(w.comms[r]);
    cudaSetDevice(w.devs[r]);
    const size_t row0 = ar ? 0 : size_t(r) * cRows;
    const std::vector<double> ref(P.begin() + row0 * N, P.begin() + (row0 + cRows) * N);
    // Partials rounded to 16 bits (fp16: 2^-11, bf16: 2^-9 of their magnitude) before the sum: the
    // ring rounds each of its ws - 1 running sums and the result, and a running sum can exceed the
    // result's largest element (cancellation), so allow ws + 1 roundings at 1.5x that element
    // (a 4-rank ring measured 1.06e-2 once on one element of 800 x 136 bf16).
    const double tol = std::max(1e-2, (ws + 1) * 1.5 * (out == mkcclFloat16 ? 0x1p-11 : 0x1p-9));
    const ErrStats e = compare(toHostDouble(c.C.p, cRows * N, out), ref, tol);
    EXPECT_EQ(0u, e.wrong) << "first wrong element " << e.firstWrong << " (row "
                           << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ")";
    EXPECT_LE(e.maxRelErr, tol);
  }
}

std::vector<std::vector<int>> worlds() {
  std::vector<std::vector<int>> v{{0}};
  for (const auto& d : sharedGpuWorlds()) v.push_back(d);
  return v;
}

void everyRoute(bool ar) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (const std::vector<int>& devs : worlds()) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    for (const Route& rt : kRoutes) {
      if (rt.arOnly && !ar) continue;
      if (w.size() == 1 && rt.keys[0] != '\0') continue;  // one rank: mkcclGemmFp8, no route
      SCOPED_TRACE(rt.name);
      for (int r = 0; r < w.size(); ++r)
        ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuningFor(rt, ar).c_str())) << mkcclGetLastError(nullptr);
      for (const Shape& s : kShapes) runCase(w, s, ar, s.N == 776 ? mkcclFloat16 : mkcclBfloat16, rng);
    }
  }
}

TEST(GemmReduceScatterFp8, EveryRouteAgainstReference) { everyRoute(false); }
TEST(GemmAllReduceFp8, EveryRouteAgainstReference) { everyRoute(true); }

// Back to back, shapes shrinking and routes cycling, both ops on one communicator: each call's
// flags and scratch land where the previous call's were.
TEST(GemmReduceFp8, ShapeSequence) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const std::vector<int> devs{0, 0, 0};
  const SharedGpus shared(devs);
  InProcessRanks w(devs);
  ASSERT_TRUE(w.ok());
  const Shape seq[] = {{512, 2048, 2048}, {384, 776, 1040}, {200, 136, 272}, {1, 8, 16}};
  for (int i = 0; i < 4; ++i)
    for (bool ar : {false, true}) {
      const Route& rt = kRoutes[1 + (i + (ar ? 1 : 0)) % 5];
      SCOPED_TRACE(rt.name);
      for (int r = 0; r < w.size(); ++r)
        ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuningFor(rt, ar).c_str()));
      runCase(w, seq[i], ar, mkcclBfloat16, rng);
    }
}

// Mistakes found only with a GPU, or on a communicator: host memory for a scale, block scales
// (not built), fp32 output, K that is not a 16-byte pitch, M not divisible by the ranks. The
// communicator stays usable.
TEST(GemmReduceFp8, BadArguments) {
  MKCCL_REQUIRE_GPUS(1);
  FusedFp8BadArgs b;
  ASSERT_NO_FATAL_FAILURE(b.setUp());
  InProcessRanks& w = b.w;
  const float* dev = b.dev();
  for (bool ar : {false, true}) {
    const char* op = ar ? "mkcclGemmAllReduceFp8" : "mkcclGemmReduceScatterFp8";
    SCOPED_TRACE(op);
    auto call = [&](const mkcclFp8Scales_t& sc, size_t M, size_t K, mkcclDataType_t out) {
      return ar ? mkcclGemmAllReduceFp8(b.A.p, b.W.p, b.C.p, M, 256, K, &sc, out, w.comms[0], w.streams[0])
                : mkcclGemmReduceScatterFp8(b.A.p, b.W.p, b.C.p, M, 256, K, &sc, out, w.comms[0], w.streams[0]);
    };
    auto expectMsg = [&](const char* needle) { b.expectMsg(op, needle); };
    b.hostAndBlockScaleRefusals(op, [&](const mkcclFp8Scales_t& sc) { return call(sc, 256, 64, mkcclBfloat16); });
    const mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, dev, dev + 1);
    EXPECT_EQ(mkcclInvalidArgument, call(sc, 256, 64, mkcclFloat32));
    expectMsg("outType");
    EXPECT_EQ(mkcclInvalidArgument, call(sc, 256, 24, mkcclBfloat16));
    expectMsg("K=24");
    if (!ar) {
      EXPECT_EQ(mkcclInvalidArgument, call(sc, 255, 64, mkcclBfloat16));
      expectMsg("divisible");
    }
  }
  // Still usable: real calls on both ranks.
  std::mt19937_64 rng(freshSeed());
  runCase(w, Shape{128, 128, 128}, false, mkcclBfloat16, rng);
  runCase(w, Shape{128, 128, 128}, true, mkcclBfloat16, rng);
}

}  // namespace
