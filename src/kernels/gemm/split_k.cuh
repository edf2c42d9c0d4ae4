// Split-K for the plain GEMM: when the output has too few tiles to give every SM one (decode-sized
// M: 1..256 rows), each tile's K range is cut into `splits` parts that different CTAs compute. The
// op is three pieces on the one kernel body: a scheduler that hands out (tile, k-range) units, the
// k-range itself (tileKRange, read by the producer and the consumers), and an epilogue that
// reduces the parts. The same pieces run stream-K (SplitKParams::splits == 0) for outputs whose
// tiles leave the last wave partly empty (1000 x 1032: 40 tiles of 128 x 256 on 132 SMs; 4097 x
// 4104: 4.25 waves): the last full wave and the remainder are cut into equal k-block ranges, one
// per CTA, and the tiles that a range boundary cuts are reduced the same way. And the same pieces
// run the split remainder (splits >= 2 with dpTiles > 0): the full waves as whole tiles, then the
// tiles of the partial last wave each in `splits` uniform parts, so that every SM has work and the
// CTAs stay at the same k-blocks (stream-K's ranges leave them staggered: docs/PERFORMANCE.md).
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
  // uniform parts: [tiles - dpTiles][splits][2 halves][kAcc][128] fp32; stream-K: [2 ctas][2][kAcc][128]
  float* partials;
  int* counters;    // uniform parts: [tiles - dpTiles][2 halves]; stream-K: [skTiles][2]. Zero between calls
  int splits;       // >= 1, <= kBlocks; 0: stream-K (the fields below)
  // Stream-K (splits == 0): tiles [0, dpTiles) of the raster order are computed whole, round robin
  // (full waves); the k-blocks of tiles [dpTiles, dpTiles + skTiles) are cut into `ctas` equal
  // contiguous ranges, one per CTA (each CTA's range crosses tile boundaries), so the last wave
  // is spread over every SM instead of leaving most of them idle.
  // Split remainder (splits >= 2, dpTiles > 0, a multiple of the launch's CTAs): tiles [0, dpTiles) of the
  // raster order whole, round robin, then the rest in uniform parts, round robin, raster order.
  int dpTiles = 0, skTiles = 0;
  int ctas = 0;  // the launch's compute CTAs (the scheduler's numCtas)
};

// One unit of work: a tile (m, n; `tile` its linear index) and its k-blocks [kBegin, kEnd).
// Stream-K: `split` is the tile's index among the stream-K tiles (-1: a whole tile, stored as is),
// `slot` this CTA's partial slot for it (2 cta + 0 for the first tile of its range, + 1 for the last).
struct SplitKTile {
  int m, n;
  int tile, split;
  int kBegin, kEnd;
  int slot;
};

// Stream-K arithmetic shared by the scheduler and the epilogue: the k-block iterations of the
// stream-K tiles are [0, iters), CTA c owns [c iters / ctas, (c + 1) iters / ctas).
struct StreamKSpan {
  int64_t iters;
  int ctas, kBlocks;
  MKCCL_HD int64_t begin(int c) const { return iters * c / ctas; }
  // The CTA whose range holds iteration i.
  MKCCL_HD int ctaOf(int64_t i) const { return static_cast<int>(((i + 1) * ctas - 1) / iters); }
  // CTA c's partial slot for stream-K tile `tile`: its range's first tile gets 2c, its last 2c + 1
  // (a range that ends a tile early in its span and starts another never needs a third: the tiles
  // between are whole).
  MKCCL_HD int slot(int c, int tile) const {
    return 2 * c + (begin(c) / kBlocks == tile ? 0 : 1);
  }
};

// The parts of a cut tile, in the order they are summed: uniform parts 0..splits-1 (slots
// tile * splits + part); stream-K the CTAs firstCta.. whose ranges cover the tile (their slots).
// `me`: the part of unit t; `counter`: the tile's pair of half-tile counters (index into counters).
struct SplitKParts {
  int parts, me, firstCta;
  int64_t counter;
  int64_t tileSlots;  // uniform parts: the tile's first slot
  StreamKSpan sp;
  int sk;
  MKCCL_HD int64_t slot(int part) const { return tileSlots >= 0 ? tileSlots + part : sp.slot(firstCta + part, sk); }
};
template <class Params, class TileT>
MKCCL_HD SplitKParts splitKParts(const Params& p, int kBlocks, const TileT& t) {
  SplitKParts r;
  r.sp = StreamKSpan{static_cast<int64_t>(p.skTiles) * kBlocks, p.ctas, kBlocks};
  r.sk = t.split;
  if (p.splits > 0) {
    r.parts = p.splits;
    r.me = t.split;
    r.firstCta = 0;
    r.counter = 2ll * (t.tile - p.dpTiles);  // the split remainder: its tiles only
    r.tileSlots = static_cast<int64_t>(t.tile - p.dpTiles) * p.splits;
  } else {
    const int64_t it0 = static_cast<int64_t>(t.split) * kBlocks;
    r.firstCta = r.sp.ctaOf(it0);
    r.parts = r.sp.ctaOf(it0 + kBlocks - 1) - r.firstCta + 1;
    r.me = t.slot / 2 - r.firstCta;
    r.counter = 2ll * t.split;
    r.tileSlots = -1;
  }
  return r;
}

// Part `split` of `splits` of kBlocks k-blocks: as even as integers allow, never empty when
// splits <= kBlocks.
MKCCL_HD void splitKRange(int kBlocks, int splits, int split, int* begin, int* end) {
  *begin = static_cast<int>(static_cast<int64_t>(kBlocks) * split / splits);
  *end = static_cast<int>(static_cast<int64_t>(kBlocks) * (split + 1) / splits);
}

// Uniform parts (splits >= 1): units in linear order tile-major (the parts of a tile run side by
// side, so its partial slots are still in L2 when the last one reads them); tiles M-block first.
// CTA c of P takes c, c + P, ... The split remainder (splits >= 2, dpTiles > 0): first the whole
// tiles c, c + P, ... below dpTiles, then the units of the remaining tiles as above; every tile
// in the plain GEMM's banded raster order.
// Stream-K (splits == 0): first the whole tiles c, c + P, ... below dpTiles, then the pieces of
// CTA c's range of stream-K iterations; tiles in the plain GEMM's banded raster order.
// No clusters (clusterSize 1).
class SplitKScheduler {
 public:
  using Tile = SplitKTile;
  template <class Params>
  MKCCL_HD SplitKScheduler(const GemmArgs& g, const Params& p, int cta, int numCtas, int /*ctaRank*/)
      : sched_(g.sched), kBlocks_(g.kBlocks), splits_(p.splits), dpTiles_(p.dpTiles), cta_(cta), next_(cta),
        stride_(numCtas) {
    if (p.splits > 0) {
      total_ = (static_cast<int64_t>(g.sched.mBlocks) * g.sched.nBlocks - p.dpTiles) * p.splits;
      cur_ = end_ = 0;
      firstSk_ = 0;
    } else {
      total_ = 0;
      const StreamKSpan sp{static_cast<int64_t>(p.skTiles) * g.kBlocks, numCtas, g.kBlocks};
      cur_ = sp.begin(cta);
      end_ = sp.begin(cta + 1);
      firstSk_ = static_cast<int>(cur_ / g.kBlocks);
    }
  }
  MKCCL_HD bool next(Tile& t) {
    t.slot = 0;
    if (next_ < dpTiles_) {  // the full waves (split remainder, stream-K): whole tiles c, c + P, ...
      t.tile = static_cast<int>(next_);
      next_ += stride_;
      t.split = -1;
      t.kBegin = 0;
      t.kEnd = kBlocks_;
    } else if (splits_ > 0) {
      // Uniform parts; after full waves (dpTiles a multiple of P) the unit after them is c again,
      // counted from dpTiles.
      const int64_t u = next_ - dpTiles_;
      if (u >= total_) return false;
      next_ += stride_;
      const int r = static_cast<int>(u / splits_);
      t.split = static_cast<int>(u - static_cast<int64_t>(r) * splits_);
      t.tile = dpTiles_ + r;
      splitKRange(kBlocks_, splits_, t.split, &t.kBegin, &t.kEnd);
      if (dpTiles_ == 0) {  // split K of decode-sized M: M-block first
        t.m = t.tile % sched_.mBlocks;
        t.n = t.tile / sched_.mBlocks;
        return true;
      }
    } else {  // stream-K: the pieces of this CTA's range
      if (cur_ >= end_) return false;
      const int sk = static_cast<int>(cur_ / kBlocks_);
      const int64_t tileBegin = static_cast<int64_t>(sk) * kBlocks_;
      t.kBegin = static_cast<int>(cur_ - tileBegin);
      t.kEnd = static_cast<int>(end_ - tileBegin < kBlocks_ ? end_ - tileBegin : kBlocks_);
      cur_ = tileBegin + t.kEnd;
      t.tile = dpTiles_ + sk;
      t.split = t.kBegin == 0 && t.kEnd == kBlocks_ ? -1 : sk;
      // The range's first tile takes slot 2c, a later one (only its last can be partial) 2c + 1.
      t.slot = 2 * cta_ + (sk == firstSk_ ? 0 : 1);
    }
    dev::TileCoord c{0, 0};
    dev::GroupedTileScheduler(sched_, t.tile, 1, 0).next(c);  // linear index -> raster coordinate
    t.m = c.m;
    t.n = c.n;
    return true;
  }

 private:
  dev::TileSchedParams sched_;
  int kBlocks_, splits_, dpTiles_, cta_, firstSk_;
  int64_t next_, stride_, total_;  // total_: uniform parts' units after the whole tiles
  int64_t cur_, end_;
};

__device__ __forceinline__ int atomicAddAcqRel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// The reducing epilogue (one per consumer warpgroup): parts write their slot, the last part sums
// and stores through the configuration's epilogue (StoreEpilogue).
template <class Cfg, class Op>
struct SplitKEpilogue : StoreEpilogue<Cfg, Op> {
  using Base = StoreEpilogue<Cfg, Op>;
  static constexpr int kSlot = Cfg::kAcc * 128;  // floats per warpgroup slot
  // The epilogue's shared buffer of one warpgroup (0 for the register epilogues), where the last
  // part's spread sum exchanges its columns.
  static constexpr uint32_t kSpreadBytes = Cfg::kEpiBytes / Cfg::kConsumers;
  // Op::epilogueStamp points: the partials written, the part counted, the last part's sum done.
  static constexpr int kStampPartialsWritten = 0, kStampCounted = 1, kStampSummed = 2;
  __device__ __forceinline__ void stamp(int point) const {
    if constexpr (Op::kEpilogueStamps)
      if (this->half == 0 && this->ec.tid == 0) Op::epilogueStamp(this->op, point);
  }

  __device__ __forceinline__ SplitKEpilogue(const GemmArgs& g_, const typename Op::Params& op_,
                                            const CUtensorMap* mapC, const SmemLayout<Cfg>& sm, int half_)
      : Base(g_, op_, mapC, sm, half_) {}

  __device__ __forceinline__ void store(const float (&acc)[Cfg::kAcc], const SplitKTile& t) {
    const SplitKParams& p = this->op;
    // Rows of this half tile that lie in C (M <= 64: the second half has none: the store would be
    // clipped whole, so nothing is staged or stored at all).
    const int64_t rows = this->g.M - (static_cast<int64_t>(t.m) * Cfg::BM + this->half * 64);
    if (rows <= 0) return;
    if (p.splits == 1 || t.split < 0) {  // a whole tile (split K's parts have split >= 0)
      Base::store(acc, t);
      return;
    }
    const uint32_t tid = this->ec.tid;
    // Thread tid holds rows r and r + 8 of the half tile (r = 16 warp + lane / 4: wgmma's fragment
    // layout). At decode M most threads hold only rows past M, which the store clips: they neither
    // write nor read partials (at M = 1, 4 of 128 threads do: 512 bytes per part, not 32 KiB).
    const bool live = rows >= 64 || static_cast<int64_t>(16u * (tid / 32u) + (tid % 32u) / 4u) < rows;
    const SplitKParts parts = splitKParts(p, this->g.kBlocks, t);
    int* counter = p.counters + parts.counter + this->half;
    auto slotOf = [&](int part) -> const float* {
      return p.partials + (parts.slot(part) * 2 + this->half) * kSlot + tid;
    };
    float* mine = const_cast<float*>(slotOf(parts.me));
    if (live) {
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) __stcg(mine + i * 128, acc[i]);
    }
    // The last-block reduction with one fence, not 128: the warpgroup's slot writes are ordered
    // before thread 0's count by the barrier, and its acq_rel add releases them at GPU scope
    // (cumulativity) and, in the last part, acquires every other part's; the second barrier orders
    // the warpgroup's reads after that acquire.
    // The spread sum reuses the epilogue's shared buffer: no earlier TMA store may still read it.
    if (kSpreadBytes > 0 && tid == 0) dev::bulkWaitRead<0>();
    dev::namedBarrierSync(this->ec.barrierId, 128);
    stamp(kStampPartialsWritten);
    volatile uint32_t* word =
        reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(this->flagsAddr)) + 2 + this->half;
    if (tid == 0) *word = atomicAddAcqRel(counter, 1) == parts.parts - 1 ? 1u : 0u;
    dev::namedBarrierSync(this->ec.barrierId, 128);
    stamp(kStampCounted);
    if (*word == 0) return;  // not the last part: the last one stores the tile
    // The sum goes into the accumulators themselves: they are this warpgroup's own registers and
    // dead after the store (consumerRole owns them), and a second array would spill. Our own part
    // is read back from its slot too, so the order of the sum is the part order whichever part is
    // last.
    float(&sum)[Cfg::kAcc] = const_cast<float(&)[Cfg::kAcc]>(acc);
    // One or two live rows and three parts or more: the whole warpgroup sums the live columns,
    // every load in flight at once (sumSpread). Else each live thread sums its own column. Measured
    // (one H200, the decode set, same run): at M = 1 in 3-4 parts 0.6-1.9 us faster per call; with
    // two parts (one round trip either way) and at M = 16 (32 live columns) slower, by up to 1.5
    // us at M = 16 (not understood), so it is kept to the case it helps.
    const int lt = liveThreads(rows);
    if (parts.parts >= 3 && (spread<4>(sum, parts, lt) || spread<8>(sum, parts, lt))) {
      // summed by the warpgroup
    } else if (!live) {
      // Rows past M: whatever the registers hold is clipped by the store.
    } else if (parts.parts == 2) {
      // Two parts: a + b == b + a exactly, so our own part stays in registers.
      const float* other = slotOf(1 - parts.me);
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) sum[i] += __ldcg(other + i * 128);
    } else {
      const float* src = slotOf(0);
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) sum[i] = __ldcg(src + i * 128);
      for (int s = 1; s < parts.parts; ++s) {
        src = slotOf(s);
#pragma unroll
        for (int i = 0; i < Cfg::kAcc; ++i) sum[i] += __ldcg(src + i * 128);
      }
    }
    finishSum(sum, t, counter);
  }

 private:
  // sumSpread over kL columns when the live threads fit them and the epilogue's shared buffer
  // holds kL columns of fp32 accumulators; false: not done.
  template <int kL>
  __device__ __forceinline__ bool spread(float (&sum)[Cfg::kAcc], const SplitKParts& parts, int lt) {
    if constexpr (Cfg::kAcc <= 64 && Cfg::kAcc * kL * 4 <= kSpreadBytes) {  // 128-column tiles
      // Uniform parts (stream-K's slots take a division each; it keeps the per-thread sum).
      if (parts.tileSlots < 0 || lt > kL || (kL > 4 && lt <= kL / 2)) return false;
      sumSpread<kL>(sum, parts);
      return true;
    }
    return false;
  }

  // The tail of the last part: zero the tile half's counter for the next call, store the sum.
  __device__ __forceinline__ void finishSum(float (&sum)[Cfg::kAcc], const SplitKTile& t, int* counter) {
    if (this->ec.tid == 0) *counter = 0;  // every part has counted: zero for the next call
    stamp(kStampSummed);
    Base::store(sum, t);
  }

  // Threads of the warpgroup whose first row lies in C: a prefix of the 128 (thread tid holds row
  // 16 (tid / 32) + (tid % 32) / 4, and warp w + 1 has a live lane only once warp w is full).
  __device__ __forceinline__ static int liveThreads(int64_t rows) {
    int n = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int64_t lanes = 4 * (rows - 16 * w);
      n += lanes <= 0 ? 0 : lanes >= 32 ? 32 : static_cast<int>(lanes);
    }
    return n;
  }

  // The last part's sum over kL columns of the slots (kL >= the live threads, a power of two):
  // element e = i kL + c (accumulator i of thread c). The live threads put their own part in the
  // epilogue's shared buffer; each of the 128 threads then sums the elements tid + 128 j of every
  // part in part order (ours from shared memory, the others' slots from L2), kG parts' loads
  // issued before any is added, and writes the sums back; the live threads read theirs. With one
  // live row (M = 1) that is 2 loads per thread and part, all parts in one round trip, where a
  // live thread alone would wait for 64 loads per part, part after part.
  template <int kL>
  __device__ __forceinline__ void sumSpread(float (&sum)[Cfg::kAcc], const SplitKParts& parts) {
    constexpr int kPer = Cfg::kAcc * kL / 128;  // elements per thread
    // Parts per batch of loads: 32 registers (the accumulators stay allocated: the next tile's
    // first wgmma names them), so at M = 1 (kPer 2) all 16 parts at most in one round trip.
    constexpr int kG = kPer >= 32 ? 1 : 32 / kPer;
    static_assert(kPer >= 1 && kG >= 1, "spread sum");
    const SplitKParams& p = this->op;
    const uint32_t tid = this->ec.tid;
    // Uniform parts only (spread's condition): part q's slot is the tile's first plus q.
    const float* first = p.partials + (parts.tileSlots * 2 + this->half) * kSlot;
    float* buf = reinterpret_cast<float*>(__cvta_shared_to_generic(this->ec.smem));
    if (tid < kL) {
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) buf[i * kL + tid] = sum[i];
    }
    dev::namedBarrierSync(this->ec.barrierId, 128);
    float s[kPer];
    for (int q0 = 0; q0 < parts.parts; q0 += kG) {
      float v[kG][kPer];
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const int q = q0 + g;
        const float* slot = first + static_cast<int64_t>(q < parts.parts ? q : 0) * 2 * kSlot;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int e = static_cast<int>(tid) + 128 * j;
          v[g][j] = q >= parts.parts ? 0.f : q == parts.me ? buf[e] : __ldcg(slot + (e / kL) * 128 + e % kL);
        }
      }
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        if (q0 + g < parts.parts) {
#pragma unroll
          for (int j = 0; j < kPer; ++j) s[j] = q0 + g == 0 ? v[g][j] : s[j] + v[g][j];
        }
      }
    }
    dev::namedBarrierSync(this->ec.barrierId, 128);  // every read of our own part done
#pragma unroll
    for (int j = 0; j < kPer; ++j) buf[tid + 128 * j] = s[j];
    dev::namedBarrierSync(this->ec.barrierId, 128);
    // Threads past kL read a copy of column tid % kL: their rows lie past M and are not stored.
#pragma unroll
    for (int i = 0; i < Cfg::kAcc; ++i) sum[i] = buf[i * kL + tid % kL];
    // The store's first buffer acquisition synchronises the warpgroup before it writes over these.
  }

 public:
  // Before the CTA exits: the last TMA stores must have finished reading shared memory; their
  // global writes complete before the grid does (no op hook here reads C after the store).
  __device__ __forceinline__ void finish() {
    if (this->ec.tid == 0) dev::bulkWaitRead<0>();
  }
};

// The plain GEMM with split K. Words 2 and 3: each consumer warpgroup's "last part" broadcast.
struct SplitKGemmOp : GemmOpDefaults {
  using Params = SplitKParams;
  using Scheduler = SplitKScheduler;
  template <class Cfg, class Op>
  using Epilogue = SplitKEpilogue<Cfg, Op>;
  static constexpr uint32_t kSharedWords = 4;
  static constexpr bool kPdl = true;  // the workspace is touched only after the wait
};

}  // namespace mkccl
