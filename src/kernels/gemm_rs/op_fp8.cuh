// GEMM+ReduceScatter / GEMM+AllReduce with e4m3 inputs and per-tensor scales: GemmReduceOp (op.cuh)
// with the fp8 consumer mainloop (gemm/fp8_op.cuh). Only the mainloop differs:
//   - the host encodes A and W as 16-bit tensor maps of K / 2 columns (gemm_fp8.cu's byte trick),
//     so the loads, the scheduler and the pipeline move bytes exactly as for bf16 rows of K / 2;
//   - the consumers issue e4m3 wgmma and scale the accumulators by this rank's sA * sW, so each
//     rank's partial is already dequantised when it leaves the epilogue (ranks may use different
//     scales: the reduction adds real values);
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

}  // namespace rs
}  // namespace mkccl
