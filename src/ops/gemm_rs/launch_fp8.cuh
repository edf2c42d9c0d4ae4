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
  GemmArgs g;
  memset(&g, 0, sizeof(g));
  g.M = f.M;
  g.N = f.N;
  g.K = f.K;  // 16-bit columns: one 64-column k-block is a 128-wide e4m3 one
  g.kBlocks = static_cast<int>(ceilDiv(f.K, 64));
  g.clusterSize = L.cs;
  g.nCommCtas = 0;
  g.outType = f.type;
  g.C = f.params.C;
  g.ldc = f.N;
  g.waitTimeoutNs = f.waitTimeoutNs;
  MKCCL_CHECK(gemmFaultWord(&g.fault));

  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, f.A, mkcclBfloat16, f.M, f.K, f.lda, kTileRows));
  MKCCL_CHECK(encodeTileMap(&mapB, f.W, mkcclBfloat16, f.N, f.K, f.ldw, static_cast<uint32_t>(L.bn / L.cs)));
  MKCCL_CHECK(encodeTileMap(&mapC, f.params.C, f.type, f.cRows, f.N, f.N, 64));
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
