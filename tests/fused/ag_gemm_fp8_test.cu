// mkcclAllGatherGemmFp8 against an fp32 reference computed on the GPU from the dequantised inputs
// (the gathered e4m3 A times sA, W times sW, products summed in fp32), with ranks in one process
// (a thread per rank; 1 rank, and 2, 3 and 4 ranks sharing the GPUs: rank_threads.h). Random e4m3
// inputs, scales that are not 1 (sA the same on every rank, as the API requires; sW per rank),
// C and gatheredA poisoned; shards that are not a multiple of 128 rows, N and K tails, tiny
// shapes; every plan forced and auto; gatheredA absent, separate and in place (returned checked
// byte for byte); bf16 and fp32 outputs; argument errors that need a GPU (host scales, block
// scales, a K that is not a TMA pitch). The checks that need no GPU: ag_fp8_args_test (CPU).
#include <cuda_runtime.h>
#include <math.h>
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

float randomScale(std::mt19937_64& rng) { return randomFp8Scale(rng, -4.f, 3.f); }

struct Shape {
  size_t m, N, K;  // rows per shard
};
// Shards of 200 rows (tiles straddle shards), N and K tails (136, 272: K not a multiple of 128),
// tiny (one row per shard, 8 columns, one 16-byte k step), several waves of 128 x 256 tiles.
const Shape kShapes[] = {{200, 136, 272}, {1, 8, 16}, {384, 776, 1040}, {512, 2048, 2048}};

enum class Gathered { None, Separate, InPlace };

using Buf = DeviceBuf;

// One rank's buffers of one call.
struct RankCall {
  Buf A, W, C, G, R, full, sA, sW;
  size_t shardOff = 0;
};

std::string tuningFor(const char* plan) {
  if (!plan) return "";
  const std::string s(plan);
  const size_t colon = s.find(':');
  std::string t = "ag_gemm.plan=" + s.substr(0, colon);
  if (colon != std::string::npos) t += ";ag_gemm.comm_ctas=" + s.substr(colon + 1);
  return t;
}

// Runs one shape on every rank of `w` and checks C and gatheredA.
void runCase(InProcessRanks& w, const Shape& s, Gathered g, mkcclDataType_t out, std::mt19937_64& rng) {
  const int ws = w.size();
  const size_t M = s.m * ws, N = s.N, K = s.K, oes = out == mkcclFloat32 ? 4 : 2;
  SCOPED_TRACE(testing::Message() << ws << " ranks, M=" << M << " N=" << N << " K=" << K << " gathered "
                                  << static_cast<int>(g) << " out " << static_cast<int>(out));
  std::vector<uint8_t> fullA;
  for (int q = 0; q < ws; ++q) {
    const auto a = randomFp8(s.m * K, rng);
    fullA.insert(fullA.end(), a.begin(), a.end());
  }
  const float sA = randomScale(rng);
  std::vector<RankCall> calls(ws);
  std::vector<std::vector<uint8_t>> Ws(ws);
  std::vector<float> sWs(ws);
  for (int r = 0; r < ws; ++r) {
    RankCall& c = calls[r];
    cudaSetDevice(w.devs[r]);
    Ws[r] = randomFp8(N * K, rng);
    sWs[r] = randomScale(rng);
    c.W.alloc(N * K);
    c.C.alloc(M * N * oes);
    c.R.alloc(M * N * 4);
    c.full.alloc(M * K);
    c.sA.alloc(4);
    c.sW.alloc(4);
    ASSERT_TRUE(c.W.p && c.C.p && c.R.p && c.full.p && c.sA.p && c.sW.p);
    if (g != Gathered::None) {
      c.G.alloc(M * K);
      ASSERT_TRUE(c.G.p);
      poison(c.G.p, M * K);
    }
    if (g != Gathered::InPlace) {
      c.A.alloc(s.m * K);
      ASSERT_TRUE(c.A.p);
    }
    char* Ap = g == Gathered::InPlace ? static_cast<char*>(c.G.p) + r * s.m * K : static_cast<char*>(c.A.p);
    CUDA_OK(cudaMemcpy(Ap, fullA.data() + r * s.m * K, s.m * K, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c.W.p, Ws[r].data(), N * K, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c.full.p, fullA.data(), M * K, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c.sA.p, &sA, 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(c.sW.p, &sWs[r], 4, cudaMemcpyHostToDevice));
    poison(c.C.p, M * N * oes);
    fp8TensorRef(c.full.p, c.W.p, static_cast<const float*>(c.sA.p), static_cast<const float*>(c.sW.p),
                 static_cast<float*>(c.R.p), int(M), int(N), int(K));
    CUDA_OK(cudaDeviceSynchronize());
  }
  std::vector<mkcclResult_t> res(ws, mkcclInternalError);
  std::vector<cudaError_t> sync(ws, cudaErrorUnknown);
  w.onEveryRank([&](int r) {
    RankCall& c = calls[r];
    const void* Ap = g == Gathered::InPlace ? static_cast<char*>(c.G.p) + r * s.m * K : c.A.p;
    const mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, static_cast<const float*>(c.sA.p),
                                                      static_cast<const float*>(c.sW.p));
    res[r] = mkcclAllGatherGemmFp8(Ap, c.W.p, c.C.p, c.G.p, M, N, K, &sc, out, w.comms[r], w.streams[r]);
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
    const ErrStats e = compare(toHostDouble(c.C.p, M * N, out), toHostDouble(c.R.p, M * N, mkcclFloat32), 1e-2);
    EXPECT_EQ(0u, e.wrong) << "first wrong element " << e.firstWrong << " (row "
                           << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ")";
    EXPECT_LE(e.maxRelErr, 1e-2);
    if (g != Gathered::None) {
      std::vector<uint8_t> got(M * K);
      CUDA_OK(cudaMemcpy(got.data(), c.G.p, M * K, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t i = 0; i < M * K; ++i) bad += got[i] != fullA[i];
      EXPECT_EQ(0u, bad) << "bytes of gatheredA differ from the ranks' shards";
    }
  }
}

std::vector<std::vector<int>> worlds() {
  std::vector<std::vector<int>> v{{0}};
  for (const auto& d : sharedGpuWorlds()) v.push_back(d);
  return v;
}

TEST(AgGemmFp8, EveryPlanAgainstFp32) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const char* plans[] = {nullptr, "fused", "fused:2", "fused:0", "ce", "sequential"};
  for (const std::vector<int>& devs : worlds()) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    for (const char* plan : plans) {
      if (w.size() == 1 && plan != nullptr) continue;  // one rank: mkcclGemmFp8, no plan
      SCOPED_TRACE(plan ? plan : "auto");
      for (int r = 0; r < w.size(); ++r)
        ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuningFor(plan).c_str())) << mkcclGetLastError(nullptr);
      for (const Shape& s : kShapes)
        for (Gathered g : {Gathered::None, Gathered::Separate, Gathered::InPlace})
          runCase(w, s, g, s.N == 136 ? mkcclFloat32 : mkcclBfloat16, rng);
    }
  }
}

// Back to back, shapes shrinking and plans cycling: the counters of a call land where the
// previous call's rows were.
TEST(AgGemmFp8, ShapeSequence) {
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
  for (int i = 0; i < 4; ++i) {
    for (int r = 0; r < w.size(); ++r)
      ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuningFor(plans[i]).c_str()));
    runCase(w, seq[i], Gathered::Separate, mkcclBfloat16, rng);
  }
}

// Mistakes found only with a GPU, or on a communicator: host memory for a scale, block scales
// (not built), K that is not a 16-byte pitch, M not divisible by the ranks. The communicator
// stays usable.
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
  b.hostAndBlockScaleRefusals(op, [&](const mkcclFp8Scales_t& sc) { return call(sc, 256, 64); });
  const float* dev = b.dev();
  const mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, dev, dev + 1);
  EXPECT_EQ(mkcclInvalidArgument, call(sc, 256, 24));
  expectMsg("K=24");
  EXPECT_EQ(mkcclInvalidArgument, call(sc, 255, 64));
  expectMsg("divisible");
  // Still usable: a real call on both ranks.
  std::mt19937_64 rng(freshSeed());
  runCase(w, Shape{128, 128, 128}, Gathered::Separate, mkcclBfloat16, rng);
}

}  // namespace
