// Host side of GEMM+ReduceScatter / GEMM+AllReduce with e4m3 inputs, per-tensor or block scales
// (mkcclGemmReduceScatterFp8, mkcclGemmAllReduceFp8). The call is planned and routed as a 16-bit
// one: A and W described as 16-bit rows of K / 2 columns (the bytes), the partials and C of the
// output type; only the fused kernel (launch_fp8_*.cu, launch_fp8_block_*.cu:
// kernels/gemm_rs/op_fp8.cuh) and the sequential route's GEMM (mkcclGemmFp8's) differ.
#pragma once
#include "mkccl.h"
#include "ops/gemm_rs/host.h"

namespace mkccl {
namespace rs {

// What an fp8 call adds to its FusedArgs (which describe the bytes: inType = outType, K halved).
struct Fp8Call {
  const float* scaleA;  // device: this rank's own scales (per tensor: 1 float each; block:
  const float* scaleW;  // [M][ceil(K/128)] and [ceil(N/128)][ceil(K/128)] of its K slice)
  mkcclFp8ScaleKind_t kind;
};

// The fused kernels per output type Out (dev::Bf16 in launch_fp8_bf16.cu, dev::F16 in
// launch_fp8_f16.cu). f describes the bytes (f.K: 16-bit columns, f.type: the output type).
template <class Out>
mkcclResult_t reduceOccupancyFp8(int dev, int smCount, Occupancy* out);
template <class Out>
mkcclResult_t reduceLaunchFp8(const FusedLaunch& f, const Fp8Call& s, cudaStream_t stream);
// The same with block scales (launch_fp8_block_bf16.cu, launch_fp8_block_f16.cu): 128 x 128 tiles
// only (clusters256 = 0; plans keep to that width: RuleInputs::maxBn).
template <class Out>
mkcclResult_t reduceOccupancyFp8Block(int dev, int smCount, Occupancy* out);
template <class Out>
mkcclResult_t reduceLaunchFp8Block(const FusedLaunch& f, const Fp8Call& s, cudaStream_t stream);

// The driver of gemm_rs.cu with an fp8 call (fp8 != nullptr).
mkcclResult_t gemmReduceOp(OpCtx& ctx, const FusedArgs& a, int mode, const Fp8Call* fp8);

}  // namespace rs
}  // namespace mkccl
