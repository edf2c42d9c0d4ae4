// AllGather+GEMM with e4m3 inputs: AllGatherGemmOp (op.cuh) with an fp8 consumer mainloop
// (gemm/fp8_op.cuh). The host encodes A, the gathered region and W as 16-bit tensor maps of K / 2
// columns (gemm_fp8.cu's byte trick), so the pushes, chunk counters, tile order, producer waits and
// TMA loads move bytes exactly as for bf16 rows of K / 2 elements; only the consumers differ:
//   AllGatherGemmFp8Op         per-tensor scales: e4m3 wgmma, the accumulators scaled by sA * sW;
//   AllGatherGemmFp8BlockOp    block scales: Fp8BlockOp's promotion. The A-scale rows travel with
//                              their rows (the pushes copy them into every receiver's scale area of
//                              the region under the same chunk counters: push.cuh), so a peer
//                              tile's scales are read from there once its first stage has landed
//                              (Fp8BlockOp's kArriving); an own tile's from the user's scales.
#pragma once
#include "kernels/ag_gemm/op.cuh"
#include "kernels/gemm/fp8_op.cuh"

namespace mkccl {
namespace ag {

// The fused kernel's parameters plus the scales' device pointers. Derived, so that every hook of
// AllGatherGemmOp (loads, scheduler, comm CTAs, side teams) takes it as its FusedParams.
struct FusedFp8Params : FusedParams {
  Fp8Params fp8;                // per tensor: 1 float each; block: scaleA this rank's shard's rows
  const float* gatheredScales;  // block: this rank's scale area, [M][kScaleBlocks] (Layout)
};

struct AllGatherGemmFp8Op : AllGatherGemmOp {
  using Params = FusedFp8Params;
  static constexpr bool kMainloop = true;
  template <class Cfg, class Tile, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                  int consumer, uint32_t lane, uint32_t ctaRank, const Tile& t,
                                                  Hook hook) {
    return Fp8TensorOp::template mainloop<Cfg>(acc, pipe, g, p.fp8, sm, consumer, lane, ctaRank, t, hook);
  }
};

// Block scales on Fp8BlockCfg's 128 x 192 (kSlices 2) or 128 x 128 (kSlices 1) tiles. A tile wholly
// inside this rank's shard loads its rows from the user's A without waiting (GatherLoads), so its
// scales come from the user's scales too; every other tile's rows come from the region after the
// producer's wait, and so do its scales.
// Registers: the plain GEMM's two partial sets need the consumers' 216+ registers, which leaves the
// producer warpgroup 72; with the producer's out-of-line waits and the side team's copies that
// spilled (ptxas: 20-44 bytes in the kernel, 76 in commTeam at 72 / 216, as in the per-tensor
// 128 x 256 kernel). One partial set (Fp8BlockOp's kSets = 1: 1-4% slower in the plain GEMM) needs
// fewer, and 120 / 192 (128 x 120 + 256 x 192 = 64512) compiles without spills at both widths.
template <int kSlices>
struct AllGatherGemmFp8BlockOp : AllGatherGemmOp {
  using Params = FusedFp8Params;
  using Block = Fp8BlockOp<kSlices, 1, /*kArriving=*/true>;
  static constexpr uint32_t kProducerRegs = 120, kConsumerRegs = 192;
  static constexpr bool kMainloop = true;
  template <class Cfg, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                  int consumer, uint32_t lane, uint32_t ctaRank,
                                                  const dev::TileCoord& t, Hook hook) {
    const Layout& L = p.push.L;
    const bool own = L.ownBlock(t.m);
    const int64_t row = static_cast<int64_t>(t.m) * Cfg::BM;
    const typename Block::TileScales ts{own ? p.fp8.scaleA : p.gatheredScales,
                                        own ? row - static_cast<int64_t>(L.me) * L.m : row, own ? L.m : L.M,
                                        static_cast<int64_t>(t.n) * Cfg::BN};
    return Block::template mainloopAt<Cfg>(acc, pipe, g, p.fp8, sm, consumer, lane, ctaRank, ts, hook);
  }
};

}  // namespace ag
}  // namespace mkccl
