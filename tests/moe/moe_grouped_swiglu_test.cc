// mkcclGroupedGemmSwiglu (grouped GEMM with the SwiGLU epilogue) against an fp32 reference on the
// host: random group sizes (empty groups, one row, sizes that are not tile multiples), I and K not
// multiples of 128, bf16 and fp16; C poisoned first, rows past the last group left alone; argument
// errors. W1 in both layouts (mkcclGroupedGemmSwigluEx): the reference reads each gate / up row
// where the layout puts it (blocked interleave, or gate rows then up rows), so a kernel that reads
// either layout wrongly fails the comparison.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <random>
#include <string>
#include <vector>
#include "test_util.h"

namespace {

using namespace mkccl::test;

struct Buf {
  void* p = nullptr;
  explicit Buf(size_t n) {
    if (cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
  }
  ~Buf() { cudaFree(p); }
};

size_t roundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

// Rows of one group's W1 in the layout.
size_t groupRows(size_t I, mkcclSwigluLayout_t l) { return l == mkcclSwigluGateUp ? 2 * I : 2 * roundUp(I, 128); }

// Row r of group g's gate (u = 0) or up (u = 1) matrix in W1 [G * groupRows, K]: blocked
// interleave (gate block b, then up block b) or gate rows then up rows.
size_t w1Row(int g, size_t I, size_t r, int u, mkcclSwigluLayout_t l) {
  if (l == mkcclSwigluGateUp) return size_t(g) * 2 * I + size_t(u) * I + r;
  return size_t(g) * 2 * roundUp(I, 128) + (r / 128) * 256 + size_t(u) * 128 + r % 128;
}

void checkSwiglu(const std::vector<int>& sizes, size_t I, size_t K, mkcclDataType_t t, uint64_t seed,
                 mkcclSwigluLayout_t layout = mkcclSwigluBlocked) {
  const int G = static_cast<int>(sizes.size());
  const size_t Np = groupRows(I, layout);
  std::vector<int> offsets(G + 1, 0);
  for (int g = 0; g < G; ++g) offsets[g + 1] = offsets[g] + int(roundUp(size_t(sizes[g]), 128));
  const size_t maxRows = size_t(std::max(128, offsets[G])) + 128;
  Buf A(maxRows * K * 2), W(size_t(G) * Np * K * 2), C(maxRows * I * 2), off((G + 1) * sizeof(int));
  ASSERT_TRUE(A.p && W.p && C.p && off.p);
  // Scale so that gate values spread over silu's curved part (|x| ~ 1..4).
  fillRandom(A.p, maxRows * K, t, seed, 1.0f);
  fillRandom(W.p, size_t(G) * Np * K, t, seed + 1, 4.0f / sqrtf(float(K)));
  poison(C.p, maxRows * I * 2);
  CUDA_OK(cudaMemcpy(off.p, offsets.data(), offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
  const mkcclResult_t r =
      layout == mkcclSwigluBlocked
          ? mkcclGroupedGemmSwiglu(A.p, W.p, C.p, static_cast<const int*>(off.p), G, maxRows, I, K, t, t, 0)
          : mkcclGroupedGemmSwigluEx(A.p, W.p, layout, C.p, static_cast<const int*>(off.p), G, maxRows, I, K, t, t, 0);
  ASSERT_EQ(mkcclSuccess, r) << mkcclGetLastError(nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<double> a = toHostDouble(A.p, maxRows * K, t), w = toHostDouble(W.p, size_t(G) * Np * K, t);
  const std::vector<double> c = toHostDouble(C.p, maxRows * I, t);
  // Reference over the real rows of every group (padding rows hold products of whatever A holds
  // there: defined, but not checked).
  std::vector<double> got, ref;
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < sizes[g]; ++r) {
      const size_t row = size_t(offsets[g] + r);
      for (size_t col = 0; col < I; ++col) {
        float gate = 0, up = 0;  // fp32 sums, as the kernel's accumulators
        const double* x = &a[row * K];
        const double* wg = &w[w1Row(g, I, col, 0, layout) * K];
        const double* wu = &w[w1Row(g, I, col, 1, layout) * K];
        for (size_t k = 0; k < K; ++k) {
          gate += float(x[k] * wg[k]);
          up += float(x[k] * wu[k]);
        }
        ref.push_back(double(gate) / (1.0 + exp(-double(gate))) * double(up));
        got.push_back(c[row * I + col]);
      }
    }
  if (!ref.empty()) {
    const ErrStats e = compare(got, ref, 2e-2);
    EXPECT_EQ(0u, e.wrong) << "first wrong element " << e.firstWrong << " of " << ref.size();
    EXPECT_LE(e.maxRelErr, 2e-2);
  }
  // Rows past the last group are not written.
  size_t written = 0;
  for (size_t i = size_t(offsets[G]) * I; i < maxRows * I; ++i) written += c[i] == c[i] ? 1 : 0;
  EXPECT_EQ(0u, written) << "rows past the last group were written";
}

void randomGroups(mkcclSwigluLayout_t layout) {
  const uint64_t seed = freshSeed();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  struct Case {
    int groups;
    size_t I, K;
    mkcclDataType_t t;
  };
  for (const Case& c : {Case{4, 256, 512, mkcclBfloat16}, Case{5, 200, 136, mkcclBfloat16},
                        Case{3, 72, 264, mkcclFloat16}, Case{6, 384, 96, mkcclBfloat16}, Case{1, 8, 8, mkcclBfloat16}}) {
    std::vector<int> sizes(c.groups);
    for (int& s : sizes) {
      const int kind = int(rng() % 5);
      s = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? 128 : int(rng() % 300);
    }
    SCOPED_TRACE(testing::Message() << c.groups << " groups, I " << c.I << " K " << c.K);
    checkSwiglu(sizes, c.I, c.K, c.t, seed + c.groups, layout);
  }
  checkSwiglu({0, 0}, 256, 128, mkcclBfloat16, seed + 7, layout);  // every group empty
}

TEST(GroupedGemmSwiglu, RandomGroupsAgainstFp32) {
  MKCCL_REQUIRE_GPUS(1);
  randomGroups(mkcclSwigluBlocked);
}

// W1 gate rows then up rows: I not a multiple of 128 puts the last block's gate box over the first
// up rows and its up box over the next group's gate rows (or past W1's end: zero fill), which must
// reach no stored column.
TEST(GroupedGemmSwiglu, GateUpLayoutAgainstFp32) {
  MKCCL_REQUIRE_GPUS(1);
  randomGroups(mkcclSwigluGateUp);
}

TEST(GroupedGemmSwiglu, ArgumentErrors) {
  MKCCL_REQUIRE_GPUS(1);
  Buf A(256 * 128 * 2), W(2 * 512 * 128 * 2), C(256 * 256 * 2), off(3 * sizeof(int));
  ASSERT_TRUE(A.p && W.p && C.p && off.p);
  CUDA_OK(cudaMemset(off.p, 0, 3 * sizeof(int)));
  const auto* o = static_cast<const int*>(off.p);
  const mkcclDataType_t bf = mkcclBfloat16;
  EXPECT_EQ(mkcclSuccess, mkcclGroupedGemmSwiglu(A.p, W.p, C.p, o, 2, 256, 256, 128, bf, bf, 0)) << mkcclGetLastError(nullptr);
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemmSwiglu(A.p, W.p, C.p, o, 0, 256, 256, 128, bf, bf, 0)) << "no group";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemmSwiglu(A.p, W.p, C.p, nullptr, 2, 256, 256, 128, bf, bf, 0));
  std::vector<int> host(3, 0);
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemmSwiglu(A.p, W.p, C.p, host.data(), 2, 256, 256, 128, bf, bf, 0))
      << "offsets in host memory";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemmSwiglu(A.p, W.p, C.p, o, 2, 256, 250, 128, bf, bf, 0)) << "I % 8";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemmSwiglu(A.p, W.p, C.p, o, 3, 256, 256, 128, bf, bf, 0))
      << "W1 too small";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemmSwiglu(A.p, W.p, C.p, o, 2, 256, 256, 128, bf, mkcclFloat32, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemmSwiglu(A.p, W.p, A.p, o, 2, 256, 256, 128, bf, bf, 0))
      << "C overlaps A";
  // Gate-up: W1 is [groups * 2 I, K] (W holds 2 * 512 rows of 128: I = 256 fits 2 groups, not 3).
  EXPECT_EQ(mkcclSuccess, mkcclGroupedGemmSwigluEx(A.p, W.p, mkcclSwigluGateUp, C.p, o, 2, 256, 256, 128, bf, bf, 0))
      << mkcclGetLastError(nullptr);
  EXPECT_EQ(mkcclInvalidArgument,
            mkcclGroupedGemmSwigluEx(A.p, W.p, mkcclSwigluGateUp, C.p, o, 3, 256, 256, 128, bf, bf, 0))
      << "W1 too small";
  EXPECT_EQ(mkcclInvalidArgument,
            mkcclGroupedGemmSwigluEx(A.p, W.p, static_cast<mkcclSwigluLayout_t>(7), C.p, o, 2, 256, 256, 128, bf, bf, 0))
      << "no such layout";
  EXPECT_NE(nullptr, strstr(mkcclGetLastError(nullptr), "mkcclSwigluGateUp")) << mkcclGetLastError(nullptr);
  EXPECT_STRNE("", mkcclGetLastError(nullptr));
  CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
