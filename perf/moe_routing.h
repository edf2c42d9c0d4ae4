// The MoE benchmarks' routing (perf/op_moe.cc, perf/op_moe_layer.cc): k distinct experts per token,
// weights in [0.05, 0.3); skewed: half of the slots on rank 0's experts (a hot rank and hot experts).
#pragma once
#include <stdint.h>
#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace mkccl {
namespace perf {

inline void makeMoeRouting(int T, int E, int k, int ws, bool skewed, uint64_t seed, std::vector<int32_t>* idx,
                           std::vector<float>* w) {
  std::mt19937_64 g(seed);
  idx->assign((size_t)T * k, -1);
  w->assign((size_t)T * k, 0.f);
  std::uniform_real_distribution<float> wd(0.05f, 0.3f);
  const int hot = std::max(1, E / ws);
  for (int t = 0; t < T; ++t) {
    std::set<int> used;
    for (int j = 0; j < k && (int)used.size() < E; ++j) {
      int e;
      do e = skewed && g() % 2 ? (int)(g() % hot) : (int)(g() % E);
      while (used.count(e));
      used.insert(e);
      (*idx)[(size_t)t * k + j] = e;
      (*w)[(size_t)t * k + j] = wd(g);
    }
  }
}

}  // namespace perf
}  // namespace mkccl
