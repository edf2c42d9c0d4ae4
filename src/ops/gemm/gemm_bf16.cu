// Plain GEMM kernels with bf16 inputs.
#include "ops/gemm/gemm_plain_impl.cuh"

namespace mkccl {
template mkcclResult_t plainGemm<dev::Bf16>(const GemmProblem&, GemmVariant, int, const GemmDeviceInfo&,
                                            cudaStream_t);
template mkcclResult_t plainGemmPreload<dev::Bf16>(int, int);
}  // namespace mkccl
