// mkcclGemmFp8 against an fp32 reference computed on the GPU from the dequantised inputs (every
// e4m3 element times its scale, products summed in fp32): random e4m3 inputs, random scales that
// are not 1 (per tensor, and per DeepSeek-V3 block spread over 2^-4..2^4), C poisoned first; odd M,
// N and K (tails in every dimension, K not a multiple of 128), tiny shapes, every tile
// configuration (block scales: 128 x 192 and 128 x 128 tiles), bf16 / fp16 / fp32 outputs.
// Argument errors are in gemm_fp8_args_test (CPU).
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <random>
#include <string>
#include <vector>
#include "test_util.h"

namespace {

using namespace mkccl::test;

using Buf = DeviceBuf;

size_t outBytes(mkcclDataType_t t) { return t == mkcclFloat32 ? 4 : 2; }

// R[m, n] = sum_k (A[m, k] sA(m, k)) (W[n, k] sW(n, k)), fp32, one thread per element.
__global__ void refKernel(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* W, const float* sA, const float* sW,
                          bool block, float* R, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N || m >= M) return;
  const int kb = (K + 127) / 128;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) {
    const float a = static_cast<float>(A[size_t(m) * K + k]) * (block ? sA[size_t(m) * kb + k / 128] : sA[0]);
    const float w = static_cast<float>(W[size_t(n) * K + k]) * (block ? sW[size_t(n / 128) * kb + k / 128] : sW[0]);
    acc = fmaf(a, w, acc);
  }
  R[size_t(m) * N + n] = acc;
}

std::vector<__nv_fp8_e4m3> randomFp8(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<__nv_fp8_e4m3> v(n);
  for (auto& x : v) x = __nv_fp8_e4m3(u(rng));
  return v;
}
// Scales 2^-4..2^maxExp, never 1 in practice. With fp16 output the sums must stay inside its range
// (65504): at K = 4096 and scales up to 2^4 on both sides a sum can pass it, and the kernel then
// rightly stores inf where the fp32 reference holds a finite value.
std::vector<float> randomScales(size_t n, std::mt19937_64& rng, float maxExp) {
  std::uniform_real_distribution<float> e(-4.f, maxExp);
  std::vector<float> v(n);
  for (auto& x : v) x = exp2f(e(rng));
  return v;
}

struct VariantScope {
  explicit VariantScope(const std::string& v) {
    EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, ("gemm.variant=" + v).c_str())) << mkcclGetLastError(nullptr);
  }
  ~VariantScope() { mkcclSetTuning(nullptr, nullptr); }
};

// One call checked against the reference; tol bounds max |C - R| / max |R|.
void checkFp8(size_t M, size_t N, size_t K, mkcclFp8ScaleKind_t kind, mkcclDataType_t out, std::mt19937_64& rng,
              double tol) {
  SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K << (kind == mkcclFp8ScaleBlock ? " block" : " tensor")
                                  << " out " << static_cast<int>(out));
  const size_t kb = (K + 127) / 128;
  const size_t nA = kind == mkcclFp8ScaleBlock ? M * kb : 1, nW = kind == mkcclFp8ScaleBlock ? (N + 127) / 128 * kb : 1;
  Buf A(M * K), W(N * K), C(M * N * outBytes(out)), R(M * N * 4), sA(nA * 4), sW(nW * 4);
  ASSERT_TRUE(A.p && W.p && C.p && R.p && sA.p && sW.p);
  const auto a = randomFp8(M * K, rng), w = randomFp8(N * K, rng);
  const float maxExp = out == mkcclFloat16 ? 1.f : 4.f;
  const auto sa = randomScales(nA, rng, maxExp), sw = randomScales(nW, rng, maxExp);
  CUDA_OK(cudaMemcpy(A.p, a.data(), M * K, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(W.p, w.data(), N * K, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(sA.p, sa.data(), nA * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(sW.p, sw.data(), nW * 4, cudaMemcpyHostToDevice));
  poison(C.p, M * N * outBytes(out));
  const mkcclFp8Scales_t scales =
      MKCCL_FP8_SCALES_INIT(kind, static_cast<const float*>(sA.p), static_cast<const float*>(sW.p));
  ASSERT_EQ(mkcclSuccess, mkcclGemmFp8(A.p, W.p, C.p, M, N, K, &scales, out, 0)) << mkcclGetLastError(nullptr);
  refKernel<<<dim3(unsigned((N + 127) / 128), unsigned(M)), 128>>>(
      static_cast<const __nv_fp8_e4m3*>(A.p), static_cast<const __nv_fp8_e4m3*>(W.p), static_cast<const float*>(sA.p),
      static_cast<const float*>(sW.p), kind == mkcclFp8ScaleBlock, static_cast<float*>(R.p), int(M), int(N), int(K));
  CUDA_OK(cudaDeviceSynchronize());
  const ErrStats e = compare(toHostDouble(C.p, M * N, out), toHostDouble(R.p, M * N, mkcclFloat32), tol);
  EXPECT_EQ(0u, e.wrong) << "first wrong element " << e.firstWrong << " (row "
                         << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ", col "
                         << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong % N) << ")";
  EXPECT_LE(e.maxRelErr, tol);
}

TEST(GemmFp8, TensorScalesAgainstFp32) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  struct Case {
    size_t M, N, K;
    mkcclDataType_t out;
  };
  for (const Case& c : {Case{256, 512, 1024, mkcclBfloat16}, Case{1000, 776, 1040, mkcclBfloat16},
                        Case{1, 8, 16, mkcclBfloat16}, Case{129, 264, 4096, mkcclFloat16},
                        Case{300, 132, 272, mkcclFloat32}, Case{2048, 2048, 2048, mkcclBfloat16}})
    checkFp8(c.M, c.N, c.K, mkcclFp8ScaleTensor, c.out, rng, 1e-2);
}

TEST(GemmFp8, BlockScalesAgainstFp32) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  struct Case {
    size_t M, N, K;
    mkcclDataType_t out;
  };
  for (const Case& c : {Case{256, 512, 1024, mkcclBfloat16}, Case{1000, 776, 1040, mkcclBfloat16},
                        Case{1, 8, 16, mkcclBfloat16}, Case{129, 264, 4096, mkcclFloat16},
                        Case{300, 136, 272, mkcclFloat32}, Case{2048, 2048, 2048, mkcclBfloat16}})
    checkFp8(c.M, c.N, c.K, mkcclFp8ScaleBlock, c.out, rng, 1e-2);
}

// Block scales on every tile configuration, every output type: 128 x 192 tiles (256x2 / 256x1)
// straddle two W scale blocks, starting on a block boundary or 64 columns into one; a last tile
// of 8 columns (N = 200); one k-block and a partial one (K = 128, 400); odd and even k-block
// counts (the two partial sets alternate); M of one row and of a tile and a row.
TEST(GemmFp8, BlockScalesEveryTile) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  struct Case {
    size_t M, N, K;
    mkcclDataType_t out;
  };
  for (const char* v : {"auto", "256x2", "256x1", "128x2", "128x1"}) {
    SCOPED_TRACE(v);
    VariantScope scope(v);
    for (const Case& c : {Case{1000, 776, 1040, mkcclBfloat16}, Case{129, 264, 4096, mkcclFloat16},
                          Case{300, 200, 272, mkcclFloat32}, Case{257, 392, 128, mkcclBfloat16},
                          Case{1, 584, 400, mkcclFloat32}, Case{640, 1160, 1536, mkcclFloat16}})
      checkFp8(c.M, c.N, c.K, mkcclFp8ScaleBlock, c.out, rng, 1e-2);
  }
}

// Every tile configuration the planner may pick.
TEST(GemmFp8, EveryVariant) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (const char* v : {"256x1", "256x2", "128x1", "128x2", "simple"}) {
    SCOPED_TRACE(v);
    VariantScope scope(v);
    checkFp8(520, 392, 784, mkcclFp8ScaleTensor, mkcclBfloat16, rng, 1e-2);
    checkFp8(520, 392, 784, mkcclFp8ScaleBlock, mkcclBfloat16, rng, 1e-2);
  }
}

// Errors that need a GPU to detect: host memory where device memory is required.
TEST(GemmFp8, HostPointersRefused) {
  MKCCL_REQUIRE_GPUS(1);
  Buf A(256 * 64), W(256 * 64), C(256 * 256 * 2), s(4);
  ASSERT_TRUE(A.p && W.p && C.p && s.p);
  alignas(16) static float hostScale[4] = {1, 1, 1, 1};
  mkcclFp8Scales_t scales = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, hostScale, static_cast<const float*>(s.p));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemmFp8(A.p, W.p, C.p, 256, 256, 64, &scales, mkcclBfloat16, 0));
  EXPECT_NE(std::string(mkcclGetLastError(nullptr)).find("scaleA"), std::string::npos) << mkcclGetLastError(nullptr);
  // The block kind needs M x ceil(K / 128) scales of A: one float is too small an allocation.
  scales = MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleBlock, static_cast<const float*>(s.p), static_cast<const float*>(s.p));
  EXPECT_NE(mkcclSuccess, mkcclGemmFp8(A.p, W.p, C.p, 256, 256, 64, &scales, mkcclBfloat16, 0));
  // Still usable afterwards.
  std::mt19937_64 rng(freshSeed());
  checkFp8(128, 128, 128, mkcclFp8ScaleTensor, mkcclBfloat16, rng, 1e-2);
}

}  // namespace
