// Fused GEMM+ReduceScatter / GEMM+AllReduce kernel with e4m3 inputs, block scales and fp16 partials
// and output (mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8 with mkcclFp8ScaleBlock). Not
// preloaded at communicator init: the first call loads it.
#include "ops/gemm_rs/launch_fp8_block.cuh"

namespace mkccl {
namespace rs {
template mkcclResult_t reduceOccupancyFp8Block<dev::F16>(int, int, Occupancy*);
template mkcclResult_t reduceLaunchFp8Block<dev::F16>(const FusedLaunch&, const Fp8Call&, cudaStream_t);
}  // namespace rs
}  // namespace mkccl
