// Launch of the fused GEMM+RS/AR kernel (reduceOccupancy / reduceLaunch of host.h), included
// once per input type by gemm_rs_bf16.cu and gemm_rs_f16.cu.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <string.h>
#include "kernels/gemm_rs/op.cuh"
#include "ops/gemm/gemm_launch.cuh"
#include "ops/gemm_rs/host.h"
#include "kernels/gemm/epilogue.cuh"
#include "ops/gemm/kernel_launch.h"
#include "base/check.h"
#include "base/log.h"

namespace mkccl {
namespace rs {

template <class In, int kBN>
using ReduceCfg = GemmCfg<In, kBN, EpilogueTmaStore>;  // TMA-store staging for the final step

template <class In, int kBN>
using ReduceLauncher = GemmLauncher<ReduceCfg<In, kBN>, GemmReduceOp>;

template <class In>
mkcclResult_t reduceOccupancy(int dev, int smCount, Occupancy* out) {
  MKCCL_CHECK((ReduceLauncher<In, 256>::prepare(dev, smCount, 2, &out->clusters256)));
  MKCCL_CHECK((ReduceLauncher<In, 128>::prepare(dev, smCount, 2, &out->clusters128)));
  return mkcclSuccess;
}

// What every launch of the fused GEMM+RS/AR kernel passes: the engine's arguments and the tensor
// maps of A, W (of `inType`: the 16-bit type whose columns hold the bytes of fp8 rows) and C.
struct ReduceLaunchArgs {
  GemmArgs g;
  alignas(64) CUtensorMap mapA, mapB, mapC;
};

inline mkcclResult_t reduceLaunchArgs(const FusedLaunch& f, mkcclDataType_t inType, ReduceLaunchArgs* a) {
  const Layout& L = f.params.L;
  GemmArgs& g = a->g;
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
  MKCCL_CHECK(encodeTileMap(&a->mapA, f.A, inType, f.M, f.K, f.lda, kTileRows));
  MKCCL_CHECK(encodeTileMap(&a->mapB, f.W, inType, f.N, f.K, f.ldw, static_cast<uint32_t>(L.bn / L.cs)));
  MKCCL_CHECK(encodeTileMap(&a->mapC, f.params.C, f.type, f.cRows, f.N, f.N, 64));
  return mkcclSuccess;
}

template <class In>
mkcclResult_t reduceLaunch(const FusedLaunch& f, cudaStream_t stream) {
  const Layout& L = f.params.L;
  ReduceLaunchArgs a;
  MKCCL_CHECK(reduceLaunchArgs(f, f.type, &a));
  const GemmArgs& g = a.g;
  const CUtensorMap &mapA = a.mapA, &mapB = a.mapB, &mapC = a.mapC;
  if (L.bn == 256) return ReduceLauncher<In, 256>::launch(mapA, mapB, mapC, g, f.params, f.ctas, stream);
  if (L.bn == 128) return ReduceLauncher<In, 128>::launch(mapA, mapB, mapC, g, f.params, f.ctas, stream);
  return setError(mkcclInternalError, "gemm+reduce: no kernel for tile width %d", L.bn);
}

}  // namespace rs
}  // namespace mkccl
