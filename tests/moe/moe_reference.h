// The MoE tests' host model: routings of every kind the tests use, the receive layout every rank
// must end up with (counts, padded segments, which (source, token, slot) each segment holds), an
// emulation of the dispatch kernel's row placement, and the combine's fp64 reference.
#pragma once
#include <stdint.h>
#include <string>
#include <vector>
#include "kernels/moe/moe_layout.h"

namespace mkccl {
namespace moetest {

using moe::Dims;

// One rank's routing: topk_idx and topk_w, [T][k].
struct Routing {
  int T = 0;
  std::vector<int32_t> idx;
  std::vector<float> w;
};

enum class RouteKind {
  Uniform,       // k distinct experts per token, uniformly
  Skewed,        // most slots on rank 0's first experts (a hot rank and hot experts)
  EmptyExperts,  // only every third expert is ever chosen
  Dropped,       // about a third of the slots are -1, some tokens have none
  Duplicates,    // a token may name the same expert twice, and two experts of one rank often
  OneRank,       // every slot on rank `ranks - 1`'s experts
};
const char* routeKindName(RouteKind k);

// A routing of T tokens (deterministic in seed). Weights are in [0.1, 1).
Routing makeRouting(RouteKind kind, int T, const Dims& d, uint64_t seed);

struct Slot {
  int src = -1, token = -1, slot = -1;
  bool operator<(const Slot& o) const {
    return src != o.src ? src < o.src : token != o.token ? token < o.token : slot < o.slot;
  }
  bool operator==(const Slot& o) const { return src == o.src && token == o.token && slot == o.slot; }
};

// What receiving rank r holds after a dispatch of these routings (one per rank).
struct RankLayout {
  std::vector<int> counts;              // [El]
  std::vector<long long> offsets;       // [El + 1], segments padded to d.align
  std::vector<std::vector<Slot>> rows;  // [El]: the slots of each local expert, sorted
  long long total() const { return offsets.back(); }
};
std::vector<RankLayout> referenceLayout(const Dims& d, const std::vector<Routing>& routing);

// The dispatch kernel's placement, emulated (its count order: CTA, warp, round of 32 tokens, slot,
// lane; its bases: segment start, earlier source ranks, earlier CTAs, earlier warps). pos[src][t*k+j]
// is the row of the slot at its expert's rank (-1: dropped); pair[src][t*k+j] the pair index of a
// token's first slot on a remote rank (-1 elsewhere).
struct Placement {
  std::vector<std::vector<long long>> pos, pair;
};
Placement emulatePlacement(const Dims& d, const std::vector<Routing>& routing, int ctas);

// "" when every placed slot has a row inside its expert's segment, no two share a row, and the rows
// of each source are contiguous and in source-rank order within a segment; else what is wrong.
std::string checkPlacement(const Dims& d, const std::vector<Routing>& routing, const std::vector<RankLayout>& lay,
                           const Placement& p);

// The combine's reference for token t of rank src: sum_j w_j * y(src, t, j), in fp64, where y gives
// the value of element c of the row a slot came back with.
template <class Y>
void referenceOut(const Dims& d, const Routing& r, int t, Y y, double* out) {
  for (size_t c = 0; c < d.hidden; ++c) out[c] = 0;
  for (int j = 0; j < d.topk; ++j) {
    const int e = r.idx[(size_t)t * d.topk + j];
    if (e < 0 || e >= d.experts) continue;
    const double w = r.w[(size_t)t * d.topk + j];
    for (size_t c = 0; c < d.hidden; ++c) out[c] += w * y(j, c);
  }
}

// bf16 / fp16 helpers of the host side.
uint16_t toBits(float f, bool fp16);
float fromBits(uint16_t b, bool fp16);

}  // namespace moetest
}  // namespace mkccl
