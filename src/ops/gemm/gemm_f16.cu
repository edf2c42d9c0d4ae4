// Plain GEMM kernels with fp16 inputs.
#include "ops/gemm/gemm_plain_impl.cuh"

namespace mkccl {
template mkcclResult_t plainGemm<dev::F16>(const GemmProblem&, GemmVariant, int, const GemmDeviceInfo&,
                                           cudaStream_t);
template mkcclResult_t plainGemmPreload<dev::F16>(int, int);
}  // namespace mkccl
