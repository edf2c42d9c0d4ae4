// Fused GEMM+ReduceScatter / GEMM+AllReduce kernels with e4m3 inputs and bf16 partials and output
// (mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8). Not preloaded at communicator init: the
// first call loads these kernels.
#include "ops/gemm_rs/launch_fp8.cuh"

namespace mkccl {
namespace rs {
template mkcclResult_t reduceOccupancyFp8<dev::Bf16>(int, int, Occupancy*);
template mkcclResult_t reduceLaunchFp8<dev::Bf16>(const FusedLaunch&, const Fp8Call&, cudaStream_t);
}  // namespace rs
}  // namespace mkccl
