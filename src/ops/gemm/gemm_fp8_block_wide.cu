// fp8 GEMM kernel with DeepSeek-V3 block scales on 128 x 192 tiles, two 96-column slices with
// their partial sets in turn (kernels/gemm/fp8_op.cuh). A file of its own so that it compiles in
// parallel with the 128 x 128 kernel (gemm_fp8_block.cu).
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/fp8_op.cuh"
#include "ops/gemm/gemm_fp8.h"
#include "ops/gemm/gemm_launch.cuh"

namespace mkccl {

mkcclResult_t gemmFp8BlockWideLaunch(const CUtensorMap& mapA, const CUtensorMap& mapB, const CUtensorMap& mapC,
                                     const GemmArgs& g, const Fp8Params& params, const GemmPlan& plan, int dev,
                                     const GemmDeviceInfo& info, cudaStream_t stream) {
  using Wide = GemmLauncher<Fp8BlockCfg<192>, Fp8BlockOp<2>>;
  int unused = 0;
  MKCCL_CHECK(Wide::prepare(dev, info.smCount, plan.clusterSize, &unused));
  return Wide::launch(mapA, mapB, mapC, g, params, plan.ctas, stream);
}

}  // namespace mkccl
