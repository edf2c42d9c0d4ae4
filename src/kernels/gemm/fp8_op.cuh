// fp8 (e4m3) GEMM on the engine's one body: two ops that differ only in their consumer mainloop.
//
// The pipeline, loads and epilogues are the bf16 engine's, unchanged: the host encodes A and W as
// 16-bit tensor maps of K / 2 columns, so a 64-wide 16-bit k-block (128 bytes, one 128B-swizzle
// row) is a 128-wide e4m3 k-block, and the mainloops issue 4 x wgmma m64nBNk32 e4m3 per k-block
// (wgmma_fp8.cuh). A k-block is also exactly one DeepSeek-V3 scale block along K.
//
//   Fp8TensorOp  per-tensor scales: the engine's mainloop (one wgmma group in flight, the whole of
//                K in the wgmma accumulators), then acc *= scaleA[0] * scaleW[0] before the epilogue.
//   Fp8BlockOp   block scales (DeepSeek-V3: 1 x 128 for A, 128 x 128 for W) on 128 x 128 or
//                128 x 192 tiles: each k-block's wgmma result (a partial set of registers, scale-d
//                0 on its first k32 step) is promoted in fp32, acc += part * scaleA * scaleW.
//                Promoting every 128 of K bounds the error of the tensor cores' narrower fp8
//                accumulation (DeepSeek-V3) and is what the per-block scales require anyway. Two
//                partial sets alternate so that the next wgmma group is in flight while one is
//                promoted (wait_group 1), on both tile widths.
//
// The fused ops reuse these mainloops (gemm_rs/op_fp8.cuh, ag_gemm/op_fp8.cuh): their tiles name
// rows differently (a chunk's M-block, a gathered row block), so Fp8BlockOp's core, mainloopAt,
// takes the tile's A-scale rows and first column rather than an engine tile.
#pragma once
#include <stdint.h>
#include <type_traits>
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/wgmma.cuh"
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "kernels/gemm/mainloop.cuh"

namespace mkccl {

// Device pointers to the scales (mkcclFp8Scales_t) and the scale row pitch.
struct Fp8Params {
  const float* scaleA;  // tensor: [1]; block: [M][kScaleBlocks]
  const float* scaleW;  // tensor: [1]; block: [ceil(N / 128)][kScaleBlocks]
  int64_t kScaleBlocks; // ceil(K / 128)
};

struct Fp8TensorOp : GemmOpDefaults {
  using Params = Fp8Params;
  static constexpr bool kMainloop = true;

  template <class Cfg, class Tile, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                  int consumer, uint32_t lane, uint32_t ctaRank, const Tile&,
                                                  Hook hook) {
    static_assert(std::is_same<typename Cfg::In, dev::E4m3>::value, "fp8 configuration expected");
    const float s = __ldg(p.scaleA) * __ldg(p.scaleW);  // L2 hits, issued before the k-loop
    if (!consumerMainloop<Cfg>(acc, pipe, g, sm, consumer, lane, ctaRank, hook)) return false;
#pragma unroll
    for (int i = 0; i < Cfg::kAcc; ++i) acc[i] *= s;
    return true;
  }
};

// The block-scaled kernel's configuration: the engine's, with the producer warpgroup's registers
// given to the consumers at every width (40 / 232). The promotion holds the accumulators and the
// tensor cores' partial sums: 64 + 2 x 64 registers at 128 x 128, 96 + 2 x 48 at 128 x 192;
// neither fits the 168 registers of a 384-thread CTA.
template <int kBN>
struct Fp8BlockCfg : GemmCfg<dev::E4m3, kBN, EpilogueTmaStore> {
  static constexpr bool kRegRealloc = true;
};

// Block scales. The tile's columns are cut into kSlices slices of BN / kSlices columns (128 x 128:
// one slice of 128; 128 x 192: two of 96); each slice of each k-block is one wgmma group (4 x
// m64nWk32 into a partial set), promoted into the fp32 accumulators once it is done:
//   acc[r, c] += part[r, c] * scaleA[row r, kb] * scaleW[block of column c, kb].
// Two partial sets are used in turn: the next slice's group is issued before the previous one is
// promoted (wait_group 1), so this warpgroup's own wgmma runs during its promotion, not only the
// other consumer warpgroup's. Registers: 64 + 2 x 64 (128 x 128) or 96 + 2 x 48 (128 x 192), with
// the consumers' setmaxnreg share (Fp8BlockCfg). One partial set of 96 waited for each k-block
// (wait_group 0, DeepGEMM's form) measured 1-4% slower on 128 x 192; 128 x 256 would need 128 +
// 2 x 64 registers. A tile of 192 columns straddles two W scale blocks (its first 64 or 128
// columns in block col0 / 128, the rest in the next); 128-wide tiles lie in one.
//
// kArriving: the A scales may be written while the kernel runs (AllGather+GEMM: peers push the
// scale rows of their shards with the rows, under the same chunk counters). A tile's scales are then
// read only once its first stage has landed: the producer issued that stage's loads after waiting
// for the chunks of the tile's rows, so the arrival (the peer's release on the counter, the
// producer's acquire) is ordered before the stage's barrier completes, and the consumer's wait on it
// orders the scale loads after. They go through L2 (ld.global.cg): the read-only path (ld.global.nc)
// is only for data that does not change during the kernel.
//
// kSets = 1: one partial set, each slice's group waited for (wait_group 0) and promoted before the
// next is issued, so this warpgroup's tensor work pauses during its promotion (the other consumer
// warpgroup's runs): 64 + 64 registers at 128 x 128, 96 + 48 at 128 x 192. For the fused kernels,
// whose roles leave the consumers fewer registers than the plain GEMM's 232 or keep more state across
// the mainloop (gemm_rs/op_fp8.cuh, ag_gemm/op_fp8.cuh say what spilled with two sets).
template <int kSlices, int kSets = 2, bool kArriving = false>
struct Fp8BlockOp : GemmOpDefaults {
  using Params = Fp8Params;
  static constexpr bool kMainloop = true;

  // Where a tile's scales are: its A-scale rows (row r of the tile at scaleA row row0 + r; rows at or
  // past `rows` read row rows - 1: their A rows are TMA's zero fill or another chunk's, and their
  // products are clipped or overwritten) and its first column of C.
  struct TileScales {
    const float* scaleA;  // [rows][kScaleBlocks]
    int64_t row0, rows;
    int64_t col0;
  };

  // One k-block's scales as loaded (a: this thread's two rows; w: the tile's two W blocks), and
  // their products (row r, W block b).
  struct Raw {
    float a0, a1, w0, w1;
  };
  struct Prod {
    float r0b0, r0b1, r1b0, r1b1;
  };
  __device__ __forceinline__ static Prod product(const Raw& s) {
    return {s.a0 * s.w0, s.a0 * s.w1, s.a1 * s.w0, s.a1 * s.w1};
  }

  // The engine's tiles (the plain GEMM): rows and columns of C are those of A and W.
  template <class Cfg, class Tile, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                  int consumer, uint32_t lane, uint32_t ctaRank, const Tile& t,
                                                  Hook hook) {
    const TileScales ts{p.scaleA, static_cast<int64_t>(t.m) * Cfg::BM, g.M, static_cast<int64_t>(t.n) * Cfg::BN};
    return mainloopAt<Cfg>(acc, pipe, g, p, sm, consumer, lane, ctaRank, ts, hook);
  }

  template <class Cfg, class Hook>
  __device__ __forceinline__ static bool mainloopAt(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                    const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                    int consumer, uint32_t lane, uint32_t ctaRank,
                                                    const TileScales& ts, Hook hook) {
    static_assert(std::is_same<typename Cfg::In, dev::E4m3>::value, "fp8 configuration expected");
    constexpr int kW = Cfg::BN / kSlices;  // columns per slice
    constexpr int kP = kW / 2;             // partial registers per slice
    static_assert(kSlices * kP == Cfg::kAcc && kW % 8 == 0, "slices");
    static_assert(kSlices <= 2, "at most two slices: two partial sets alternate over them");
    constexpr bool kTwoW = Cfg::BN > 128;  // tiles that may straddle two W scale blocks
    using Mma = dev::Wgmma<kW, dev::E4m3>;
    const volatile int* abortFlag = reinterpret_cast<const volatile int*>(__cvta_shared_to_generic(sm.flags()));
    const uint32_t aOffset = static_cast<uint32_t>(consumer) * 64u * (Cfg::BK * 2);
    const int nk = g.kBlocks;

    // This thread's two rows (wgmma.cuh's D layout: 16 w + l / 4, and 8 below); rows past the
    // scales' end read the last row's (TileScales).
    const uint32_t warp = (threadIdx.x % 128u) >> 5;
    const int64_t row = ts.row0 + consumer * 64 + warp * 16 + (lane >> 2);
    // Element offsets of the rows' and blocks' scales in 32 bits: the scale arrays hold M K / 128
    // and N K / 16384 floats, far below 2^32 for any A that fits a GPU (M K bytes). 64-bit pointers
    // would be rebuilt from the parameters before every k-block's loads (~25 instructions per
    // warp: the consumers' registers are full).
    const uint32_t kS = static_cast<uint32_t>(p.kScaleBlocks);
    const uint32_t ia0 = static_cast<uint32_t>(row < ts.rows ? row : ts.rows - 1) * kS;
    const uint32_t ia1 = static_cast<uint32_t>(row + 8 < ts.rows ? row + 8 : ts.rows - 1) * kS;
    const int64_t col0 = ts.col0;
    const int64_t wBlocks = (g.N + 127) / 128;
    const int64_t b0 = col0 / 128, b1 = b0 + 1 < wBlocks ? b0 + 1 : b0;
    const uint32_t iw0 = static_cast<uint32_t>(b0) * kS, iw1 = static_cast<uint32_t>(b1) * kS;
    // Columns 64..127 of the tile lie in block b0 when the tile starts on a block boundary.
    const bool midInB0 = !kTwoW || (col0 % 128) == 0;
    const float* sA = ts.scaleA;
    auto loadA = [&](uint32_t i) { return kArriving ? __ldcg(sA + i) : __ldg(sA + i); };
    auto load = [&](int kb) -> Raw {
      const uint32_t k = static_cast<uint32_t>(kb < nk ? kb : nk - 1);  // past the end: valid, unused
      return {loadA(ia0 + k), loadA(ia1 + k), __ldg(p.scaleW + (iw0 + k)), kTwoW ? __ldg(p.scaleW + (iw1 + k)) : 0.f};
    };

    // The next k-block's scales are loaded as a k-block starts, a k-block's time (~1000 cycles)
    // before its promotion reads them, into the one register set that the promotion then reads.
    // Not two k-blocks ahead through a rotation (next1 = next2): the copy compiles to a move that
    // waits for the load it copies, one k-block after issuing it. Arriving scales: the first two
    // k-blocks' once the first stage has landed (below), while its wgmma group runs.
    Prod cur;
    Raw next;
    if constexpr (!kArriving) {
      cur = product(load(0));
      next = load(1);
    }

#pragma unroll
    for (int i = 0; i < Cfg::kAcc; ++i) acc[i] = 0.f;

    // Promotes slice h (columns h kW ..) of the current k-block from `part`.
    auto promote = [&](const float (&part)[kP], int h) {
#pragma unroll
      for (int j = 0; j < kP / 4; ++j) {
        const int c = h * kW + 8 * j;  // the column group's first column in the tile
        const bool inB0 = c < 64 || (c < 128 && midInB0);
        const float s0 = inB0 ? cur.r0b0 : cur.r0b1, s1 = inB0 ? cur.r1b0 : cur.r1b1;
        // Registers {4j, 4j+1} are row l/4, {4j+2, 4j+3} the row 8 below (wgmma.cuh).
        float* a = acc + h * kP + 4 * j;
        a[0] = fmaf(part[4 * j + 0], s0, a[0]);
        a[1] = fmaf(part[4 * j + 1], s0, a[1]);
        a[2] = fmaf(part[4 * j + 2], s1, a[2]);
        a[3] = fmaf(part[4 * j + 3], s1, a[3]);
      }
    };
    // After the last slice of a k-block: its stage is read (free it), and the scales move on.
    int kbDone = 0;
    auto kBlockDone = [&]() {
      consumerRelease(sm.empty(pipe.stage), g.clusterSize, lane);
      pipe.advance();
      ++kbDone;
      cur = product(next);
      next = load(kbDone + 1);
    };

    // Issue side: its own position in the ring (one k-block ahead of `pipe` at most).
    dev::PipeState<Cfg::kStages> ip = pipe;
    uint64_t descA = 0, descB = 0;
    // Issues slice h of k-block kb into `part` (waits for the stage first at h = 0).
    auto issue = [&](float (&part)[kP], int kb, int h) -> bool {
      if (h == 0) {
        if (!dev::mbarWait(sm.full(ip.stage), ip.phase, g.waitTimeoutNs, abortFlag)) return false;
        descA = dev::smemDescSw128(sm.a(ip.stage) + aOffset);
        descB = dev::smemDescSw128(sm.b(ip.stage));
      }
      // Slice h: W rows h kW .. of the tile, 128 bytes each (kW is a multiple of 8: whole
      // 1024-byte swizzle atoms, so the descriptor's start address simply moves on).
      const uint64_t dB = descB + static_cast<uint64_t>((h * kW * 128) >> 4);
      dev::fenceAccumulators(part);
      dev::wgmmaFence();
#pragma unroll
      for (int k = 0; k < Cfg::BK / 16; ++k)
        Mma::mma(part, descA + k * dev::kDescK16Step, dB + k * dev::kDescK16Step, k != 0 ? 1u : 0u);
      dev::wgmmaCommit();
      if (h == 0) hook(kb);
      if (h == kSlices - 1) ip.advance();
      return true;
    };
    auto fail = [&]() {
      dev::wgmmaWait<0>();  // leave no wgmma in flight on the way out
      gemmFault<Cfg>(g, sm, ctaRank, kGemmFaultConsumer);
      return false;
    };

    // Slices in order s = kb kSlices + h; slice s goes to part set s % 2, so in a pair (s, s+1)
    // the first is set 0 and the second set 1, and h is known at compile time in each. The loop
    // body issues unconditionally (a conditional issue makes the compiler copy a set that is
    // still being written, and ptxas then serialises the wgmma, C7514); the tail follows it.
    static_assert(kSets == 1 || kSets == 2, "one or two partial sets");
    if constexpr (kSets == 1) {
      float part[kP];
      for (int kb = 0; kb < nk; ++kb) {
#pragma unroll
        for (int h = 0; h < kSlices; ++h) {
          if (!issue(part, kb, h)) return fail();
          if (kArriving && kb == 0 && h == 0) {
            cur = product(load(0));
            next = load(1);
          }
          dev::wgmmaWait<0>();
          dev::fenceAccumulators(part);
          promote(part, h);
        }
        kBlockDone();
      }
      return true;
    }
    float part0[kP], part1[kP];
    const int n = nk * kSlices;
    constexpr int kH1 = kSlices == 2 ? 1 : 0;  // h of the pair's second slice
    if (!issue(part0, 0, 0)) return fail();
    if constexpr (kArriving) {
      cur = product(load(0));
      next = load(1);
    }
    int s = 0;
    for (; s + 2 < n; s += 2) {
      if (!issue(part1, (s + 1) / kSlices, kH1)) return fail();
      dev::wgmmaWait<1>();
      dev::fenceAccumulators(part0);
      promote(part0, 0);
      if (kSlices == 1) kBlockDone();
      if (!issue(part0, (s + 2) / kSlices, 0)) return fail();
      dev::wgmmaWait<1>();
      dev::fenceAccumulators(part1);
      promote(part1, kH1);
      kBlockDone();
    }
    if (s + 1 < n) {
      if (!issue(part1, (s + 1) / kSlices, kH1)) return fail();
      dev::wgmmaWait<1>();
      dev::fenceAccumulators(part0);
      promote(part0, 0);
      if (kSlices == 1) kBlockDone();
      dev::wgmmaWait<0>();
      dev::fenceAccumulators(part1);
      promote(part1, kH1);
      kBlockDone();
    } else {
      dev::wgmmaWait<0>();
      dev::fenceAccumulators(part0);
      promote(part0, 0);
      kBlockDone();
    }
    return true;
  }
};

}  // namespace mkccl
