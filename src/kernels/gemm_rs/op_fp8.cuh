// GEMM+ReduceScatter / GEMM+AllReduce with e4m3 inputs: GemmReduceOp (op.cuh) with an fp8 consumer
// mainloop (gemm/fp8_op.cuh): Fp8TensorOp's (per-tensor scales) or Fp8BlockOp's (DeepSeek-V3 block
// scales, GemmReduceFp8BlockOp below). Only the mainloop differs:
//   - the host encodes A and W as 16-bit tensor maps of K / 2 columns (gemm_fp8.cu's byte trick),
//     so the loads, the scheduler and the pipeline move bytes exactly as for bf16 rows of K / 2;
//   - the consumers issue e4m3 wgmma and scale the accumulators by this rank's sA * sW (block
//     scales: promote each k-block by this rank's scales of its rows and W block), so each rank's
//     partial is already dequantised when it leaves the epilogue (ranks may use different scales:
//     the reduction adds real values);
//   - the partials, the reduction and C stay 16-bit (Out: dev::Bf16 or dev::F16), as in the bf16 /
//     fp16 kernels: the epilogue is ReduceEpilogue on a configuration that names Out as its
//     element type (OutCfg), everything else of the configuration being the fp8 kernel's.
#pragma once
#include "kernels/gemm/fp8_op.cuh"
#include "kernels/gemm_rs/op.cuh"

namespace mkccl {
namespace rs {

// The fused kernel's parameters plus the scales' device pointers. Derived, so that every hook of
// GemmReduceOp (loads, scheduler, side warps, start, end) takes it as its ReduceParams.
struct ReduceFp8Params : ReduceParams {
  Fp8Params fp8;
};

// The fp8 configuration with Out as the element type the epilogue packs and unpacks (partials and
// C). Its sizes and offsets are the fp8 configuration's (inherited), so its SmemLayout addresses
// the same shared memory.
template <class Cfg, class Out>
struct OutCfg : Cfg {
  using In = Out;
};

template <class Cfg, class Out>
struct ReduceFp8Epilogue : ReduceEpilogue<OutCfg<Cfg, Out>> {
  using Base = ReduceEpilogue<OutCfg<Cfg, Out>>;
  __device__ __forceinline__ ReduceFp8Epilogue(const GemmArgs& g, const ReduceParams& p, const CUtensorMap* mapC,
                                               const SmemLayout<Cfg>& sm, int half)
      : Base(g, p, mapC, SmemLayout<OutCfg<Cfg, Out>>{sm.base}, half) {}
};

template <class Out>
struct GemmReduceFp8Op : GemmReduceOp {
  using Params = ReduceFp8Params;
  template <class Cfg, class Op>
  using Epilogue = ReduceFp8Epilogue<Cfg, Out>;

  static constexpr bool kMainloop = true;
  template <class Cfg, class Tile, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                  int consumer, uint32_t lane, uint32_t ctaRank, const Tile& t,
                                                  Hook hook) {
    return Fp8TensorOp::template mainloop<Cfg>(acc, pipe, g, p.fp8, sm, consumer, lane, ctaRank, t, hook);
  }
};

// Block scales, on Fp8BlockCfg's 128 x 128 tiles (kSlices 1; launch_fp8_block.cuh). A tile is M-block
// mb of its chunk, so its A-scale rows start at the chunk's first row (this rank's A and its scales
// cover all M rows; padding M-blocks past the chunk read the next chunk's rows or, past M, the last
// row's scales, and are never stored).
// Registers: the reduction epilogue keeps more state across the mainloop than the plain GEMM's
// store, and with the plain GEMM's two partial sets (64 + 2 x 64) the consumers spilled ~1 KB at
// GemmReduceOp's 72 / 216 and ~400 bytes even at 232 (ptxas). One partial set (Fp8BlockOp's
// kSets = 1: 1-4% slower in the plain GEMM) fits, and the split moves to 120 / 192 (128 x 120 +
// 256 x 192 = 64512): the push team and AR workers spilled 52-140 bytes at 72-104 registers.
template <class Out, int kSlices>
struct GemmReduceFp8BlockOp : GemmReduceFp8Op<Out> {
  using Block = Fp8BlockOp<kSlices, 1>;
  static constexpr uint32_t kProducerRegs = 120, kConsumerRegs = 192;
  template <class Cfg, class Tile, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const ReduceFp8Params& p,
                                                  const SmemLayout<Cfg>& sm, int consumer, uint32_t lane,
                                                  uint32_t ctaRank, const Tile& t, Hook hook) {
    const typename Block::TileScales ts{p.fp8.scaleA, p.L.chunkBegin(t.chunk) + int64_t(t.mb) * kTileRows, g.M,
                                        int64_t(t.nb) * Cfg::BN};
    return Block::template mainloopAt<Cfg>(acc, pipe, g, p.fp8, sm, consumer, lane, ctaRank, ts, hook);
  }
};

}  // namespace rs
}  // namespace mkccl
