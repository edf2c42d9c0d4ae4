// perf::timeAlternating (perf/timing.cu) on a GPU: the order of warm-ups and blocks, the run indices
// each candidate sees, its `before` step ahead of each block, that the medians measure the GPU's
// work, and that a refused tuning fails its candidate. Skips where no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <string>
#include <utility>
#include <vector>
#include "perf.h"

namespace {

__global__ void spinNs(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

bool haveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

using mkccl::perf::Candidate;

TEST(PerfTiming, AlternatesBlocksAndRotatesRunIndices) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA GPU visible";
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
  std::vector<std::pair<int, int>> log;  // (candidate, run index); index -1: its `before`
  std::vector<Candidate> c;
  const unsigned long long ns[3] = {20000, 80000, 40000};
  for (int k = 0; k < 3; ++k)
    c.emplace_back("c" + std::to_string(k), [&, k](int i) {
      log.push_back({k, i});
      spinNs<<<1, 1, 0, s>>>(ns[k]);
    });
  c[2].before = [&]() { log.push_back({2, -1}); };
  const int warmup = 2, iters = 10, rounds = 4;  // blocks of 3, 3, 2, 2
  ASSERT_TRUE(mkccl::perf::timeAlternating(c, warmup, iters, rounds, s));
  std::vector<std::pair<int, int>> want;
  for (int k = 0; k < 3; ++k) {
    if (k == 2) want.push_back({2, -1});
    for (int i = 0; i < warmup; ++i) want.push_back({k, i});
  }
  int next[3] = {warmup, warmup, warmup};
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < 3; ++k) {
      if (k == 2) want.push_back({2, -1});
      for (int j = 0; j < (r < 2 ? 3 : 2); ++j) want.push_back({k, next[k]++});
    }
  EXPECT_EQ(want, log);
  for (int k = 0; k < 3; ++k) {
    EXPECT_FALSE(c[k].failed);
    // Each run spins ns[k]: the median is at least that, and well under twice it.
    EXPECT_GE(c[k].us, ns[k] / 1000.0 * 0.95) << c[k].name;
    EXPECT_LT(c[k].us, ns[k] / 1000.0 * 2 + 50) << c[k].name;
  }
  EXPECT_GT(c[1].us, c[2].us);
  EXPECT_GT(c[2].us, c[0].us);
  cudaStreamDestroy(s);
}

TEST(PerfTiming, FewerItersThanRoundsAndOneRound) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA GPU visible";
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
  for (const int rounds : {1, 4}) {
    std::vector<int> seen;
    std::vector<Candidate> c;
    c.emplace_back("a", [&](int i) {
      seen.push_back(i);
      spinNs<<<1, 1, 0, s>>>(10000);
    });
    ASSERT_TRUE(mkccl::perf::timeAlternating(c, 0, 2, rounds, s));
    EXPECT_EQ((std::vector<int>{0, 1}), seen) << rounds << " rounds";
    EXPECT_GT(c[0].us, 0);
  }
  std::vector<Candidate> none;
  EXPECT_FALSE(mkccl::perf::timeAlternating(none, 1, 0, 4, s)) << "iters 0";
  cudaStreamDestroy(s);
}

TEST(PerfTiming, RefusedTuningFailsItsCandidateAndStops) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA GPU visible";
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
  int runs[3] = {0, 0, 0};
  std::vector<Candidate> c;
  c.emplace_back("ok", [&](int) { ++runs[0]; });
  c.emplace_back("bad", [&](int) { ++runs[1]; }, nullptr, "no_such_op.no_such_key=1");
  c.emplace_back("after", [&](int) { ++runs[2]; });
  EXPECT_FALSE(mkccl::perf::timeAlternating(c, 1, 4, 2, s));
  EXPECT_FALSE(c[0].failed);
  EXPECT_TRUE(c[1].failed);
  EXPECT_EQ(0, runs[1]) << "a refused tuning must not run the candidate";
  EXPECT_EQ(0, runs[2]) << "timing stops at the first failure";
  for (const Candidate& k : c) EXPECT_LT(k.us, 0) << k.name;
  cudaStreamDestroy(s);
}

}  // namespace
