// Fused AllGather+GEMM kernels with fp16 inputs.
#include "ops/ag_gemm/launch.cuh"

namespace mkccl {
namespace ag {
template mkcclResult_t fusedPlan<dev::F16>(const FusedCall&, FusedPlan*);
template mkcclResult_t fusedLaunch<dev::F16>(const FusedCall&, const FusedPlan&, cudaStream_t);
template mkcclResult_t fusedPreload<dev::F16>(int, int);
}  // namespace ag
}  // namespace mkccl
