// Teams: a set of threads of one CTA that work together (a whole CTA, a warp, or the producer
// warpgroup's three idle warps) and the copies and work claims they share.
#pragma once
#include <stdint.h>
#include "kernels/device/warpgroup.cuh"

namespace mkccl {
namespace dev {

// Threads [0, n) of a team (n a multiple of 32) and the named barrier they share (n == 32: the
// warp syncs without one).
struct Team {
  uint32_t tid, n, bar;
  __device__ __forceinline__ void sync() const {
    if (n == 32) __syncwarp();
    else namedBarrierSync(bar, n);
  }
};

// A team barrier that also tells whether any thread passed v = true. Warps must be converged.
__device__ __forceinline__ bool teamAny(const Team& t, bool v) {
  uint32_t r;
  asm volatile(
      "{\n\t.reg .pred p, q;\n\t"
      "setp.ne.u32 p, %1, 0;\n\t"
      "bar.red.or.pred q, %2, %3, p;\n\t"
      "selp.u32 %0, 1, 0, q;\n\t}"
      : "=r"(r)
      : "r"(v ? 1u : 0u), "r"(t.bar), "r"(t.n)
      : "memory");
  return r != 0;
}

// Thread 0's value, seen by every thread of the team. One team per CTA uses it at a time.
__device__ __forceinline__ int64_t teamBroadcast(const Team& t, int64_t v) {
  __shared__ int64_t word;
  if (t.tid == 0) word = v;
  t.sync();
  const int64_t r = word;
  t.sync();
  return r;
}

// Takes `unit` items from a work queue that counts up from `base`: the first item's index.
__device__ __forceinline__ int64_t claim(uint64_t* queue, uint64_t base, int64_t unit) {
  return static_cast<int64_t>(
      atomicAdd(reinterpret_cast<unsigned long long*>(queue), static_cast<unsigned long long>(unit)) - base);
}

// dst[0, nvec) = src[0, nvec) (16-byte vectors), every thread of the team, kUnroll L2-only loads
// in flight per thread (the source may have been written by a peer). Plain stores: the caller
// fences before it publishes.
template <int kUnroll>
__device__ __forceinline__ void teamCopy(const Team& t, uint4* dst, const uint4* src, int64_t nvec) {
  const int64_t n = t.n;
  int64_t i = t.tid;
  for (; i + (kUnroll - 1) * n < nvec; i += kUnroll * n) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) r[u] = __ldcg(src + i + u * n);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * n] = r[u];
  }
  for (; i < nvec; i += n) dst[i] = __ldcg(src + i);
}

// dsts[o] + off <- src[0, bytes) for o < nd, one read of the source; bytes and every address
// 16-byte aligned. dsts is a shared-memory array (the same for every thread).
template <int kUnroll>
__device__ __forceinline__ void teamCopyMulti(const Team& t, char* const* dsts, int nd, int64_t off, const char* src,
                                              int64_t bytes) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  const int64_t nvec = bytes / 16, n = t.n;
  int64_t i = t.tid;
  for (; i + (kUnroll - 1) * n < nvec; i += kUnroll * n) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) r[u] = __ldcg(s + i + u * n);
    for (int o = 0; o < nd; ++o) {
      uint4* d = reinterpret_cast<uint4*>(dsts[o] + off);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) d[i + u * n] = r[u];
    }
  }
  for (; i < nvec; i += n) {
    const uint4 r = __ldcg(s + i);
    for (int o = 0; o < nd; ++o) reinterpret_cast<uint4*>(dsts[o] + off)[i] = r;
  }
}

}  // namespace dev
}  // namespace mkccl
