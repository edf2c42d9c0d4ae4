// Fused AllGather+GEMM kernels with bf16 inputs.
#include "ops/ag_gemm/launch.cuh"

namespace mkccl {
namespace ag {
template mkcclResult_t fusedPlan<dev::Bf16>(const FusedCall&, FusedPlan*);
template mkcclResult_t fusedLaunch<dev::Bf16>(const FusedCall&, const FusedPlan&, cudaStream_t);
template mkcclResult_t fusedPreload<dev::Bf16>(int, int);
}  // namespace ag
}  // namespace mkccl
