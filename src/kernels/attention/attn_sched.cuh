// The persistent schedule of the attention kernel: compute block c of G takes units c, c + G, ...
// (attn_layout.h: unitTiles), one or two query tiles each. The producer thread and both consumer
// warpgroups walk the same sequence, so no tile index is ever exchanged.
#pragma once
#include <stdint.h>
#include "kernels/attention/attn_layout.h"

namespace mkccl {
namespace attn {

struct AttnSched {
  const AttnShape* shape;
  int64_t unit, stride, units;
  TileWork cur;
  int m2 = -1;  // the current unit's second tile, still to come

  __device__ __forceinline__ AttnSched(const AttnShape& s, int cta, int ctas)
      : shape(&s), unit(cta), stride(ctas), units(totalUnits(s)) {}

  __device__ __forceinline__ bool next(TileWork& w) {
    if (m2 >= 0) {
      w = makeTile(*shape, cur.kv, cur.step, cur.b, cur.h, cur.seg, m2);
      m2 = -1;
      return true;
    }
    if (unit >= units) return false;
    cur = unitTiles(*shape, unit, &m2);
    unit += stride;
    w = cur;
    return true;
  }
};

}  // namespace attn
}  // namespace mkccl
