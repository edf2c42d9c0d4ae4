// Host side of GEMM+ReduceScatter / GEMM+AllReduce with e4m3 inputs and per-tensor scales
// (mkcclGemmReduceScatterFp8, mkcclGemmAllReduceFp8). The call is planned and routed as a 16-bit
// one: A and W described as 16-bit rows of K / 2 columns (the bytes), the partials and C of the
// output type; only the fused kernel (launch_fp8_*.cu: kernels/gemm_rs/op_fp8.cuh) and the
// sequential route's GEMM (mkcclGemmFp8's) differ.
#pragma once
#include "mkccl.h"
#include "ops/gemm_rs/host.h"

namespace mkccl {
namespace rs {

// What an fp8 call adds to its FusedArgs (which describe the bytes: inType = outType, K halved).
struct Fp8Call {
  const float* scaleA;  // device, 1 float each: this rank's own scales
  const float* scaleW;
};

// The fused kernels per output type Out (dev::Bf16 in launch_fp8_bf16.cu, dev::F16 in
// launch_fp8_f16.cu). f describes the bytes (f.K: 16-bit columns, f.type: the output type).
template <class Out>
mkcclResult_t reduceOccupancyFp8(int dev, int smCount, Occupancy* out);
template <class Out>
mkcclResult_t reduceLaunchFp8(const FusedLaunch& f, const Fp8Call& s, cudaStream_t stream);

// The driver of gemm_rs.cu with an fp8 call (fp8 != nullptr).
mkcclResult_t gemmReduceOp(OpCtx& ctx, const FusedArgs& a, int mode, const Fp8Call* fp8);

}  // namespace rs
}  // namespace mkccl
