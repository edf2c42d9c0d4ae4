// Launch of the fused GEMM+RS/AR kernel (reduceOccupancy / reduceLaunch of gemm_rs_host.cuh), included
// once per input type by gemm_rs_bf16.cu and gemm_rs_f16.cu.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <string.h>
#include <mutex>
#include "kernels/fused/gemm_rs_host.cuh"
#include "kernels/fused/gemm_rs_kernel.cuh"
#include "kernels/gemm/epilogue.cuh"
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
    // One lock per device: a driver call here may load the kernel lazily, which waits for the
    // device to go idle; ranks on other devices of this process must not queue behind it.
    static std::mutex mu[64];
    static int cache[64];  // 0 unknown, else clusters + 1
    if (dev < 0 || dev >= 64) return setError(mkcclInternalError, "gemm+reduce launch: device %d", dev);
    std::lock_guard<std::mutex> lock(mu[dev]);
    if (cache[dev] == 0) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(Cfg::kSmemBytes)));
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(static_cast<unsigned>(2 * smCount));
      cfg.blockDim = dim3(Cfg::kThreads);
      cfg.dynamicSmemBytes = Cfg::kSmemBytes;
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = 2;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, kernel(), &cfg) != cudaSuccess) {
        cudaGetLastError();
        n = 0;  // clusters unavailable: the planner uses single CTAs
      }
      cache[dev] = n + 1;
    }
    *clusters2 = cache[dev] - 1;
    return mkcclSuccess;
  }

  static mkcclResult_t launch(const CUtensorMap& mapA, const CUtensorMap& mapB, const CUtensorMap& mapC,
                              const GemmArgs& g, const ReduceParams& p, int ctas, cudaStream_t stream) {
    if (ctas < g.clusterSize || ctas % g.clusterSize != 0)
      return setError(mkcclInternalError, "gemm+reduce launch: %d CTAs, cluster %d", ctas, g.clusterSize);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(ctas));
    cfg.blockDim = dim3(Cfg::kThreads);
    cfg.dynamicSmemBytes = Cfg::kSmemBytes;
    cfg.stream = stream;
    cudaLaunchAttribute attr;
    if (g.clusterSize > 1) {
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = static_cast<unsigned>(g.clusterSize);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
    }
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel(), mapA, mapB, mapC, g, p));
    return mkcclSuccess;
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
