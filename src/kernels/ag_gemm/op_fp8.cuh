// AllGather+GEMM with e4m3 inputs and per-tensor scales: AllGatherGemmOp (op.cuh) with the fp8
// consumer mainloop (gemm/fp8_op.cuh). Nothing else differs: the host encodes A, the gathered
// region and W as 16-bit tensor maps of K / 2 columns (gemm_fp8.cu's byte trick), so the pushes,
// chunk counters, tile order, producer waits and TMA loads move bytes exactly as for bf16 rows of
// K / 2 elements; only the consumers issue e4m3 wgmma and scale the accumulators by sA * sW.
#pragma once
#include "kernels/ag_gemm/op.cuh"
#include "kernels/gemm/fp8_op.cuh"

namespace mkccl {
namespace ag {

// The fused kernel's parameters plus the scales' device pointers. Derived, so that every hook of
// AllGatherGemmOp (loads, scheduler, comm CTAs, side teams) takes it as its FusedParams.
struct FusedFp8Params : FusedParams {
  Fp8Params fp8;
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

}  // namespace ag
}  // namespace mkccl
