// Thread-block clusters (sm_90): rank in the cluster, cluster-wide barrier, stores into a peer
// CTA's shared memory.
#pragma once
#include <stdint.h>

namespace mkccl {
namespace dev {

__device__ __forceinline__ uint32_t clusterCtaRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster must call it. Release/acquire: shared-memory writes
// before it (barrier initialisation, ...) are visible to the whole cluster after it.
__device__ __forceinline__ void clusterSync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

// 32-bit store to the shared-memory word at the same offset in CTA `cta` of the cluster.
__device__ __forceinline__ void storeSharedCluster(uint32_t addr, uint32_t cta, uint32_t v) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "st.shared::cluster.u32 [remote], %2;\n\t}" ::"r"(addr),
      "r"(cta), "r"(v)
      : "memory");
}

}  // namespace dev
}  // namespace mkccl
