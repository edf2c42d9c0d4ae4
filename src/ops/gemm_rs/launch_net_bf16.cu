// The fused GEMM+ReduceScatter kernel across nodes with bf16 inputs (launch_net.cuh).
#include "ops/gemm_rs/launch_net.cuh"

namespace mkccl {
namespace rs {
template mkcclResult_t netReduceLaunch<dev::Bf16>(const FusedLaunch&, int, int, cudaStream_t);
}  // namespace rs
}  // namespace mkccl
