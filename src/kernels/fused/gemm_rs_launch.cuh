// Launch of the fused GEMM+RS/AR kernel (reduceOccupancy / reduceLaunch of gemm_rs_host.cuh), included
// once per input type by gemm_rs_bf16.cu and gemm_rs_f16.cu.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <string.h>
#include "kernels/fused/gemm_rs_host.cuh"
#include "kernels/fused/gemm_rs_kernel.cuh"
#include "kernels/gemm/epilogue.cuh"
#include "kernels/gemm/kernel_launch.h"
#include "runtime/check.h"
#include "runtime/log.h"

namespace mkccl {
namespace rs {

template <class In, int kBN>
using ReduceCfg = GemmCfg<In, kBN, EpilogueTmaStore>;  // TMA-store staging for the final step

template <class Cfg>
struct ReduceLauncher {
  static constexpr auto kernel() { return &reduceGemmKernel<Cfg>; }

  // Opts the kernel into its shared memory on `dev` (once) and returns how many clusters of 2 fit.
  static mkcclResult_t prepare(int dev, int smCount, int* clusters2) {
    return persistentPrepare(reinterpret_cast<const void*>(kernel()), dev, smCount, Cfg::kThreads, Cfg::kSmemBytes, 2,
                             clusters2);
  }

  static mkcclResult_t launch(const CUtensorMap& mapA, const CUtensorMap& mapB, const CUtensorMap& mapC,
                              const GemmArgs& g, const ReduceParams& p, int ctas, cudaStream_t stream) {
    if (ctas < g.clusterSize || ctas % g.clusterSize != 0)
      return setError(mkcclInternalError, "gemm+reduce launch: %d CTAs, cluster %d", ctas, g.clusterSize);
    return persistentLaunch(kernel(), ctas, Cfg::kThreads, Cfg::kSmemBytes, g.clusterSize, stream, mapA, mapB, mapC, g,
                            p);
  }
};

template <class In>
mkcclResult_t reduceOccupancy(int dev, int smCount, Occupancy* out) {
  using Wide = ReduceLauncher<ReduceCfg<In, 256>>;
  using Narrow = ReduceLauncher<ReduceCfg<In, 128>>;
  MKCCL_CHECK(Wide::prepare(dev, smCount, &out->clusters256));
  MKCCL_CHECK(Narrow::prepare(dev, smCount, &out->clusters128));
  return mkcclSuccess;
}

template <class In>
mkcclResult_t reduceLaunch(const FusedLaunch& f, cudaStream_t stream) {
  const Layout& L = f.params.L;
  GemmArgs g;
  memset(&g, 0, sizeof(g));
  g.M = f.M;
  g.N = f.N;
  g.K = f.K;
  g.kBlocks = static_cast<int>(ceilDiv(f.K, 64));
  g.clusterSize = L.cs;
  g.nCommCtas = 0;
  g.outType = f.type;
  g.C = f.params.C;
  g.ldc = f.N;
  g.waitTimeoutNs = f.waitTimeoutNs;
  MKCCL_CHECK(gemmFaultWord(&g.fault));

  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, f.A, f.type, f.M, f.K, f.K, kTileRows));
  MKCCL_CHECK(encodeTileMap(&mapB, f.W, f.type, f.N, f.K, f.K, static_cast<uint32_t>(L.bn / L.cs)));
  MKCCL_CHECK(encodeTileMap(&mapC, f.params.C, f.type, f.cRows, f.N, f.N, 64));
  using Wide = ReduceLauncher<ReduceCfg<In, 256>>;
  using Narrow = ReduceLauncher<ReduceCfg<In, 128>>;
  if (L.bn == 256) return Wide::launch(mapA, mapB, mapC, g, f.params, f.ctas, stream);
  if (L.bn == 128) return Narrow::launch(mapA, mapB, mapC, g, f.params, f.ctas, stream);
  return setError(mkcclInternalError, "gemm+reduce: no kernel for tile width %d", L.bn);
}

}  // namespace rs
}  // namespace mkccl
