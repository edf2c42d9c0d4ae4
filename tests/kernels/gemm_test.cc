// mkcclGemm against cuBLAS: every configuration of the engine (the tuner's gemm.variant), the figure
// shapes, shapes with tails in M, N and K, tiny shapes, every input/output type pair, poisoned
// outputs, back-to-back launches, and argument errors through the public API.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <array>
#include <random>
#include <string>
#include <vector>
#include "mkccl.h"
#include "test_util.h"

namespace {

using mkccl::test::compare;
using mkccl::test::DeviceBuf;
using mkccl::test::ErrStats;

constexpr double kTol = 1e-2;  // relative to max |reference|, as the issue asks for bf16

size_t typeBytes(mkcclDataType_t t) { return t == mkcclFloat32 ? 4 : 2; }
const char* typeName(mkcclDataType_t t) {
  return t == mkcclFloat32 ? "fp32" : t == mkcclFloat16 ? "fp16" : "bf16";
}

// Forces the engine's configuration (the process's tuning, which mkcclGemm uses) for a scope.
class VariantScope {
 public:
  explicit VariantScope(const std::string& v) {
    EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, ("gemm.variant=" + v).c_str())) << mkcclGetLastError(nullptr);
  }
  ~VariantScope() { mkcclSetTuning(nullptr, nullptr); }
};

// Runs ours and cuBLAS on fresh random inputs and a poisoned output; checks the error.
void checkGemm(size_t M, size_t N, size_t K, mkcclDataType_t in, mkcclDataType_t out, const std::string& variant) {
  SCOPED_TRACE(variant + " " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " " +
               typeName(in) + "->" + typeName(out));
  VariantScope vs(variant);
  DeviceBuf A(M * K * typeBytes(in)), W(N * K * typeBytes(in)), C(M * N * typeBytes(out)), R(M * N * typeBytes(out));
  ASSERT_TRUE(A.p && W.p && C.p && R.p) << "cudaMalloc failed";
  const uint64_t seed = mkccl::test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  mkccl::test::fillRandom(A.p, M * K, in, seed);
  mkccl::test::fillRandom(W.p, N * K, in, seed + 1);
  mkccl::test::poison(C.p, C.bytes);
  mkccl::test::poison(R.p, R.bytes);
  ASSERT_EQ(mkcclSuccess, mkcclGemm(A.p, W.p, C.p, M, N, K, in, out, 0)) << mkcclGetLastError(nullptr);
  mkccl::test::cublasGemmRef(A.p, W.p, R.p, M, N, K, in, out, 0);
  CUDA_OK(cudaDeviceSynchronize());
  const ErrStats e = compare(mkccl::test::toHostDouble(C.p, M * N, out), mkccl::test::toHostDouble(R.p, M * N, out),
                             kTol);
  EXPECT_EQ(e.wrong, 0u) << "first wrong element " << e.firstWrong << " (row " << e.firstWrong / N << ", col "
                         << e.firstWrong % N << ")";
  EXPECT_LE(e.maxRelErr, kTol);
}

// checkGemm for every input / output type pair (N a multiple of 8 so that fp16/bf16 and fp32 rows
// are 16-byte multiples).
void checkEveryTypePair(size_t M, size_t N, size_t K, const std::string& variant) {
  for (mkcclDataType_t in : {mkcclBfloat16, mkcclFloat16})
    for (mkcclDataType_t out : {mkcclBfloat16, mkcclFloat16, mkcclFloat32}) checkGemm(M, N, K, in, out, variant);
}

const char* const kVariants[] = {"auto",  "simple", "256x2", "256x1", "128x1", "128x2", "192x1", "192x2", "skinny",
                                 "64x1",  "64x2",   "80x1",  "80x2",  "96x1",  "96x2",  "112x1", "112x2",
                                 "144x1", "144x2",  "160x1", "160x2", "176x1", "176x2", "208x1", "208x2",
                                 "224x1", "224x2",  "240x1", "240x2"};

class GemmVariants : public ::testing::TestWithParam<const char*> {};

// Tails in every dimension: M and N not multiples of 128 / 256, K not a multiple of 64, and an odd
// number of M-blocks (the padding CTA of a 2-cluster).
TEST_P(GemmVariants, TailShapes) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{129, 264, 136}, {383, 520, 1000}, {1000, 1032, 72},  {257, 8, 4104},
                              {640, 768, 64},  {1, 4096, 512},   {4097, 200, 328}, {300, 2056, 2048}};
  for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, GetParam());
}

TEST_P(GemmVariants, RandomShapes) {
  MKCCL_REQUIRE_GPUS(1);
  std::mt19937_64 rng(mkccl::test::freshSeed());
  for (int i = 0; i < 6; ++i) {
    const size_t M = 1 + rng() % 1500, N = 8 * (1 + rng() % 190), K = 8 * (1 + rng() % 260);
    checkGemm(M, N, K, mkcclBfloat16, mkcclBfloat16, GetParam());
  }
}

TEST_P(GemmVariants, TinyShapes) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{1, 8, 8}, {1, 8, 16}, {2, 16, 8}, {3, 24, 24}, {7, 8, 64}, {64, 64, 8}, {128, 128, 64},
                              {127, 136, 72}};
  for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, GetParam());
}

// Every input / output type pair; N a multiple of 8 so fp16/bf16 and fp32 rows are 16-byte multiples.
TEST_P(GemmVariants, TypeCombinations) {
  MKCCL_REQUIRE_GPUS(1);
  for (mkcclDataType_t in : {mkcclBfloat16, mkcclFloat16})
    for (mkcclDataType_t out : {mkcclBfloat16, mkcclFloat16, mkcclFloat32}) {
      checkGemm(333, 520, 392, in, out, GetParam());
      checkGemm(1, 8, 8, in, out, GetParam());
    }
}

INSTANTIATE_TEST_SUITE_P(Gemm, GemmVariants, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string s = i.param;
                           for (char& c : s)
                             if (c == 'x') c = '_';
                           return "v" + s;
                         });

// The shapes the engine's performance is judged on (issue 5), in the default and debug variants.
TEST(Gemm, FigureShapes) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{8192, 8192, 8192}, {8192, 2048, 8192}, {4096, 4096, 8192}, {16384, 8192, 2048}};
  for (const char* v : {"auto", "simple"})
    for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, v);
}

// 100 launches back to back, each into its own poisoned output, no synchronisation in between:
// every result must be bit-identical to the first, and the first right.
TEST(Gemm, BackToBackLaunches) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t M = 1000, N = 1032, K = 4104, kRuns = 100;
  DeviceBuf A(M * K * 2), W(N * K * 2), R(M * N * 2), C(kRuns * M * N * 2);
  ASSERT_TRUE(A.p && W.p && R.p && C.p);
  const uint64_t seed = mkccl::test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  mkccl::test::fillRandom(A.p, M * K, mkcclBfloat16, seed);
  mkccl::test::fillRandom(W.p, N * K, mkcclBfloat16, seed + 1);
  mkccl::test::poison(C.p, C.bytes);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  CUDA_OK(cudaDeviceSynchronize());
  for (size_t i = 0; i < kRuns; ++i) {
    char* out = static_cast<char*>(C.p) + i * M * N * 2;
    ASSERT_EQ(mkcclSuccess, mkcclGemm(A.p, W.p, out, M, N, K, mkcclBfloat16, mkcclBfloat16, s))
        << mkcclGetLastError(nullptr);
  }
  mkccl::test::cublasGemmRef(A.p, W.p, R.p, M, N, K, mkcclBfloat16, mkcclBfloat16, s);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaStreamDestroy(s));
  std::vector<uint16_t> first(M * N), other(M * N);
  CUDA_OK(cudaMemcpy(first.data(), C.p, M * N * 2, cudaMemcpyDeviceToHost));
  const ErrStats e = compare(mkccl::test::toHostDouble(C.p, M * N, mkcclBfloat16),
                             mkccl::test::toHostDouble(R.p, M * N, mkcclBfloat16), kTol);
  EXPECT_EQ(e.wrong, 0u);
  for (size_t i = 1; i < kRuns; ++i) {
    CUDA_OK(cudaMemcpy(other.data(), static_cast<char*>(C.p) + i * M * N * 2, M * N * 2, cudaMemcpyDeviceToHost));
    ASSERT_EQ(0, memcmp(first.data(), other.data(), M * N * 2)) << "launch " << i << " differs from launch 0";
  }
  // A later call reports no internal pipeline timeout of these launches.
  ASSERT_EQ(mkcclSuccess, mkcclGemm(A.p, W.p, C.p, 8, 8, 8, mkcclBfloat16, mkcclBfloat16, 0))
      << mkcclGetLastError(nullptr);
  CUDA_OK(cudaDeviceSynchronize());
}

// Mistakes a caller can make, through the public entry point.
TEST(Gemm, ArgumentErrors) {
  MKCCL_REQUIRE_GPUS(1);
  DeviceBuf A(64 * 64 * 2), W(64 * 64 * 2), C(64 * 64 * 4);
  ASSERT_TRUE(A.p && W.p && C.p);
  const mkcclDataType_t bf = mkcclBfloat16;
  // K = 12: rows of 24 bytes, not a multiple of 16.
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, W.p, C.p, 8, 8, 12, bf, bf, 0));
  // N = 4 with bf16 output: rows of C of 8 bytes.
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, W.p, C.p, 8, 4, 8, bf, bf, 0));
  // Null operands, empty shapes.
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(nullptr, W.p, C.p, 8, 8, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, nullptr, C.p, 8, 8, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, W.p, nullptr, 8, 8, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, W.p, C.p, 0, 8, 8, bf, bf, 0));
  // Host memory where device memory is required.
  std::vector<uint16_t> host(64 * 64);
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(host.data(), W.p, C.p, 8, 8, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, W.p, host.data(), 8, 8, 8, bf, bf, 0));
  // Types the engine does not take.
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, W.p, C.p, 8, 8, 8, mkcclFloat32, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(A.p, W.p, C.p, 8, 8, 8, bf, mkcclInt32, 0));
  // A misaligned operand (TMA needs 16-byte aligned bases).
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(static_cast<char*>(A.p) + 2, W.p, C.p, 8, 8, 8, bf, bf, 0));
  // Every error says why.
  EXPECT_STRNE("", mkcclGetLastError(nullptr));
  // A bad variant name is the caller's mistake too: refused where it is set, naming the key.
  EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, "gemm.variant=fastest"));
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("gemm.variant")) << mkcclGetLastError(nullptr);
  EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, "gemm.tile=256"));
  // Nothing above launched anything that failed.
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mkcclSuccess, mkcclGemm(A.p, W.p, C.p, 8, 8, 8, bf, bf, 0)) << mkcclGetLastError(nullptr);
  CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace

// The decode regime (issue 26): M = 1..256 against N, K of a few thousand, where the planner splits
// K (split_k_model.h); auto and forced part counts, tails in every dimension (N not a multiple of
// 128, K not a multiple of 64, parts of uneven length).
TEST(Gemm, DecodeShapes) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t Ms[] = {1, 2, 7, 16, 33, 64, 100, 128, 129, 200, 256};
  for (size_t M : Ms) {
    checkGemm(M, 2048, 2048, mkcclBfloat16, mkcclBfloat16, "auto");
    checkGemm(M, 4104, 4104, mkcclBfloat16, mkcclBfloat16, "auto");
  }
  checkGemm(16, 8192, 8192, mkcclBfloat16, mkcclBfloat16, "auto");
  checkGemm(128, 8192, 8192, mkcclBfloat16, mkcclBfloat16, "auto");
}

TEST(Gemm, SplitKForced) {
  MKCCL_REQUIRE_GPUS(1);
  // M of 1..65 around the 8-row fragment steps and the 64-row half tile: only the threads holding
  // rows below M write and read partials.
  // M <= 16 also takes the last part's spread sum (split_k.cuh: 4, 8, 16 or 32 columns; 3 rows
  // are 12 live threads, 5 are 20).
  const size_t shapes[][3] = {{1, 8, 8},       {37, 1000, 1000}, {130, 264, 4104}, {255, 2056, 2048},
                              {64, 4096, 520}, {9, 2056, 4104},  {63, 1032, 2048}, {65, 1032, 2048},
                              {2, 1032, 4104}, {3, 264, 2048},   {5, 1032, 4104},  {16, 520, 4104}};
  for (const char* v : {"auto;gemm.split_k=2", "auto;gemm.split_k=3", "128x1;gemm.split_k=5", "auto;gemm.split_k=16",
                        "64x1;gemm.split_k=2", "64x1;gemm.split_k=3"})
    for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, v);
  for (size_t M : {size_t(1), size_t(33)}) checkEveryTypePair(M, 1032, 1096, "auto;gemm.split_k=4");
  // Out of range is refused where it is set.
  EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, "gemm.split_k=17"));
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("gemm.split_k"));
}

// Split K / stream-K back to back (the kernel itself re-zeroes its tile counters, so every launch
// must find them zeroed) and the sum is deterministic (part order, whichever part is last): 50
// launches bit-identical. Then the same call captured in a CUDA graph (workspace made by the
// earlier call) and replayed on fresh inputs.
static void backToBackAndGraph(size_t M, size_t N, size_t K, const std::string& tuning) {
  SCOPED_TRACE(tuning + " " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
  VariantScope vs(tuning);
  const size_t kRuns = 50;
  DeviceBuf A(M * K * 2), W(N * K * 2), R(M * N * 2), C(kRuns * M * N * 2);
  ASSERT_TRUE(A.p && W.p && R.p && C.p);
  const uint64_t seed = mkccl::test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  mkccl::test::fillRandom(A.p, M * K, mkcclBfloat16, seed);
  mkccl::test::fillRandom(W.p, N * K, mkcclBfloat16, seed + 1);
  mkccl::test::poison(C.p, C.bytes);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  CUDA_OK(cudaDeviceSynchronize());
  for (size_t i = 0; i < kRuns; ++i) {
    char* out = static_cast<char*>(C.p) + i * M * N * 2;
    ASSERT_EQ(mkcclSuccess, mkcclGemm(A.p, W.p, out, M, N, K, mkcclBfloat16, mkcclBfloat16, s))
        << mkcclGetLastError(nullptr);
  }
  mkccl::test::cublasGemmRef(A.p, W.p, R.p, M, N, K, mkcclBfloat16, mkcclBfloat16, s);
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<uint16_t> first(M * N), other(M * N);
  CUDA_OK(cudaMemcpy(first.data(), C.p, M * N * 2, cudaMemcpyDeviceToHost));
  ErrStats e = compare(mkccl::test::toHostDouble(C.p, M * N, mkcclBfloat16),
                       mkccl::test::toHostDouble(R.p, M * N, mkcclBfloat16), kTol);
  EXPECT_EQ(e.wrong, 0u);
  for (size_t i = 1; i < kRuns; ++i) {
    CUDA_OK(cudaMemcpy(other.data(), static_cast<char*>(C.p) + i * M * N * 2, M * N * 2, cudaMemcpyDeviceToHost));
    ASSERT_EQ(0, memcmp(first.data(), other.data(), M * N * 2)) << "launch " << i << " differs from launch 0";
  }

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const mkcclResult_t r = mkcclGemm(A.p, W.p, C.p, M, N, K, mkcclBfloat16, mkcclBfloat16, s);
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  ASSERT_EQ(mkcclSuccess, r) << mkcclGetLastError(nullptr);
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 3; ++rep) {
    mkccl::test::fillRandom(A.p, M * K, mkcclBfloat16, seed + 2 + rep);
    mkccl::test::poison(C.p, M * N * 2);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGraphLaunch(exec, s));
    mkccl::test::cublasGemmRef(A.p, W.p, R.p, M, N, K, mkcclBfloat16, mkcclBfloat16, s);
    CUDA_OK(cudaStreamSynchronize(s));
    e = compare(mkccl::test::toHostDouble(C.p, M * N, mkcclBfloat16),
                mkccl::test::toHostDouble(R.p, M * N, mkcclBfloat16), kTol);
    EXPECT_EQ(e.wrong, 0u) << "replay " << rep;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(s));
  ASSERT_EQ(mkcclSuccess, mkcclGemm(A.p, W.p, C.p, 8, 8, 8, mkcclBfloat16, mkcclBfloat16, 0))
      << mkcclGetLastError(nullptr);
  CUDA_OK(cudaDeviceSynchronize());
}

TEST(Gemm, SplitKBackToBackAndGraph) {
  MKCCL_REQUIRE_GPUS(1);
  backToBackAndGraph(48, 4096, 4096, "auto");
  backToBackAndGraph(1, 4096, 4096, "auto;gemm.split_k=3");  // the spread sum (split_k.cuh)
}

// C = A . W^T in fp32 out against an fp64 reference computed on the host from the same bf16
// inputs (fresh random, C poisoned), under `tuning`: relative error within 1e-5.
static void checkHostFp32(size_t M, size_t N, size_t K, const std::string& tuning) {
  VariantScope vs(tuning);
  DeviceBuf A(M * K * 2), W(N * K * 2), C(M * N * 4);
  ASSERT_TRUE(A.p && W.p && C.p);
  const uint64_t seed = mkccl::test::freshSeed();
  SCOPED_TRACE(tuning + ": host reference, seed " + std::to_string(seed));
  mkccl::test::fillRandom(A.p, M * K, mkcclBfloat16, seed);
  mkccl::test::fillRandom(W.p, N * K, mkcclBfloat16, seed + 1);
  mkccl::test::poison(C.p, C.bytes);
  ASSERT_EQ(mkcclSuccess, mkcclGemm(A.p, W.p, C.p, M, N, K, mkcclBfloat16, mkcclFloat32, 0))
      << mkcclGetLastError(nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<double> a = mkccl::test::toHostDouble(A.p, M * K, mkcclBfloat16);
  const std::vector<double> w = mkccl::test::toHostDouble(W.p, N * K, mkcclBfloat16);
  std::vector<double> ref(M * N, 0.0);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double acc = 0;
      for (size_t k = 0; k < K; ++k) acc += a[i * K + k] * w[j * K + k];
      ref[i * N + j] = acc;
    }
  const ErrStats e = compare(mkccl::test::toHostDouble(C.p, M * N, mkcclFloat32), ref, 1e-5);
  EXPECT_EQ(e.wrong, 0u) << "first wrong element " << e.firstWrong;
  EXPECT_LE(e.maxRelErr, 1e-5);
}

// Stream-K (stream_k_model.h): the partly empty last wave cut into k-block ranges, one per CTA.
// Forced on both tiles and by the rule, tails in M, N and K, every type pair, against cuBLAS and
// (one shape) an fp32 reference on the host; back to back, deterministic, in a graph.
TEST(Gemm, StreamK) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{1000, 1032, 4096}, {300, 264, 4104}, {257, 1000, 520}, {129, 8, 4168},
                              {2000, 2056, 4104}, {640, 2048, 1024}, {17, 136, 8},  {4097, 4104, 4096}};
  for (const char* v : {"auto;gemm.stream_k=on", "256x1;gemm.stream_k=on", "128x1;gemm.stream_k=on", "auto"})
    for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, v);
  checkEveryTypePair(333, 520, 1000, "auto;gemm.stream_k=on");
  checkGemm(8000, 8184, 4104, mkcclBfloat16, mkcclBfloat16, "auto");

  // fp32 reference on the host: 300 x 264 x 1000 (3 x 2 tiles of 128 x 256, 16 k-blocks cut).
  checkHostFp32(300, 264, 1000, "256x1;gemm.stream_k=on");
  backToBackAndGraph(1000, 1032, 4096, "256x1;gemm.stream_k=on");
  backToBackAndGraph(640, 2048, 1024, "128x1;gemm.stream_k=on");
  EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, "gemm.stream_k=sometimes"));
}

// The split remainder (stream_k_model.h: gemm.stream_k=split forced, auto by the rule): whole waves
// of tiles, then the partial last wave's tiles in uniform parts of K. Each tile (128 x 256, 192,
// 128), tails in M, N and K, every type pair, against cuBLAS and (one shape per tile) an fp32
// reference on the host; back to back, deterministic, in a graph.
TEST(Gemm, SplitRemainder) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{2000, 2056, 4096}, {2000, 2056, 4104}, {1000, 1032, 4096}, {4097, 4104, 4096},
                              {333, 520, 1000},   {300, 264, 4104},   {257, 1000, 520},   {640, 2048, 1024}};
  for (const char* v : {"auto;gemm.stream_k=split", "256x1;gemm.stream_k=split", "192x1;gemm.stream_k=split",
                        "128x1;gemm.stream_k=split", "auto;gemm.stream_k=auto"})
    for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, v);
  checkEveryTypePair(333, 520, 1000, "192x1;gemm.stream_k=split");
  // fp32 references on the host: 300 x 600 x 1000 (3 x 3 tiles of 128 x 256 / 192, 3 x 5 of 128;
  // 16 k-blocks in up to 4 parts).
  for (const char* v : {"256x1;gemm.stream_k=split", "192x1;gemm.stream_k=split", "128x1;gemm.stream_k=split"})
    checkHostFp32(300, 600, 1000, v);
  backToBackAndGraph(2000, 2056, 4096, "192x1;gemm.stream_k=split");
  backToBackAndGraph(1000, 1032, 4096, "256x1;gemm.stream_k=split");
  backToBackAndGraph(333, 520, 1000, "128x1;gemm.stream_k=split");
}

// Clusters along N sharing the A tile (gemm.cluster_n, stream_k off so that whole tiles run): 1 x 2,
// 2 x 2, 1 x 4, 2 x 4 CTAs over several widths; N-blocks that do not fill the last cluster (its
// padding CTAs compute tiles past N), M-blocks that do not fill it along M, K off 64, M below 128
// (the cluster is not taken there), every type pair, an fp32 reference on the host, back to back
// and in a graph. A value outside 1, 2, 4 is refused where it is set.
TEST(Gemm, ClustersAlongN) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{1000, 1032, 4096}, {333, 520, 1000}, {2000, 2056, 4104}, {129, 264, 136},
                              {640, 768, 64},     {4097, 200, 328}, {300, 2056, 2048},  {100, 1032, 520}};
  for (const char* v : {"80x1;gemm.cluster_n=2;gemm.stream_k=off", "80x2;gemm.cluster_n=2;gemm.stream_k=off",
                        "128x2;gemm.cluster_n=4;gemm.stream_k=off", "256x1;gemm.cluster_n=2;gemm.stream_k=off",
                        "144x2;gemm.cluster_n=2;gemm.stream_k=off", "64x2;gemm.cluster_n=4;gemm.stream_k=off",
                        "192x1;gemm.cluster_n=4;gemm.stream_k=off", "auto;gemm.cluster_n=2"})
    for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, v);
  checkEveryTypePair(333, 520, 1000, "96x2;gemm.cluster_n=2;gemm.stream_k=off");
  checkHostFp32(300, 600, 1000, "80x2;gemm.cluster_n=2;gemm.stream_k=off");
  backToBackAndGraph(1000, 1032, 4096, "80x2;gemm.cluster_n=2;gemm.stream_k=off");
  EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, "gemm.cluster_n=3"));
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("gemm.cluster_n"));
}

// The skinny kernel (gemm.variant=skinny; kernels/gemm/skinny.cuh) at every token-group count (M of
// 1-32 around the groups of 8), N off the 16-row CTAs, K off the 64-wide chunks and shorter than one
// chunk per warp, every type pair, against cuBLAS and an fp32 reference on the host; back to back
// (deterministic) and in a graph. Above 32 rows the forced variant runs auto's plan.
TEST(Gemm, Skinny) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{1, 8, 8},      {1, 4096, 4096}, {2, 24, 72},      {7, 1000, 520},   {8, 4104, 4104},
                              {9, 136, 1000}, {16, 8192, 512}, {17, 2056, 4096}, {31, 520, 8200}, {32, 1032, 64},
                              {5, 40, 28672}, {33, 264, 136},  {200, 520, 1000}};
  for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, "skinny");
  for (size_t M : {size_t(1), size_t(12), size_t(29)}) checkEveryTypePair(M, 264, 1096, "skinny");
  checkHostFp32(3, 600, 1000, "skinny");
  checkHostFp32(30, 72, 4104, "skinny");
  backToBackAndGraph(4, 4096, 4096, "skinny");
  backToBackAndGraph(32, 1032, 2048, "skinny");
}

// K not a multiple of 64 (a row pitch off 128 bytes): A and W are packed to a 128-byte pitch
// (gemm_pack.h; gemm.pack_k=on packs whatever the size); every configuration, and the unpacked
// path forced, on such shapes.
TEST(Gemm, OddKPacked) {
  MKCCL_REQUIRE_GPUS(1);
  // K = 8 and 24: rows of one and three 16-byte chunks (fewer than a warp's lanes); K = 4168:
  // 521 chunks, past four passes of a warp's unrolled copy (pack_rows.cuh).
  const size_t shapes[][3] = {{256, 256, 72},    {300, 520, 1000}, {1000, 1032, 4104}, {4097, 264, 328},
                              {2000, 2056, 4104}, {3, 40, 24},      {129, 8, 4168},     {17, 136, 8}};
  for (const char* v : {"auto;gemm.pack_k=on", "auto;gemm.pack_k=off", "256x2;gemm.pack_k=on", "128x1;gemm.pack_k=on",
                        "simple", "auto"})
    for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], mkcclBfloat16, mkcclBfloat16, v);
  checkGemm(333, 520, 392, mkcclFloat16, mkcclFloat32, "auto;gemm.pack_k=on");
  checkGemm(4097, 4104, 4104, mkcclBfloat16, mkcclBfloat16, "auto");  // packed by the rule
}

// Programmatic dependent launch (gemm.pdl=on): a call may start while the kernel before
// it in the stream finishes, so it must wait for it before any access to its memory. A chain in
// which each call reads the previous call's output (read after write) and a W that the kernel just
// before it rewrote, then a call that writes the buffer the call before it read (write after read);
// eagerly, with PDL off for comparison, and replayed from a graph. Every step is checked against
// cuBLAS on the step's own inputs.
static void pdlChain(size_t M, size_t K, const std::string& tuning) {
  SCOPED_TRACE(tuning + " " + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(K));
  VariantScope vs(tuning);
  constexpr int kSteps = 4;
  constexpr float kWScale = 1.0f / 16;  // keeps the chain's values in range
  std::vector<DeviceBuf> X(kSteps + 2);
  for (DeviceBuf& x : X) x.alloc(M * K * 2);
  DeviceBuf W(K * K * 2), Wv(K * K * 2), R(M * K * 2);
  for (const DeviceBuf& x : X) ASSERT_TRUE(x.p);
  ASSERT_TRUE(W.p && Wv.p && R.p);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const uint64_t seed = mkccl::test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto enqueue = [&](uint64_t sd) {
    for (int i = 0; i < kSteps; ++i) {
      mkccl::test::fillRandom(W.p, K * K, mkcclBfloat16, sd + 1 + i, kWScale, s);
      EXPECT_EQ(mkcclSuccess, mkcclGemm(X[i].p, W.p, X[i + 1].p, M, K, K, mkcclBfloat16, mkcclBfloat16, s))
          << mkcclGetLastError(nullptr);
    }
    // Write after read: the spare buffer takes X[0] . W^T, then X[0] is overwritten by the next call.
    EXPECT_EQ(mkcclSuccess, mkcclGemm(X[0].p, W.p, X[kSteps + 1].p, M, K, K, mkcclBfloat16, mkcclBfloat16, s));
    EXPECT_EQ(mkcclSuccess, mkcclGemm(X[kSteps + 1].p, W.p, X[0].p, M, K, K, mkcclBfloat16, mkcclBfloat16, s));
  };
  auto check = [&](uint64_t sd, const DeviceBuf& x0, const std::string& what) {
    SCOPED_TRACE(what);
    for (int i = 0; i <= kSteps + 1; ++i) {
      const void* in = i == 0 ? x0.p : i < kSteps ? X[i].p : i == kSteps ? x0.p : X[kSteps + 1].p;
      const void* out = i < kSteps ? X[i + 1].p : i == kSteps ? X[kSteps + 1].p : X[0].p;
      mkccl::test::fillRandom(Wv.p, K * K, mkcclBfloat16, sd + 1 + (i < kSteps ? i : kSteps - 1), kWScale, s);
      mkccl::test::cublasGemmRef(in, Wv.p, R.p, M, K, K, mkcclBfloat16, mkcclBfloat16, s);
      CUDA_OK(cudaStreamSynchronize(s));
      const ErrStats e = compare(mkccl::test::toHostDouble(out, M * K, mkcclBfloat16),
                                 mkccl::test::toHostDouble(R.p, M * K, mkcclBfloat16), kTol);
      EXPECT_EQ(e.wrong, 0u) << "step " << i;
    }
  };
  DeviceBuf x0(M * K * 2);  // X[0]'s first contents, for the check
  ASSERT_TRUE(x0.p);
  for (int rep = 0; rep < 2; ++rep) {
    mkccl::test::fillRandom(X[0].p, M * K, mkcclBfloat16, seed + 100 * rep, 1.0f, s);
    CUDA_OK(cudaMemcpyAsync(x0.p, X[0].p, M * K * 2, cudaMemcpyDeviceToDevice, s));
    for (size_t i = 1; i < X.size(); ++i) mkccl::test::poison(X[i].p, X[i].bytes, s);
    CUDA_OK(cudaStreamSynchronize(s));
    enqueue(seed + 100 * rep);
    check(seed + 100 * rep, x0, "eager " + std::to_string(rep));
  }
  // The same chain from a graph (programmatic edges between its kernels), replayed twice.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  const uint64_t gseed = seed + 1000;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue(gseed);
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 2; ++rep) {
    mkccl::test::fillRandom(X[0].p, M * K, mkcclBfloat16, gseed + 7 + rep, 1.0f, s);
    CUDA_OK(cudaMemcpyAsync(x0.p, X[0].p, M * K * 2, cudaMemcpyDeviceToDevice, s));
    for (size_t i = 1; i < X.size(); ++i) mkccl::test::poison(X[i].p, X[i].bytes, s);
    CUDA_OK(cudaGraphLaunch(exec, s));
    check(gseed, x0, "graph replay " + std::to_string(rep));
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(Gemm, PdlDependentChain) {
  MKCCL_REQUIRE_GPUS(1);
  for (const char* t : {"auto;gemm.pdl=on", "auto;gemm.pdl=off"}) {
    pdlChain(1, 4096, t);     // split K: the workspace of one call is the next call's
    pdlChain(64, 4096, t);
    pdlChain(2048, 4096, t);  // 128 x 256 tiles, clusters of 2
    pdlChain(2048, 1032, t);  // K = 1032: packed operands (the pack kernel between the calls)
  }
  pdlChain(200, 1032, "simple");
  pdlChain(3000, 2048, "128x2");
}

// A capture on a stream that has never run a split-K or packed GEMM: no workspace may be made
// inside the capture, so the call runs unsplit / unpacked, and is still right when replayed.
TEST(Gemm, CaptureOnFreshStream) {
  MKCCL_REQUIRE_GPUS(1);
  for (const auto& s : {std::array<size_t, 3>{32, 4096, 4096}, std::array<size_t, 3>{512, 520, 1000}}) {
    const size_t M = s[0], N = s[1], K = s[2];
    DeviceBuf A(M * K * 2), W(N * K * 2), R(M * N * 2), C(M * N * 2);
    ASSERT_TRUE(A.p && W.p && R.p && C.p);
    const uint64_t seed = mkccl::test::freshSeed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " M " + std::to_string(M));
    mkccl::test::fillRandom(A.p, M * K, mkcclBfloat16, seed);
    mkccl::test::fillRandom(W.p, N * K, mkcclBfloat16, seed + 1);
    mkccl::test::poison(C.p, C.bytes);
    CUDA_OK(cudaDeviceSynchronize());
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const mkcclResult_t r = mkcclGemm(A.p, W.p, C.p, M, N, K, mkcclBfloat16, mkcclBfloat16, st);
    CUDA_OK(cudaStreamEndCapture(st, &graph));
    ASSERT_EQ(mkcclSuccess, r) << mkcclGetLastError(nullptr);
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, st));
    mkccl::test::cublasGemmRef(A.p, W.p, R.p, M, N, K, mkcclBfloat16, mkcclBfloat16, st);
    CUDA_OK(cudaStreamSynchronize(st));
    const ErrStats e = compare(mkccl::test::toHostDouble(C.p, M * N, mkcclBfloat16),
                               mkccl::test::toHostDouble(R.p, M * N, mkcclBfloat16), kTol);
    EXPECT_EQ(e.wrong, 0u);
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(st));
  }
}
