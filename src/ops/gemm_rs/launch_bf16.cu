// Fused GEMM+ReduceScatter / GEMM+AllReduce kernels with bf16 inputs.
#include "ops/gemm_rs/launch.cuh"

namespace mkccl {
namespace rs {
template mkcclResult_t reduceOccupancy<dev::Bf16>(int, int, Occupancy*);
template mkcclResult_t reduceLaunch<dev::Bf16>(const FusedLaunch&, cudaStream_t);
}  // namespace rs
}  // namespace mkccl
