// Split-K for the plain GEMM: when the output has too few tiles to give every SM one (decode-sized
// M: 1..256 rows), each tile's K range is cut into `splits` parts that different CTAs compute. The
// op is three pieces on the one kernel body: a scheduler that hands out (tile, k-range) units, the
// k-range itself (tileKRange, read by the producer and the consumers), and an epilogue that
// reduces the parts.
//
// Reduction without waits: every part writes its 64 x BN fp32 accumulators (per consumer
// warpgroup) to its own slot of a workspace, then counts itself in on the tile half's counter. The
// part that arrives last adds the slots in split order (with two parts its own from registers:
// a + b == b + a; either way the sum does not depend on which part came last, so results are
// deterministic), stores the tile through the
// normal epilogue and resets the counter to zero, so the next call on the stream (or the next
// replay of a captured graph) finds it zeroed. Nobody spins: a part that is not last just moves on.
//
// Slots are laid out per thread (element i of thread tid at [i][tid]): no fragment-to-matrix
// mapping, and every store and load is coalesced.
#pragma once
#include <stdint.h>
#include "kernels/abi/hd.h"
#include "kernels/device/warpgroup.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_op.cuh"

namespace mkccl {

struct SplitKParams {
  float* partials;  // [tiles][splits][2 halves][kAcc][128] fp32
  int* counters;    // [tiles][2 halves]: zero between calls
  int splits;       // >= 1, <= kBlocks
};

// One unit of work: a tile (m, n; `tile` its linear index) and its k-blocks [kBegin, kEnd).
struct SplitKTile {
  int m, n;
  int tile, split;
  int kBegin, kEnd;
};

// Part `split` of `splits` of kBlocks k-blocks: as even as integers allow, never empty when
// splits <= kBlocks.
MKCCL_HD void splitKRange(int kBlocks, int splits, int split, int* begin, int* end) {
  *begin = static_cast<int>(static_cast<int64_t>(kBlocks) * split / splits);
  *end = static_cast<int>(static_cast<int64_t>(kBlocks) * (split + 1) / splits);
}

// Units in linear order tile-major (the parts of a tile run side by side, so its partial slots are
// still in L2 when the last one reads them); tiles M-block first. CTA c of P takes c, c + P, ...
// No clusters (clusterSize 1).
class SplitKScheduler {
 public:
  using Tile = SplitKTile;
  template <class Params>
  MKCCL_HD SplitKScheduler(const GemmArgs& g, const Params& p, int cta, int numCtas, int /*ctaRank*/)
      : mBlocks_(g.sched.mBlocks), kBlocks_(g.kBlocks), splits_(p.splits), next_(cta), stride_(numCtas) {
    total_ = static_cast<int64_t>(g.sched.mBlocks) * g.sched.nBlocks * p.splits;
  }
  MKCCL_HD bool next(Tile& t) {
    if (next_ >= total_) return false;
    const int64_t u = next_;
    next_ += stride_;
    t.tile = static_cast<int>(u / splits_);
    t.split = static_cast<int>(u - static_cast<int64_t>(t.tile) * splits_);
    t.m = t.tile % mBlocks_;
    t.n = t.tile / mBlocks_;
    splitKRange(kBlocks_, splits_, t.split, &t.kBegin, &t.kEnd);
    return true;
  }

 private:
  int mBlocks_, kBlocks_, splits_;
  int64_t next_, stride_, total_;
};

// The reducing epilogue (one per consumer warpgroup): parts write their slot, the last part sums
// and stores through the configuration's epilogue (StoreEpilogue).
template <class Cfg, class Op>
struct SplitKEpilogue : StoreEpilogue<Cfg, Op> {
  using Base = StoreEpilogue<Cfg, Op>;
  static constexpr int kSlot = Cfg::kAcc * 128;  // floats per warpgroup slot

  __device__ __forceinline__ SplitKEpilogue(const GemmArgs& g_, const typename Op::Params& op_,
                                            const CUtensorMap* mapC, const SmemLayout<Cfg>& sm, int half_)
      : Base(g_, op_, mapC, sm, half_) {}

  __device__ __forceinline__ void store(const float (&acc)[Cfg::kAcc], const SplitKTile& t) {
    const SplitKParams& p = this->op;
    // Rows of this half tile that lie in C (M <= 64: the second half has none: the store would be
    // clipped whole, so nothing is staged or stored at all).
    const int64_t rows = this->g.M - (static_cast<int64_t>(t.m) * Cfg::BM + this->half * 64);
    if (rows <= 0) return;
    if (p.splits == 1) {
      Base::store(acc, t);
      return;
    }
    const uint32_t tid = this->ec.tid;
    // Thread tid holds rows r and r + 8 of the half tile (r = 16 warp + lane / 4: wgmma's fragment
    // layout). At decode M most threads hold only rows past M, which the store clips: they neither
    // write nor read partials (at M = 1, 4 of 128 threads do: 512 bytes per part, not 32 KiB).
    const bool live = rows >= 64 || static_cast<int64_t>(16u * (tid / 32u) + (tid % 32u) / 4u) < rows;
    const int64_t tileSlots = static_cast<int64_t>(t.tile) * p.splits;
    float* mine = p.partials + ((tileSlots + t.split) * 2 + this->half) * kSlot + tid;
    if (live) {
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) __stcg(mine + i * 128, acc[i]);
    }
    __threadfence();  // our slot before our count (the classic last-block reduction)
    dev::namedBarrierSync(this->ec.barrierId, 128);
    volatile uint32_t* word =
        reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(this->flagsAddr)) + 2 + this->half;
    int* counter = p.counters + 2 * t.tile + this->half;
    if (tid == 0) *word = atomicAdd(counter, 1) == p.splits - 1 ? 1u : 0u;
    dev::namedBarrierSync(this->ec.barrierId, 128);
    if (*word == 0) return;  // not the last part: the last one stores the tile
    __threadfence();         // every part's slot after their counts
    // The sum goes into the accumulators themselves: they are this warpgroup's own registers and
    // dead after the store (consumerRole owns them), and a second 64-float array would spill. Our
    // own part is read back from its slot too, so the order of the sum is the split order whichever
    // part is last.
    float(&sum)[Cfg::kAcc] = const_cast<float(&)[Cfg::kAcc]>(acc);
    if (!live) {
      // Rows past M: whatever the registers hold is clipped by the store.
    } else if (p.splits == 2) {
      // Two parts: a + b == b + a exactly, so our own part stays in registers.
      const float* other = p.partials + ((tileSlots + (1 - t.split)) * 2 + this->half) * kSlot + tid;
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) sum[i] += __ldcg(other + i * 128);
    } else {
      const float* src = p.partials + (tileSlots * 2 + this->half) * kSlot + tid;
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) sum[i] = __ldcg(src + i * 128);
      for (int s = 1; s < p.splits; ++s) {
        src += 2 * kSlot;
#pragma unroll
        for (int i = 0; i < Cfg::kAcc; ++i) sum[i] += __ldcg(src + i * 128);
      }
    }
    if (tid == 0) *counter = 0;  // every part has counted: zero for the next call
    Base::store(sum, t);
  }
};

// The plain GEMM with split K. Words 2 and 3: each consumer warpgroup's "last part" broadcast.
struct SplitKGemmOp : GemmOpDefaults {
  using Params = SplitKParams;
  using Scheduler = SplitKScheduler;
  template <class Cfg, class Op>
  using Epilogue = SplitKEpilogue<Cfg, Op>;
  static constexpr uint32_t kSharedWords = 4;
};

}  // namespace mkccl
