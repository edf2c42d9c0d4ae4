// mkcclAllGatherGemmFp8 against an fp32 reference computed on the GPU from the dequantised inputs
// (the gathered e4m3 A times sA, W times sW, products summed in fp32), with ranks in one process
// (a thread per rank; 1 rank, and 2, 3 and 4 ranks sharing the GPUs: rank_threads.h). Random e4m3
// inputs, scales that are not 1 (sA the same on every rank, as the API requires; sW per rank),
// C and gatheredA poisoned; shards that are not a multiple of 128 rows, N and K tails, tiny
// shapes; every plan forced and auto; gatheredA absent, separate and in place (returned checked
// byte for byte); bf16 and fp32 outputs; argument errors that need a GPU (host scales, block
// scales past their allocation, a K that is not a TMA pitch). The checks that need no GPU:
// ag_fp8_args_test (CPU).
//
// Block scales (mkcclFp8ScaleBlock; `*Block*` tests): each rank's shard has its own scale rows
// [m][ceil(K/128)] spread over 2^-4..2^4 and W its own [ceil(N/128)][ceil(K/128)]; the reference
// runs on the gathered A with the gathered scale rows. Every plan (the ce plan along the ring
// too), gatheredA absent / separate / in place / registered (the pushes then go straight into the
// peers' gatheredA while the scale rows still go to their regions), bf16 / fp16 / fp32 outputs,
// every tile configuration of the fused kernel (128 x 192 and 128 x 128, with and without the
// 2-CTA cluster) and of the sequential plan's GEMM, K with a partial last block and K of one block,
// back to back, and a CUDA graph captured and replayed with new inputs and scales. Besides the
// whole-matrix tolerance each row is checked against its own largest element, so that a row read
// with another row's scales (a peer's rows, shard boundaries inside a tile) shows.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <initializer_list>
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

float randomScale(std::mt19937_64& rng) { return randomFp8Scale(rng, -4.f, 3.f); }

using Shape = Fp8Shape;  // m: rows per shard (M = m ws)
// Shards of 200 rows (tiles straddle shards), N and K tails (136, 272: K not a multiple of 128),
// tiny (one row per shard, 8 columns, one 16-byte k step), several waves of 128 x 256 tiles.
const Shape kShapes[] = {{200, 136, 272}, {1, 8, 16}, {384, 776, 1040}, {512, 2048, 2048}};
// Block scales: those, and one whole k-block (K = 128) with N past a 128-wide W scale block and
// whole 128-row shards (every tile own or a peer's, none straddling).
const Shape kBlockShapes[] = {{200, 136, 272}, {1, 8, 16}, {384, 776, 1040}, {512, 2048, 2048}, {128, 264, 128}};

// Registered: gatheredA from mkcclMemAlloc, registered with the communicator (in place).
enum class Gathered { None, Separate, InPlace, Registered };

using Buf = DeviceBuf;

size_t outBytes(mkcclDataType_t t) { return t == mkcclFloat32 ? 4 : 2; }

// One rank's buffers of one call. G: gatheredA (cudaMalloc, or mkcclMemAlloc when registered).
struct RankCall {
  Buf A, W, C, G, R, full, sA, sW, fullSA;
  void* regG = nullptr;
  void* handle = nullptr;
  void* g() const { return regG ? regG : G.p; }
};

std::string tuningFor(const char* plan) {
  if (!plan) return "";
  const std::string s(plan);
  if (s == "ce-ring") return "ag_gemm.plan=ce;ag_gemm.ce=ring";
  const size_t colon = s.find(':');
  std::string t = "ag_gemm.plan=" + s.substr(0, colon);
  if (colon != std::string::npos) t += ";ag_gemm.comm_ctas=" + s.substr(colon + 1);
  return t;
}

// One call of shape s on every rank: buffers, inputs, the reference and the checks.
struct Case {
  Shape s;
  Gathered g;
  mkcclDataType_t out;
  mkcclFp8ScaleKind_t kind;
  int ws;
  size_t M, N, K, kS;
  std::vector<RankCall> calls;
  std::vector<uint8_t> fullA;  // the gathered A of the last fill

  Case(InProcessRanks& w, const Shape& s_, Gathered g_, mkcclDataType_t out_, mkcclFp8ScaleKind_t kind_)
      : s(s_), g(g_), out(out_), kind(kind_), ws(w.size()), calls(w.size()) {
    M = s.m * ws;
    N = s.N;
    K = s.K;
    kS = (K + 127) / 128;
  }
  size_t nA() const { return isBlock(kind) ? s.m * kS : 1; }  // this rank's shard's scales
  size_t nW() const { return isBlock(kind) ? fp8BlockScalesW(N, K) : 1; }
  char* aOf(int r) const {
    const RankCall& c = calls[r];
    return g == Gathered::InPlace || g == Gathered::Registered ? static_cast<char*>(c.g()) + r * s.m * K
                                                                : static_cast<char*>(c.A.p);
  }

  // Buffers on every rank (C and gatheredA poisoned); registered gatheredA: collective.
  bool alloc(InProcessRanks& w) {
    if (g == Gathered::Registered) {
      std::vector<std::string> err(ws);
      w.onEveryRank([&](int r) {
        RankCall& c = calls[r];
        mkcclResult_t e = mkcclMemAlloc(&c.regG, M * K);
        if (e == mkcclSuccess) e = mkcclCommRegister(w.comms[r], c.regG, M * K, &c.handle);
        if (e != mkcclSuccess) err[r] = std::string("registering gatheredA: ") + mkcclGetLastError(w.comms[r]);
      });
      for (int r = 0; r < ws; ++r) EXPECT_EQ("", err[r]) << "rank " << r;
      for (int r = 0; r < ws; ++r)
        if (!err[r].empty()) return false;
    }
    for (int r = 0; r < ws; ++r) {
      RankCall& c = calls[r];
      cudaSetDevice(w.devs[r]);
      c.W.alloc(N * K);
      c.C.alloc(M * N * outBytes(out));
      c.R.alloc(M * N * 4);
      c.full.alloc(M * K);
      c.sA.alloc(nA() * 4);
      c.sW.alloc(nW() * 4);
      c.fullSA.alloc(isBlock(kind) ? M * kS * 4 : 4);
      bool ok = c.W.p && c.C.p && c.R.p && c.full.p && c.sA.p && c.sW.p && c.fullSA.p;
      if (g == Gathered::Separate || g == Gathered::InPlace) {
        c.G.alloc(M * K);
        ok = ok && c.G.p;
      }
      if (g != Gathered::InPlace && g != Gathered::Registered) {
        c.A.alloc(s.m * K);
        ok = ok && c.A.p;
      }
      EXPECT_TRUE(ok) << "allocations of rank " << r;
      if (!ok) return false;
      poison(c.C.p, M * N * outBytes(out));
      EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());  // the legacy stream orders no rank's stream
    }
    return true;
  }
  void release(InProcessRanks& w) {
    if (g != Gathered::Registered) return;
    w.onEveryRank([&](int r) {
      RankCall& c = calls[r];
      cudaStreamSynchronize(w.streams[r]);
      if (c.handle) EXPECT_EQ(mkcclSuccess, mkcclCommDeregister(w.comms[r], c.handle));
      if (c.regG) EXPECT_EQ(mkcclSuccess, mkcclMemFree(c.regG));
      c.handle = c.regG = nullptr;
    });
  }

  // One call's inputs, made on the host: the gathered A's rows and, with block scales, their scale
  // rows (shard q's own on rank q, all of them for the reference); W and its scales per rank.
  struct Inputs {
    std::vector<uint8_t> fullA;
    std::vector<float> fullSA;
    std::vector<std::vector<uint8_t>> Ws;
    std::vector<std::vector<float>> sWs;
  };
  Inputs make(std::mt19937_64& rng) const {
    Inputs in;
    for (int q = 0; q < ws; ++q) {
      const auto a = randomFp8(s.m * K, rng);
      in.fullA.insert(in.fullA.end(), a.begin(), a.end());
    }
    in.fullSA = isBlock(kind) ? randomFp8Scales(M * kS, rng, -4.f, blockMaxExp(out))
                              : std::vector<float>{randomScale(rng)};
    for (int r = 0; r < ws; ++r) {
      in.Ws.push_back(randomFp8(N * K, rng));
      in.sWs.push_back(isBlock(kind) ? randomFp8Scales(nW(), rng, -4.f, blockMaxExp(out))
                                     : std::vector<float>{randomScale(rng)});
    }
    return in;
  }

  // Rank r's inputs into its buffers (gatheredA and C poisoned first; in place, gatheredA's own
  // block holds the shard) and its reference into R, on `stream` (synchronised). False on a CUDA
  // error.
  bool load(InProcessRanks& w, int r, const Inputs& in, cudaStream_t stream) const {
    const RankCall& c = calls[r];
    cudaSetDevice(w.devs[r]);
    bool ok = true;
    auto copy = [&](void* dst, const void* src, size_t n) {
      ok = ok && cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream) == cudaSuccess;
    };
    if (c.g()) poison(c.g(), M * K, stream);
    poison(c.C.p, M * N * outBytes(out), stream);
    copy(aOf(r), in.fullA.data() + r * s.m * K, s.m * K);
    copy(c.W.p, in.Ws[r].data(), N * K);
    copy(c.full.p, in.fullA.data(), M * K);
    copy(c.sA.p, isBlock(kind) ? in.fullSA.data() + r * nA() : in.fullSA.data(), nA() * 4);
    copy(c.fullSA.p, in.fullSA.data(), in.fullSA.size() * 4);
    copy(c.sW.p, in.sWs[r].data(), nW() * 4);
    const float* dA = static_cast<const float*>(c.fullSA.p);
    const float* dW = static_cast<const float*>(c.sW.p);
    float* R = static_cast<float*>(c.R.p);
    if (isBlock(kind)) fp8BlockRef(c.full.p, c.W.p, dA, dW, R, int(M), int(N), int(K), stream);
    else fp8TensorRef(c.full.p, c.W.p, dA, dW, R, int(M), int(N), int(K), stream);
    return ok && cudaStreamSynchronize(stream) == cudaSuccess;
  }

  // New inputs on every rank; fullA: what gatheredA must hold after the call.
  void fill(InProcessRanks& w, std::mt19937_64& rng) {
    const Inputs in = make(rng);
    fullA = in.fullA;
    for (int r = 0; r < ws; ++r) EXPECT_TRUE(load(w, r, in, 0)) << "inputs of rank " << r;
  }

  mkcclResult_t call(InProcessRanks& w, int r, cudaStream_t stream) const {
    const RankCall& c = calls[r];
    const mkcclFp8Scales_t sc =
        MKCCL_FP8_SCALES_INIT(kind, static_cast<const float*>(c.sA.p), static_cast<const float*>(c.sW.p));
    return mkcclAllGatherGemmFp8(aOf(r), c.W.p, c.C.p, g == Gathered::None ? nullptr : c.g(), M, N, K, &sc, out,
                                 w.comms[r], stream);
  }

  void check(InProcessRanks& w) const {
    for (int r = 0; r < ws; ++r) {
      const RankCall& c = calls[r];
      SCOPED_TRACE(testing::Message() << "rank " << r);
      cudaSetDevice(w.devs[r]);
      const std::vector<double> got = toHostDouble(c.C.p, M * N, out), ref = toHostDouble(c.R.p, M * N, mkcclFloat32);
      const ErrStats e = compare(got, ref, 1e-2);
      EXPECT_EQ(0u, e.wrong) << "first wrong element " << e.firstWrong << " (row "
                             << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ")";
      EXPECT_LE(e.maxRelErr, 1e-2);
      // Each row against its own largest element: one rounding to outType (bf16 2^-9 of it) and
      // the tensor cores' sums inside each 128-block.
      size_t badRows = 0, firstBad = 0;
      for (size_t i = 0; i < M; ++i) {
        double norm = 1e-30;
        for (size_t j = 0; j < N; ++j) norm = std::max(norm, fabs(ref[i * N + j]));
        for (size_t j = 0; j < N; ++j)
          if (!(fabs(got[i * N + j] - ref[i * N + j]) <= 1e-2 * norm)) {
            if (badRows++ == 0) firstBad = i;
            break;
          }
      }
      EXPECT_EQ(0u, badRows) << "rows off their own magnitude, first: row " << firstBad << " (shard "
                             << firstBad / s.m << ")";
      if (g != Gathered::None) {
        std::vector<uint8_t> gotA(M * K);
        CUDA_OK(cudaMemcpy(gotA.data(), c.g(), M * K, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (size_t i = 0; i < M * K; ++i) bad += gotA[i] != fullA[i];
        EXPECT_EQ(0u, bad) << "bytes of gatheredA differ from the ranks' shards";
      }
    }
  }
};

// Runs one shape on every rank of `w` and checks C and gatheredA.
void runCase(InProcessRanks& w, const Shape& s, Gathered g, mkcclDataType_t out, std::mt19937_64& rng,
             mkcclFp8ScaleKind_t kind = mkcclFp8ScaleTensor) {
  Case c(w, s, g, out, kind);
  SCOPED_TRACE(testing::Message() << w.size() << " ranks, M=" << c.M << " N=" << c.N << " K=" << c.K << " gathered "
                                  << static_cast<int>(g) << " out " << static_cast<int>(out)
                                  << (isBlock(kind) ? " block scales" : " per-tensor scales"));
  if (c.alloc(w)) {
    c.fill(w, rng);
    const RankResults done = callOnEveryRank(w, [&](int r, cudaStream_t st) { return c.call(w, r, st); });
    bool ran = true;
    for (int r = 0; r < w.size(); ++r) {
      SCOPED_TRACE(testing::Message() << "rank " << r);
      EXPECT_EQ(mkcclSuccess, done.res[r]) << mkcclGetLastError(w.comms[r]);
      EXPECT_EQ(cudaSuccess, done.sync[r]);
      ran = ran && done.sync[r] == cudaSuccess;
      expectNoAsyncError(w.comms[r]);
    }
    if (ran) c.check(w);
  }
  c.release(w);
}

// Plans by tuningFor's names (nullptr: auto), for onEveryWorldAndTuning.
std::vector<NamedTuning> planTunings(std::initializer_list<const char*> plans) {
  std::vector<NamedTuning> t;
  for (const char* plan : plans) t.push_back({plan ? plan : "auto", tuningFor(plan)});
  return t;
}

TEST(AgGemmFp8, EveryPlanAgainstFp32) {
  onEveryWorldAndTuning(
      planTunings({nullptr, "fused", "fused:2", "fused:0", "ce", "sequential"}),
      [](InProcessRanks& w, std::mt19937_64& rng) {
        for (const Shape& s : kShapes)
          for (Gathered g : {Gathered::None, Gathered::Separate, Gathered::InPlace})
            runCase(w, s, g, s.N == 136 ? mkcclFloat32 : mkcclBfloat16, rng);
      });
}

// Block scales: every plan (ce along the ring too), every gatheredA mode, every output type.
TEST(AgGemmFp8Block, EveryPlanAgainstFp32) {
  onEveryWorldAndTuning(
      planTunings({nullptr, "fused", "fused:2", "fused:0", "ce", "ce-ring", "sequential"}),
      [](InProcessRanks& w, std::mt19937_64& rng) {
        for (const Shape& s : kBlockShapes)
          for (Gathered g : {Gathered::None, Gathered::Separate, Gathered::InPlace, Gathered::Registered}) {
            if (g == Gathered::Registered && w.size() == 1) continue;
            const mkcclDataType_t out = s.N == 136 ? mkcclFloat32 : s.N == 776 ? mkcclFloat16 : mkcclBfloat16;
            runCase(w, s, g, out, rng, mkcclFp8ScaleBlock);
          }
      });
}

// Block scales on every tile configuration: the fused kernel's (gemm.variant 256x1 / 192x1: 128 x
// 192; 256x2 / 192x2 with the 2-CTA cluster; 128x1, 128x2) and the sequential plan's plain GEMM's,
// with shards that straddle tiles (200 rows) and whole ones (256), 2 and 4 ranks.
TEST(AgGemmFp8Block, EveryTileConfiguration) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (const std::vector<int>& devs : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0, 0}}) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    for (const char* v : {"256x1", "256x2", "192x1", "128x1", "128x2"})
      for (const char* plan : {"fused", "fused:0", "sequential"}) {
        SCOPED_TRACE(testing::Message() << "gemm.variant=" << v << ", " << plan);
        ASSERT_NO_FATAL_FAILURE(setTuning(w, tuningFor(plan) + ";gemm.variant=" + v));
        runCase(w, Shape{200, 456, 400}, Gathered::Separate, mkcclBfloat16, rng, mkcclFp8ScaleBlock);
        runCase(w, Shape{256, 200, 128}, Gathered::None, mkcclFloat16, rng, mkcclFp8ScaleBlock);
      }
  }
}

// Back to back, shapes shrinking and plans cycling: the counters of a call land where the
// previous call's rows were. Mixed: per-tensor and block scales alternate on one communicator
// (the region's layout differs: a scale area after the counters).
void shapeSequence(bool mixed) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const std::vector<int> devs{0, 0};
  const SharedGpus shared(devs);
  InProcessRanks w(devs);
  ASSERT_TRUE(w.ok());
  const char* plans[] = {"fused", "sequential", "ce", nullptr};
  const Shape seq[] = {{512, 2048, 2048}, {384, 776, 1040}, {200, 136, 272}, {1, 8, 16}};
  for (int round = 0; round < (mixed ? 2 : 1); ++round)
    for (int i = 0; i < 4; ++i) {
      ASSERT_NO_FATAL_FAILURE(setTuning(w, tuningFor(plans[i])));
      const mkcclFp8ScaleKind_t kind = mixed && (i + round) % 2 == 0 ? mkcclFp8ScaleBlock : mkcclFp8ScaleTensor;
      runCase(w, seq[i], Gathered::Separate, mkcclBfloat16, rng, kind);
    }
}

TEST(AgGemmFp8, ShapeSequence) { shapeSequence(false); }
TEST(AgGemmFp8Block, ShapeSequenceMixedKinds) { shapeSequence(true); }

// Block scales captured in a CUDA graph on each plan, replayed with new inputs and new scales in
// the same buffers between eager calls (2 and 3 ranks): the scale rows' gather is kernel work and
// graph nodes only (copies under the ce plans), with nothing the host must redo per replay.
TEST(AgGemmFp8Block, CapturedAndReplayed) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr int kRounds = 2;
  for (const std::vector<int>& devs : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0}}) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    for (const char* plan : {"fused", "fused:0", "ce", "ce-ring", "sequential"}) {
      SCOPED_TRACE(testing::Message() << w.size() << " ranks, " << plan);
      ASSERT_NO_FATAL_FAILURE(setTuning(w, tuningFor(plan)));
      Case c(w, Shape{200, 392, 656}, Gathered::Separate, mkcclBfloat16, mkcclFp8ScaleBlock);
      ASSERT_TRUE(c.alloc(w));
      // Every round's inputs (rounds 0, then 2 r + pass), made here: a round's gathered A spans
      // every rank, and the rank threads only load their part.
      std::vector<Case::Inputs> in;
      for (int i = 0; i < 2 * kRounds + 2; ++i) in.push_back(c.make(rng));
      captureAndReplay(
          w, [&](int r, cudaStream_t s) { return c.call(w, r, s); },
          [&](int r, int round) { return c.load(w, r, in[round], w.streams[r]); },
          [&](int round, const std::string& what) {
            SCOPED_TRACE(what);
            c.fullA = in[round].fullA;
            c.check(w);
          },
          kRounds);
    }
  }
}

// Mistakes found only with a GPU, or on a communicator: host memory for a scale, block scales that
// run past their allocation, K that is not a 16-byte pitch, M not divisible by the ranks. The
// communicator stays usable.
TEST(AgGemmFp8, BadArguments) {
  MKCCL_REQUIRE_GPUS(1);
  FusedFp8BadArgs b;
  ASSERT_NO_FATAL_FAILURE(b.setUp());
  InProcessRanks& w = b.w;
  const char* op = "mkcclAllGatherGemmFp8";
  auto call = [&](const mkcclFp8Scales_t& sc, size_t M, size_t K) {
    return mkcclAllGatherGemmFp8(b.A.p, b.W.p, b.C.p, nullptr, M, 256, K, &sc, mkcclBfloat16, w.comms[0],
                                 w.streams[0]);
  };
  auto expectMsg = [&](const char* needle) { b.expectMsg(op, needle); };
  // Block scales of this rank's shard: [128][1] floats for M = 256 on 2 ranks, K = 64; of W: [2][1].
  b.hostAndShortScaleRefusals(op, 128 * 1, 2 * 1, [&](const mkcclFp8Scales_t& sc) { return call(sc, 256, 64); });
  const float* dev = b.dev();
  const mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, dev, dev + 1);
  EXPECT_EQ(mkcclInvalidArgument, call(sc, 256, 24));
  expectMsg("K=24");
  EXPECT_EQ(mkcclInvalidArgument, call(sc, 255, 64));
  expectMsg("divisible");
  // Still usable: a real call on both ranks.
  std::mt19937_64 rng(freshSeed());
  runCase(w, Shape{128, 128, 128}, Gathered::Separate, mkcclBfloat16, rng);
  runCase(w, Shape{128, 128, 128}, Gathered::Separate, mkcclBfloat16, rng, mkcclFp8ScaleBlock);
}

}  // namespace
