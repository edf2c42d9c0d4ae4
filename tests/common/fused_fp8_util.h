// What the GPU tests of the fused fp8 calls share (ag_gemm_fp8_test: mkcclAllGatherGemmFp8;
// gemm_rs_fp8_test: mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8): the shape of a call, the
// range of block scales, the worlds and tunings every plan or route runs on, and one call on every
// rank. Header-only. (BadArguments set-up: fused_fp8_bad_args.h.)
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stddef.h>
#include <stdint.h>
#include <random>
#include <string>
#include <vector>
#include "mkccl.h"
#include "rank_threads.h"
#include "test_util.h"

namespace mkccl {
namespace test {

inline bool isBlock(mkcclFp8ScaleKind_t k) { return k == mkcclFp8ScaleBlock; }

// Block scales are drawn over 2^-4 .. 2^blockMaxExp: 2^4, but 2^2 with fp16 out, whose range
// (65504) a 128-block of products with both scales near 2^4 can pass on its own, and a sum of
// several ranks' such blocks sooner (the kernel then rightly stores inf).
inline float blockMaxExp(mkcclDataType_t out) { return out == mkcclFloat16 ? 2.f : 4.f; }

// One call: m rows per rank (AllGather: each rank's shard of A; ReduceScatter: each rank's rows of
// C, M = m ws; AllReduce: M = m ws - 1 where m ws > 1), N and K.
struct Fp8Shape {
  size_t m, N, K;
};

// 1 rank (device 0), then the ranks-sharing-GPUs worlds (sharedGpuWorlds()).
inline std::vector<std::vector<int>> oneAndSharedGpuWorlds() {
  std::vector<std::vector<int>> v{{0}};
  for (const auto& d : sharedGpuWorlds()) v.push_back(d);
  return v;
}

// The tuning t on every rank: call through ASSERT_NO_FATAL_FAILURE.
inline void setTuning(InProcessRanks& w, const std::string& t) {
  for (int r = 0; r < w.size(); ++r)
    ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], t.c_str())) << t << ": " << mkcclGetLastError(nullptr);
}

// A plan or route a test forces: its name in failure messages, its mkcclSetTuning string ("":
// auto).
struct NamedTuning {
  std::string name;
  std::string tuning;
};

// The whole of a test over every world of oneAndSharedGpuWorlds() and, on each, every tuning of
// `tunings` in turn, set on every rank and followed by cases(w, rng). One fresh seed for the test
// (named in its failures) and one generator drawn in that order, so a seed replays the run. One
// rank runs only the auto tunings: its call is mkcclGemmFp8, with no plan or route to force.
template <class Cases>
void onEveryWorldAndTuning(const std::vector<NamedTuning>& tunings, const Cases& cases) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (const std::vector<int>& devs : oneAndSharedGpuWorlds()) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    for (const NamedTuning& t : tunings) {
      if (w.size() == 1 && !t.tuning.empty()) continue;
      SCOPED_TRACE(t.name);
      ASSERT_NO_FATAL_FAILURE(setTuning(w, t.tuning));
      cases(w, rng);
    }
  }
}

// Per rank: what its call returned and what synchronising its stream after it returned.
struct RankResults {
  std::vector<mkcclResult_t> res;
  std::vector<cudaError_t> sync;
};

// call(r, stream) on every rank of w, each on its own thread (the ranks of one call wait for each
// other), then its stream synchronised.
template <class Call>
RankResults callOnEveryRank(InProcessRanks& w, const Call& call) {
  RankResults out{std::vector<mkcclResult_t>(w.size(), mkcclInternalError),
                  std::vector<cudaError_t>(w.size(), cudaErrorUnknown)};
  w.onEveryRank([&](int r) {
    out.res[r] = call(r, w.streams[r]);
    out.sync[r] = cudaStreamSynchronize(w.streams[r]);
  });
  return out;
}

}  // namespace test
}  // namespace mkccl
