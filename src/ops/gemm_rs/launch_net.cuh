// Launch of the fused GEMM+ReduceScatter kernel across nodes (GemmReduceOpT<true>: net.cuh, an
// instantiation of its own so that the one-node kernel's registers are untouched), included once
// per input type by launch_net_bf16.cu and launch_net_f16.cu. Built, not yet run on a GPU.
#pragma once
#include "ops/gemm_rs/launch.cuh"
#include "ops/gemm_rs/net_fused.h"

namespace mkccl {
namespace rs {

template <class In, int kBN>
using NetReduceLauncher = GemmLauncher<ReduceCfg<In, kBN>, GemmReduceOpT<true>>;

template <class In>
mkcclResult_t netReduceLaunch(const FusedLaunch& f, int dev, int smCount, cudaStream_t stream) {
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
  MKCCL_CHECK(encodeTileMap(&mapA, f.A, f.type, f.M, f.K, f.lda, kTileRows));
  MKCCL_CHECK(encodeTileMap(&mapB, f.W, f.type, f.N, f.K, f.ldw, static_cast<uint32_t>(L.bn / L.cs)));
  MKCCL_CHECK(encodeTileMap(&mapC, f.params.C, f.type, f.cRows, f.N, f.N, 64));
  // The kernel's attributes (shared memory) are set on every call: this route is opt-in and its
  // calls cross the network, so a few microseconds of host time do not show.
  int clusters = 0;
  if (L.bn == 256) {
    MKCCL_CHECK((NetReduceLauncher<In, 256>::prepare(dev, smCount, 2, &clusters)));
    return NetReduceLauncher<In, 256>::launch(mapA, mapB, mapC, g, f.params, f.ctas, stream);
  }
  if (L.bn == 128) {
    MKCCL_CHECK((NetReduceLauncher<In, 128>::prepare(dev, smCount, 2, &clusters)));
    return NetReduceLauncher<In, 128>::launch(mapA, mapB, mapC, g, f.params, f.ctas, stream);
  }
  return setError(mkcclInternalError, "gemm+reduce across nodes: no kernel for tile width %d", L.bn);
}

}  // namespace rs
}  // namespace mkccl
