// Fused AllGather+GEMM kernels with e4m3 inputs and block scales (mkcclAllGatherGemmFp8 with
// mkcclFp8ScaleBlock): the fused kernel's op with Fp8BlockOp's mainloop (kernels/ag_gemm/op_fp8.cuh)
// on the plain block-scaled GEMM's tiles, 128 x 192 and 128 x 128, planned as that GEMM plans them
// (gemm_fp8_plan.h). The call arrives as bf16 bytes (FusedCall::fp8: K halved), so everything else
// is launch.cuh's. Not preloaded at communicator init: the first call loads these kernels.
#include "kernels/ag_gemm/op_fp8.cuh"
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/fp8_op.cuh"
#include "ops/ag_gemm/launch.cuh"
#include "ops/gemm/gemm_fp8_plan.h"

namespace mkccl {
namespace ag {

template <>
struct FusedOpOf<Fp8Block> {
  using WideCfg = Fp8BlockCfg<192>;
  using NarrowCfg = Fp8BlockCfg<128>;
  using WideOp = AllGatherGemmFp8BlockOp<2>;
  using NarrowOp = AllGatherGemmFp8BlockOp<1>;
  static void scales(FusedFp8Params& p, const FusedCall& c) {
    p.fp8.scaleA = c.scaleA;  // this rank's shard's rows (own tiles)
    p.fp8.scaleW = c.scaleW;
    p.fp8.kScaleBlocks = (2 * c.K + 127) / 128;  // c.K: 16-bit columns
    p.gatheredScales = reinterpret_cast<const float*>(scaleArea(c.push, c.push.lme));
  }
  // v: fusedVariant's (256x1 / 256x2 force the 192-wide tile, as for mkcclGemmFp8).
  static GemmPlan plan(const FusedCall& c, GemmVariant v, int ctas, int clusters2) {
    return gemmFp8BlockPlanModel(c.M, c.N, v, ctas, clusters2);
  }
};

template mkcclResult_t fusedPlan<Fp8Block>(const FusedCall&, FusedPlan*);
template mkcclResult_t fusedLaunch<Fp8Block>(const FusedCall&, const FusedPlan&, cudaStream_t);
}  // namespace ag
}  // namespace mkccl
