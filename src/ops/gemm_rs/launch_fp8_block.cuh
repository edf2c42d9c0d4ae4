// Launch of the fused GEMM+RS/AR kernel with e4m3 inputs and block scales (fp8.h), included once
// per output type by launch_fp8_block_bf16.cu and launch_fp8_block_f16.cu (files of their own, so
// that they compile beside the per-tensor kernels). launch_fp8.cuh's launch with the block op on
// 128 x 128 tiles (plan.cu keeps block-scaled plans at that width).
#pragma once
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/fp8_op.cuh"
#include "kernels/gemm_rs/op_fp8.cuh"
#include "ops/gemm_rs/fp8.h"
#include "ops/gemm_rs/launch.cuh"

namespace mkccl {
namespace rs {

// Fp8BlockCfg: the engine's configuration with setmaxnreg at 128 columns too (the promotion's
// registers do not fit 168); the op's split is GemmReduceOp's 72 / 216.
template <class Out>
using ReduceFp8BlockLauncher = GemmLauncher<Fp8BlockCfg<128>, GemmReduceFp8BlockOp<Out, 1>>;

template <class Out>
mkcclResult_t reduceOccupancyFp8Block(int dev, int smCount, Occupancy* out) {
  out->clusters256 = 0;  // no 128 x 256 block-scaled kernel
  return ReduceFp8BlockLauncher<Out>::prepare(dev, smCount, 2, &out->clusters128);
}

template <class Out>
mkcclResult_t reduceLaunchFp8Block(const FusedLaunch& f, const Fp8Call& s, cudaStream_t stream) {
  const Layout& L = f.params.L;
  if (L.bn != 128)
    return setError(mkcclInternalError, "gemm+reduce fp8 block scales: no kernel for tile width %d", L.bn);
  ReduceLaunchArgs a;
  MKCCL_CHECK(reduceLaunchArgs(f, mkcclBfloat16, &a));  // K in 16-bit columns: one k-block is 128 e4m3
  ReduceFp8Params p;
  memset(&p, 0, sizeof(p));
  static_cast<ReduceParams&>(p) = f.params;
  p.fp8.scaleA = s.scaleA;
  p.fp8.scaleW = s.scaleW;
  p.fp8.kScaleBlocks = (2 * f.K + 127) / 128;  // this rank's K in e4m3 elements, per 128
  return ReduceFp8BlockLauncher<Out>::launch(a.mapA, a.mapB, a.mapC, a.g, p, f.ctas, stream);
}

}  // namespace rs
}  // namespace mkccl
