// Launch of the fused GEMM+RS/AR kernel with e4m3 inputs (fp8.h), included once per output type
// by launch_fp8_bf16.cu and launch_fp8_f16.cu. launch.cuh's reduceLaunch with the fp8 op, the
// scales in its parameters and A / W encoded as 16-bit maps of the bytes.
#pragma once
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm_rs/op_fp8.cuh"
#include "ops/gemm_rs/fp8.h"
#include "ops/gemm_rs/launch.cuh"

namespace mkccl {
namespace rs {

template <class Out, int kBN>
using ReduceFp8Launcher = GemmLauncher<ReduceCfg<dev::E4m3, kBN>, GemmReduceFp8Op<Out>>;

template <class Out>
mkcclResult_t reduceOccupancyFp8(int dev, int smCount, Occupancy* out) {
  MKCCL_CHECK((ReduceFp8Launcher<Out, 256>::prepare(dev, smCount, 2, &out->clusters256)));
  MKCCL_CHECK((ReduceFp8Launcher<Out, 128>::prepare(dev, smCount, 2, &out->clusters128)));
  return mkcclSuccess;
}

template <class Out>
mkcclResult_t reduceLaunchFp8(const FusedLaunch& f, const Fp8Call& s, cudaStream_t stream) {
  const Layout& L = f.params.L;
  // K in 16-bit columns: one 64-column k-block is a 128-wide e4m3 one.
  ReduceLaunchArgs a;
  MKCCL_CHECK(reduceLaunchArgs(f, mkcclBfloat16, &a));
  const GemmArgs& g = a.g;
  const CUtensorMap &mapA = a.mapA, &mapB = a.mapB, &mapC = a.mapC;
  ReduceFp8Params p;
  memset(&p, 0, sizeof(p));
  static_cast<ReduceParams&>(p) = f.params;
  p.fp8.scaleA = s.scaleA;
  p.fp8.scaleW = s.scaleW;
  p.fp8.kScaleBlocks = (2 * f.K + 127) / 128;  // unused by per-tensor scales
  if (L.bn == 256) return ReduceFp8Launcher<Out, 256>::launch(mapA, mapB, mapC, g, p, f.ctas, stream);
  if (L.bn == 128) return ReduceFp8Launcher<Out, 128>::launch(mapA, mapB, mapC, g, p, f.ctas, stream);
  return setError(mkcclInternalError, "gemm+reduce fp8: no kernel for tile width %d", L.bn);
}

}  // namespace rs
}  // namespace mkccl
