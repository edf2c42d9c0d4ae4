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
//
// Block scales (mkcclFp8ScaleBlock, each rank its own [M][ceil(K/128)] and [ceil(N/128)][ceil(K/128)]
// spread over 2^-4..2^4; `*Block*` tests): every route and push, every tile configuration the
// fused kernel has (128 x 128 with and without the 2-CTA cluster; 256x* run as 128 x 128) and the
// sequential route's plain GEMM's (128 x 192 too), K with a partial last 128-block and K of one
// block, back to back, and a CUDA graph captured and replayed with new inputs and scales. Besides
// the whole-matrix tolerance, each row is checked against the largest partial of that row, so that
// a wrong row's or block's scale shows even where other rows dominate the magnitudes.
#include <cuda_runtime.h>
#include <math.h>
#include <algorithm>
#include <stdint.h>
#include <string.h>
#include <random>
#include <string>
#include <vector>
#include "capture_replay.h"
#include "fp8_ref.h"
#include "fused_fp8_bad_args.h"
#include "fused_fp8_util.h"
#include "rank_threads.h"
#include "test_util.h"

namespace {

using namespace mkccl::test;

// Per tensor: 2^-3 .. 2^1.5: sA sW <= 8, so that the sum of 4 ranks' partials stays far inside
// fp16's range (|a w| <= 16 per product, sums of up to 2048 random products). Block scales: up
// to 2^blockMaxExp (fused_fp8_util.h).
float randomScale(std::mt19937_64& rng) { return randomFp8Scale(rng, -3.f, 1.5f); }

// m: ReduceScatter: rows of C per rank (M = m ws); AllReduce: M = m ws - 1 (m ws > 1).
using Shape = Fp8Shape;
// 200 rows per rank (tiles straddle the chunks), N and K tails (136, 272: K not a multiple of
// 128), tiny (one row per rank, 8 columns, one 16-byte k step), several waves of 128 x 256 tiles.
const Shape kShapes[] = {{200, 136, 272}, {1, 8, 16}, {384, 776, 1040}, {512, 2048, 2048}};
// Block scales: those, and one whole k-block (K = 128) with N past a 128-wide W scale block.
const Shape kBlockShapes[] = {{200, 136, 272}, {1, 8, 16}, {384, 776, 1040}, {512, 2048, 2048}, {130, 264, 128}};

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

// The tuning of a route for gemm_rs. / gemm_ar., and `extra` (e.g. "gemm.variant=128x2").
std::string tuningFor(const Route& rt, bool ar, const std::string& extra = "") {
  const std::string prefix = ar ? "gemm_ar." : "gemm_rs.";
  std::string out = extra, keys = rt.keys;
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

// One call of shape s on every rank: its buffers, and the reference (Σ_r of the partials, and per
// row the largest Σ_r |partial| of its elements, which bounds every value rounded on the way: each
// partial, and each running sum of the ring).
struct Case {
  Shape s;
  bool ar;
  mkcclDataType_t out;
  mkcclFp8ScaleKind_t kind;
  size_t M = 0, N = 0, K = 0, cRows = 0;
  std::vector<RankCall> calls;
  std::vector<double> P, rowMax;

  Case(InProcessRanks& w, const Shape& s_, bool ar_, mkcclDataType_t out_, mkcclFp8ScaleKind_t kind_)
      : s(s_), ar(ar_), out(out_), kind(kind_), calls(w.size()) {
    const int ws = w.size();
    M = rowsOf(s, ws, ar);
    N = s.N;
    K = s.K;
    cRows = ar ? M : M / size_t(ws);
  }
  size_t nA() const { return isBlock(kind) ? fp8BlockScalesA(M, K) : 1; }
  size_t nW() const { return isBlock(kind) ? fp8BlockScalesW(N, K) : 1; }

  // Buffers on every rank (C poisoned). False (and a failed EXPECT) if an allocation failed.
  bool alloc(InProcessRanks& w) {
    for (int r = 0; r < w.size(); ++r) {
      RankCall& c = calls[r];
      cudaSetDevice(w.devs[r]);
      c.A.alloc(M * K);
      c.W.alloc(N * K);
      c.C.alloc(cRows * N * 2);
      c.R.alloc(M * N * 4);
      c.sA.alloc(nA() * 4);
      c.sW.alloc(nW() * 4);
      EXPECT_TRUE(c.A.p && c.W.p && c.C.p && c.R.p && c.sA.p && c.sW.p);
      if (!(c.A.p && c.W.p && c.C.p && c.R.p && c.sA.p && c.sW.p)) return false;
      poison(c.C.p, cRows * N * 2);
      EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());  // the legacy stream orders no rank's stream
    }
    return true;
  }

  // Rank r's new inputs and scales into its buffers, C poisoned, and its partial into R (on
  // `stream`, which is synchronised).
  void fillRank(InProcessRanks& w, int r, std::mt19937_64& rng, cudaStream_t stream) {
    RankCall& c = calls[r];
    cudaSetDevice(w.devs[r]);
    poison(c.C.p, cRows * N * 2, stream);
    const std::vector<uint8_t> a = randomFp8(M * K, rng), wt = randomFp8(N * K, rng);
    std::vector<float> sA, sW;
    if (isBlock(kind)) {
      sA = randomFp8Scales(nA(), rng, -4.f, blockMaxExp(out));
      sW = randomFp8Scales(nW(), rng, -4.f, blockMaxExp(out));
    } else {
      sA = {randomScale(rng)};
      sW = {randomScale(rng)};
    }
    CUDA_OK(cudaMemcpyAsync(c.A.p, a.data(), M * K, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(c.W.p, wt.data(), N * K, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(c.sA.p, sA.data(), nA() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(c.sW.p, sW.data(), nW() * 4, cudaMemcpyHostToDevice, stream));
    const float* dA = static_cast<const float*>(c.sA.p);
    const float* dW = static_cast<const float*>(c.sW.p);
    if (isBlock(kind)) fp8BlockRef(c.A.p, c.W.p, dA, dW, static_cast<float*>(c.R.p), int(M), int(N), int(K), stream);
    else fp8TensorRef(c.A.p, c.W.p, dA, dW, static_cast<float*>(c.R.p), int(M), int(N), int(K), stream);
    CUDA_OK(cudaStreamSynchronize(stream));
  }

  // The reference from every rank's partial (after fillRank on every rank).
  void reduce(InProcessRanks& w) {
    P.assign(M * N, 0.0);
    std::vector<double> absSum(M * N, 0.0);
    for (int r = 0; r < w.size(); ++r) {
      cudaSetDevice(w.devs[r]);
      const std::vector<double> part = toHostDouble(calls[r].R.p, M * N, mkcclFloat32);
      for (size_t i = 0; i < M * N; ++i) {
        P[i] += part[i];
        absSum[i] += fabs(part[i]);
      }
    }
    rowMax.assign(M, 0.0);
    for (size_t i = 0; i < M * N; ++i) rowMax[i / N] = std::max(rowMax[i / N], absSum[i]);
  }

  void fill(InProcessRanks& w, std::mt19937_64& rng) {
    for (int r = 0; r < w.size(); ++r) fillRank(w, r, rng, 0);
    reduce(w);
  }

  mkcclResult_t call(InProcessRanks& w, int r, cudaStream_t stream) const {
    const RankCall& c = calls[r];
    const mkcclFp8Scales_t sc =
        MKCCL_FP8_SCALES_INIT(kind, static_cast<const float*>(c.sA.p), static_cast<const float*>(c.sW.p));
    return ar ? mkcclGemmAllReduceFp8(c.A.p, c.W.p, c.C.p, M, N, K, &sc, out, w.comms[r], stream)
              : mkcclGemmReduceScatterFp8(c.A.p, c.W.p, c.C.p, M, N, K, &sc, out, w.comms[r], stream);
  }

  // C of every rank against the reference.
  void check(InProcessRanks& w) const {
    const int ws = w.size();
    // Partials rounded to 16 bits (fp16: 2^-11, bf16: 2^-9 of their magnitude) before the sum: the
    // ring rounds each of its ws - 1 running sums and the result, and a running sum can exceed the
    // result's largest element (cancellation), so allow ws + 1 roundings at 1.5x that element
    // (a 4-rank ring measured 1.06e-2 once on one element of 800 x 136 bf16).
    const double tol = std::max(1e-2, (ws + 1) * 1.5 * (out == mkcclFloat16 ? 0x1p-11 : 0x1p-9));
    for (int r = 0; r < ws; ++r) {
      const RankCall& c = calls[r];
      SCOPED_TRACE(testing::Message() << "rank " << r);
      cudaSetDevice(w.devs[r]);
      const size_t row0 = ar ? 0 : size_t(r) * cRows;
      const std::vector<double> ref(P.begin() + row0 * N, P.begin() + (row0 + cRows) * N);
      const std::vector<double> got = toHostDouble(c.C.p, cRows * N, out);
      const ErrStats e = compare(got, ref, tol);
      EXPECT_EQ(0u, e.wrong) << "first wrong element " << e.firstWrong << " (row "
                             << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ")";
      EXPECT_LE(e.maxRelErr, tol);
      // Row by row, against the row's largest Σ_r |partial| (which bounds each value rounded on the
      // way): at most 2 ws - 1 roundings of 16 bits (partials, the ring's running sums, C), and the
      // tensor cores' own sums in each 128-block.
      const double rowTol = std::max(1e-2, 2 * ws * (out == mkcclFloat16 ? 0x1p-11 : 0x1p-9));
      size_t badRows = 0, firstBad = 0;
      for (size_t i = 0; i < cRows; ++i) {
        const double norm = std::max(rowMax[row0 + i], 1e-30);
        for (size_t j = 0; j < N; ++j)
          if (!(fabs(got[i * N + j] - ref[i * N + j]) <= rowTol * norm)) {
            if (badRows++ == 0) firstBad = i;
            break;
          }
      }
      EXPECT_EQ(0u, badRows) << "rows off their own magnitude, first: row " << firstBad << " of this rank's C";
    }
  }
};

// One call of shape s on every rank of `w`; C checked on every rank.
void runCase(InProcessRanks& w, const Shape& s, bool ar, mkcclDataType_t out, std::mt19937_64& rng,
             mkcclFp8ScaleKind_t kind = mkcclFp8ScaleTensor) {
  Case c(w, s, ar, out, kind);
  SCOPED_TRACE(testing::Message() << (ar ? "AllReduce" : "ReduceScatter") << ", " << w.size() << " ranks, M=" << c.M
                                  << " N=" << c.N << " K=" << c.K << " out " << static_cast<int>(out)
                                  << (isBlock(kind) ? " block scales" : " per-tensor scales"));
  if (!c.alloc(w)) return;
  c.fill(w, rng);
  const RankResults done = callOnEveryRank(w, [&](int r, cudaStream_t st) { return c.call(w, r, st); });
  for (int r = 0; r < w.size(); ++r) {
    SCOPED_TRACE(testing::Message() << "rank " << r);
    EXPECT_EQ(mkcclSuccess, done.res[r]) << mkcclGetLastError(w.comms[r]);
    ASSERT_EQ(cudaSuccess, done.sync[r]);
    expectNoAsyncError(w.comms[r]);
  }
  c.check(w);
}

// Every route of kRoutes that applies to the op (rs_ag: AllReduce only) on every world.
void everyRoute(bool ar, mkcclFp8ScaleKind_t kind) {
  std::vector<NamedTuning> routes;
  for (const Route& rt : kRoutes)
    if (!rt.arOnly || ar) routes.push_back({rt.name, tuningFor(rt, ar)});
  onEveryWorldAndTuning(routes, [&](InProcessRanks& w, std::mt19937_64& rng) {
    if (isBlock(kind))
      for (const Shape& s : kBlockShapes) runCase(w, s, ar, s.N == 776 ? mkcclFloat16 : mkcclBfloat16, rng, kind);
    else
      for (const Shape& s : kShapes) runCase(w, s, ar, s.N == 776 ? mkcclFloat16 : mkcclBfloat16, rng, kind);
  });
}

TEST(GemmReduceScatterFp8, EveryRouteAgainstReference) { everyRoute(false, mkcclFp8ScaleTensor); }
TEST(GemmAllReduceFp8, EveryRouteAgainstReference) { everyRoute(true, mkcclFp8ScaleTensor); }
TEST(GemmReduceScatterFp8Block, EveryRouteAgainstReference) { everyRoute(false, mkcclFp8ScaleBlock); }
TEST(GemmAllReduceFp8Block, EveryRouteAgainstReference) { everyRoute(true, mkcclFp8ScaleBlock); }

// Block scales on every tile configuration: the fused kernel's (gemm.variant 128x1 / 128x2; the
// wide variants run 128 x 128 too, with and without the cluster) and, on the sequential route, the
// plain block-scaled GEMM's (192x1 / 192x2 there are 128 x 192 tiles), both outputs, 2 and 4 ranks.
TEST(GemmReduceFp8Block, EveryTileConfiguration) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const Route& fused = kRoutes[1];
  const Route& sequential = kRoutes[5];
  for (const std::vector<int>& devs : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0, 0}}) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    for (const char* v : {"128x1", "128x2", "256x1", "256x2", "192x2"})
      for (const Route* rt : {&fused, &sequential})
        for (bool ar : {false, true}) {
          SCOPED_TRACE(testing::Message() << "gemm.variant=" << v << ", " << rt->name);
          ASSERT_NO_FATAL_FAILURE(setTuning(w, tuningFor(*rt, ar, std::string("gemm.variant=") + v)));
          runCase(w, Shape{200, 264, 400}, ar, mkcclBfloat16, rng, mkcclFp8ScaleBlock);
          runCase(w, Shape{300, 136, 128}, ar, mkcclFloat16, rng, mkcclFp8ScaleBlock);
        }
  }
}

// Back to back, shapes shrinking and routes cycling, both ops on one communicator: each call's
// flags and scratch land where the previous call's were. Per-tensor and block scales alternate
// (their plans and kernels differ) on the same communicator.
void shapeSequence(bool alternateKinds) {
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
      const mkcclFp8ScaleKind_t kind =
          alternateKinds && (i + (ar ? 1 : 0)) % 2 == 1 ? mkcclFp8ScaleTensor : mkcclFp8ScaleBlock;
      SCOPED_TRACE(rt.name);
      ASSERT_NO_FATAL_FAILURE(setTuning(w, tuningFor(rt, ar)));
      runCase(w, seq[i], ar, mkcclBfloat16, rng, alternateKinds ? kind : mkcclFp8ScaleTensor);
    }
}

TEST(GemmReduceFp8, ShapeSequence) { shapeSequence(false); }
TEST(GemmReduceFp8Block, ShapeSequenceMixedKinds) { shapeSequence(true); }

// Block scales captured in a CUDA graph on each route, replayed with new inputs and new scales in
// the same buffers between eager calls (2 and 3 ranks).
TEST(GemmReduceFp8Block, CapturedAndReplayed) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  for (const std::vector<int>& devs : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0}}) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    for (const Route* rt : {&kRoutes[1], &kRoutes[3], &kRoutes[5], &kRoutes[6]})
      for (bool ar : {false, true}) {
        if (rt->arOnly && !ar) continue;
        SCOPED_TRACE(testing::Message() << w.size() << " ranks, " << rt->name
                                        << (ar ? ", AllReduce" : ", ReduceScatter"));
        ASSERT_NO_FATAL_FAILURE(setTuning(w, tuningFor(*rt, ar)));
        Case c(w, Shape{264, 392, 656}, ar, mkcclBfloat16, mkcclFp8ScaleBlock);
        ASSERT_TRUE(c.alloc(w));
        std::vector<std::mt19937_64> rngs;
        for (int r = 0; r < w.size(); ++r) rngs.emplace_back(seed + 7919 * r);
        captureAndReplay(
            w, [&](int r, cudaStream_t s) { return c.call(w, r, s); },
            [&](int r, int) {
              c.fillRank(w, r, rngs[r], w.streams[r]);
              return !testing::Test::HasFatalFailure();
            },
            [&](int, const std::string& what) {
              SCOPED_TRACE(what);
              c.reduce(w);
              c.check(w);
            },
            2);
      }
  }
}

// Mistakes found only with a GPU, or on a communicator: host memory for a scale, block scales that
// run past their allocation, fp32 output, K that is not a 16-byte pitch, M not divisible by the
// ranks. The communicator stays usable.
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
    // Block scales of A: [256][1] floats for M = 256, K = 64; of W: [2][1] for N = 256.
    b.hostAndShortScaleRefusals(op, 256 * 1, 2 * 1,
                                [&](const mkcclFp8Scales_t& sc) { return call(sc, 256, 64, mkcclBfloat16); });
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
  runCase(w, Shape{128, 128, 128}, false, mkcclBfloat16, rng, mkcclFp8ScaleBlock);
}

}  // namespace
