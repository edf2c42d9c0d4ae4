// Fused AllGather+GEMM kernels with e4m3 inputs and per-tensor scales (mkcclAllGatherGemmFp8):
// the fused kernel's op with the fp8 mainloop (kernels/ag_gemm/op_fp8.cuh). The call arrives as
// bf16 bytes (FusedCall::fp8: K halved), so planning and launching are launch.cuh's unchanged.
// Not preloaded at communicator init: the first call loads these kernels.
#include "kernels/ag_gemm/op_fp8.cuh"
#include "kernels/device/wgmma_fp8.cuh"
#include "ops/ag_gemm/launch.cuh"

namespace mkccl {
namespace ag {

template <>
struct FusedOpOf<dev::E4m3> {
  using WideCfg = GemmCfg<dev::E4m3, 256, EpilogueTmaStore>;
  using NarrowCfg = GemmCfg<dev::E4m3, 128, EpilogueTmaStore>;
  using WideOp = AllGatherGemmFp8Op;
  using NarrowOp = AllGatherGemmFp8Op;
  static void scales(FusedFp8Params& p, const FusedCall& c) {
    p.fp8.scaleA = c.scaleA;
    p.fp8.scaleW = c.scaleW;
    p.fp8.kScaleBlocks = (2 * c.K + 127) / 128;  // unused by per-tensor scales
  }
  static GemmPlan plan(const FusedCall& c, GemmVariant v, int ctas, int clusters2) {
    return gemmPlanFor(c.M, c.N, c.K, v, ctas, clusters2);
  }
};

template mkcclResult_t fusedPlan<dev::E4m3>(const FusedCall&, FusedPlan*);
template mkcclResult_t fusedLaunch<dev::E4m3>(const FusedCall&, const FusedPlan&, cudaStream_t);
}  // namespace ag
}  // namespace mkccl
