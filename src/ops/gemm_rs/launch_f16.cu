// Fused GEMM+ReduceScatter / GEMM+AllReduce kernels with fp16 inputs.
#include "ops/gemm_rs/launch.cuh"

namespace mkccl {
namespace rs {
template mkcclResult_t reduceOccupancy<dev::F16>(int, int, Occupancy*);
template mkcclResult_t reduceLaunch<dev::F16>(const FusedLaunch&, cudaStream_t);
}  // namespace rs
}  // namespace mkccl
