// Launch of the fused GEMM+ReduceScatter kernel across nodes (GemmReduceOpT<true>: net.cuh, an
// instantiation of its own so that the one-node kernel's registers are untouched), included once
// per input type by launch_net_bf16.cu and launch_net_f16.cu. Run on one H200 on emulated nodes
// (gemm_rs_net_test), per-piece puts included; not on a real NIC.
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
  ReduceLaunchArgs a;
  MKCCL_CHECK(reduceLaunchArgs(f, f.type, &a));
  const GemmArgs& g = a.g;
  const CUtensorMap &mapA = a.mapA, &mapB = a.mapB, &mapC = a.mapC;
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
