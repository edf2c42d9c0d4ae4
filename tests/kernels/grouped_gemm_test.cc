// mkcclGroupedGemm against cuBLAS group by group: random group sizes (empty groups, one row,
// sizes that are not multiples of the tile), the groups padded to 128 rows with the offsets in
// device memory, C poisoned first; both input types and outputs; offsets that are not multiples of
// 128 refused on the next call; argument errors.
#include <cuda_runtime.h>
#include <stdint.h>
#include <random>
#include <string>
#include <vector>
#include "test_util.h"

namespace {

using namespace mkccl::test;

using Buf = DeviceBuf;

size_t outBytes(mkcclDataType_t t) { return t == mkcclFloat32 ? 4 : 2; }

// One grouped call on `sizes` (rows per group) checked against cuBLAS per group.
void checkGrouped(const std::vector<int>& sizes, size_t N, size_t K, mkcclDataType_t in, mkcclDataType_t out,
                  uint64_t seed) {
  const int G = static_cast<int>(sizes.size());
  std::vector<int> offsets(G + 1, 0);
  for (int g = 0; g < G; ++g) offsets[g + 1] = offsets[g] + (sizes[g] + 127) / 128 * 128;
  const size_t maxRows = std::max(128, offsets[G]) + 128;  // room to spare: rows past the last group
  Buf A(maxRows * K * 2), W(size_t(G) * N * K * 2), C(maxRows * N * outBytes(out)), R(maxRows * N * 4),
      off((G + 1) * sizeof(int));
  ASSERT_TRUE(A.p && W.p && C.p && R.p && off.p);
  fillRandom(A.p, maxRows * K, in, seed);
  fillRandom(W.p, size_t(G) * N * K, in, seed + 1);
  poison(C.p, maxRows * N * outBytes(out));
  CUDA_OK(cudaMemcpy(off.p, offsets.data(), offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
  ASSERT_EQ(mkcclSuccess, mkcclGroupedGemm(A.p, W.p, C.p, static_cast<const int*>(off.p), G, maxRows, N, K, in, out, 0))
      << mkcclGetLastError(nullptr);
  // References: each group on its own (padded rows included: their products are defined too).
  for (int g = 0; g < G; ++g) {
    const size_t rows = size_t(offsets[g + 1] - offsets[g]);
    if (rows == 0) continue;
    cublasGemmRef(static_cast<char*>(A.p) + size_t(offsets[g]) * K * 2, static_cast<char*>(W.p) + size_t(g) * N * K * 2,
                  static_cast<char*>(R.p) + size_t(offsets[g]) * N * 4, rows, N, K, in, mkcclFloat32);
  }
  CUDA_OK(cudaDeviceSynchronize());
  const size_t rows = size_t(offsets[G]);
  if (rows > 0) {
    const ErrStats e = compare(toHostDouble(C.p, rows * N, out), toHostDouble(R.p, rows * N, mkcclFloat32), 1e-2);
    EXPECT_EQ(0u, e.wrong) << "first wrong element " << e.firstWrong << " (row "
                           << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ")";
    EXPECT_LE(e.maxRelErr, 1e-2);
  }
  // Rows past the last group are not written.
  if (maxRows > rows) {
    const std::vector<double> tail = toHostDouble(static_cast<char*>(C.p) + rows * N * outBytes(out), (maxRows - rows) * N, out);
    size_t written = 0;
    for (double v : tail) written += v == v ? 1 : 0;  // poison reads as NaN
    EXPECT_EQ(0u, written) << "rows past the last group were written";
  }
}

TEST(GroupedGemm, RandomGroupsAgainstCublas) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  struct Case {
    int groups;
    size_t N, K;
    mkcclDataType_t in, out;
  };
  for (const Case& c : {Case{8, 256, 512, mkcclBfloat16, mkcclBfloat16}, Case{5, 136, 264, mkcclBfloat16, mkcclFloat32},
                        Case{16, 1024, 256, mkcclFloat16, mkcclFloat16}, Case{1, 384, 128, mkcclBfloat16, mkcclBfloat16},
                        Case{33, 64, 64, mkcclBfloat16, mkcclFloat16}}) {
    std::vector<int> sizes(c.groups);
    for (int& s : sizes) {
      const int kind = int(rng() % 5);
      s = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? 128 : int(rng() % 700);
    }
    SCOPED_TRACE(testing::Message() << c.groups << " groups, N " << c.N << " K " << c.K);
    checkGrouped(sizes, c.N, c.K, c.in, c.out, seed + c.groups);
  }
  // Every group empty: nothing to do, nothing written.
  checkGrouped({0, 0, 0}, 256, 128, mkcclBfloat16, mkcclBfloat16, seed + 99);
}

// Offsets that would make tiles straddle groups stop the kernel; the next call says why.
TEST(GroupedGemm, MisalignedOffsetsReported) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t N = 256, K = 128, maxRows = 512;
  Buf A(maxRows * K * 2), W(2 * N * K * 2), C(maxRows * N * 2), off(3 * sizeof(int));
  ASSERT_TRUE(A.p && W.p && C.p && off.p);
  fillRandom(A.p, maxRows * K, mkcclBfloat16, 1);
  fillRandom(W.p, 2 * N * K, mkcclBfloat16, 2);
  const int bad[3] = {0, 100, 256};
  CUDA_OK(cudaMemcpy(off.p, bad, sizeof(bad), cudaMemcpyHostToDevice));
  ASSERT_EQ(mkcclSuccess, mkcclGroupedGemm(A.p, W.p, C.p, static_cast<const int*>(off.p), 2, maxRows, N, K,
                                           mkcclBfloat16, mkcclBfloat16, 0));
  CUDA_OK(cudaDeviceSynchronize());  // the kernel ends (no hang, no fault)
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, C.p, static_cast<const int*>(off.p), 2, maxRows, N, K,
                                                   mkcclBfloat16, mkcclBfloat16, 0));
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("multiples of 128"))
      << mkcclGetLastError(nullptr);
  const int good[3] = {0, 128, 256};
  CUDA_OK(cudaMemcpy(off.p, good, sizeof(good), cudaMemcpyHostToDevice));
  EXPECT_EQ(mkcclSuccess, mkcclGroupedGemm(A.p, W.p, C.p, static_cast<const int*>(off.p), 2, maxRows, N, K,
                                           mkcclBfloat16, mkcclBfloat16, 0));
  CUDA_OK(cudaDeviceSynchronize());
}

TEST(GroupedGemm, ArgumentErrors) {
  MKCCL_REQUIRE_GPUS(1);
  Buf A(256 * 128 * 2), W(2 * 256 * 128 * 2), C(256 * 256 * 2), off(3 * sizeof(int));
  ASSERT_TRUE(A.p && W.p && C.p && off.p);
  const auto* o = static_cast<const int*>(off.p);
  const mkcclDataType_t bf = mkcclBfloat16;
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, C.p, o, 0, 256, 256, 128, bf, bf, 0)) << "no group";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, C.p, nullptr, 2, 256, 256, 128, bf, bf, 0));
  std::vector<int> host(3, 0);
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, C.p, host.data(), 2, 256, 256, 128, bf, bf, 0))
      << "offsets in host memory";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, C.p, o, 2, 256, 256, 12, bf, bf, 0)) << "K rows of 24 B";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, C.p, o, 4, 256, 256, 128, bf, bf, 0)) << "W too small";
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, C.p, o, 2, 256, 256, 128, mkcclFloat32, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGroupedGemm(A.p, W.p, A.p, o, 2, 256, 256, 128, bf, bf, 0)) << "C overlaps A";
  EXPECT_STRNE("", mkcclGetLastError(nullptr));
}

}  // namespace
