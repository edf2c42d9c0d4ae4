// Device helpers of the MoE kernels: warp row copies, peer waits, the block scan of the layout.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include "kernels/device/signal.cuh"
#include "kernels/moe/moe_args.h"

namespace mkccl {
namespace moe {

__device__ __forceinline__ int laneId() { return threadIdx.x & 31; }
__device__ __forceinline__ int warpId() { return threadIdx.x >> 5; }

// A row of `nvec` 16-byte words from src to the warp's destinations by one warp: lane j's dst is
// a destination when bit j of `dsts` is set (all 16-byte aligned, like src). The row is read once
// and stored to each destination; 8 loads per lane in flight, every pass (so a 14 KB row takes 4
// round trips, not one per tail word). Loads go through L2 only: rows written by peers during the
// kernel must never come from a stale L1 line.
__device__ __forceinline__ void warpCopy16Multi(char* dst, unsigned dsts, const char* src, size_t nvec) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  constexpr int U = 8;
  for (size_t base = 0; base < nvec; base += U * 32) {
    const size_t i = base + laneId();
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * 32 < nvec) r[u] = __ldcg(s + i + u * 32);
    for (unsigned m = dsts; m; m &= m - 1) {
      uint4* d = reinterpret_cast<uint4*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(dst), __ffs(m) - 1));
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * 32 < nvec) d[i + u * 32] = r[u];
    }
  }
}

// Up to 32 rows of nvec 16-byte vectors, row r from lane r's (dst, src) for the lanes in `rows`
// (every lane calls it), four rows at a time with two vectors of each per lane in flight: a warp
// walking rows one by one waits one memory latency per row.
__device__ __forceinline__ void warpCopyRows16(char* dst, const char* src, unsigned rows, size_t nvec) {
  constexpr int Q = 4, U = 2;
  while (rows) {
    char* d[Q];
    const char* s[Q];
    int n = 0;
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      const int l = rows ? __ffs(rows) - 1 : 0;
      const bool have = rows != 0;
      d[q] = reinterpret_cast<char*>(__shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(dst), l));
      s[q] = reinterpret_cast<const char*>(__shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(src), l));
      if (have) {
        ++n;
        rows &= rows - 1;
      }
    }
    for (size_t base = 0; base < nvec; base += U * 32) {
      const size_t i = base + laneId();
      uint4 r[Q][U];
#pragma unroll
      for (int q = 0; q < Q; ++q)
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (q < n && i + u * 32 < nvec) r[q][u] = __ldcg(reinterpret_cast<const uint4*>(s[q]) + i + u * 32);
#pragma unroll
      for (int q = 0; q < Q; ++q)
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (q < n && i + u * 32 < nvec) reinterpret_cast<uint4*>(d[q])[i + u * 32] = r[q][u];
    }
  }
}

// One destination (every lane passes the same dst).
__device__ __forceinline__ void warpCopy16(char* dst, const char* src, size_t nvec) {
  warpCopy16Multi(dst, 1u, src, nvec);
}

// The same for rows whose start is only 2-byte aligned (X with H * esize not a multiple of 16).
__device__ __forceinline__ void warpCopy2Multi(char* dst, unsigned dsts, const char* src, size_t n2) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (size_t base = 0; base < n2; base += 32) {
    const size_t i = base + laneId();
    const uint16_t v = i < n2 ? __ldcg(s + i) : 0;
    for (unsigned m = dsts; m; m &= m - 1) {
      uint16_t* d = reinterpret_cast<uint16_t*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(dst), __ffs(m) - 1));
      if (i < n2) d[i] = v;
    }
  }
}

// The pairs the peers sent here in the last dispatch (the counts table, key E + me of each source),
// numbered source by source: item i is pair i - start(s) of source s = sourceOf(i).
struct PeerPairs {
  int pre[kMaxRanks + 1];
  __device__ __forceinline__ PeerPairs(const int32_t* counts, int K, int E, int me, int n) {
    pre[0] = 0;
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) pre[s + 1] = pre[s] + (s < n && s != me ? __ldcg(counts + s * K + E + me) : 0);
  }
  __device__ __forceinline__ int total() const { return pre[kMaxRanks]; }
  __device__ __forceinline__ int sourceOf(long long item) const {
    int s = 0;
#pragma unroll
    for (int q = 1; q < kMaxRanks; ++q) s += item >= pre[q] ? 1 : 0;
    return s;
  }
  __device__ __forceinline__ int start(int s) const { return pre[s]; }
};

// Block-uniform: every flag base[q] (q < n local ranks, q != me unless withMe) reaches want.
// Threads q wait in parallel, each bounded by the communicator's timeout.
__device__ __forceinline__ bool waitRanks(const DevComm& c, const uint64_t* base, uint64_t want, bool withMe,
                                          int site) {
  int ok = 1;
  const int q = threadIdx.x;
  if (q < c.localRanks && (withMe || q != c.localRank)) ok = dev::waitGeq(c, base + q, want, q, site);
  return __syncthreads_and(ok) != 0;
}

// This rank's entry flags: local rank q has entered this call (dev::flagValue(seq, 0) in our
// barrier slot q, the value every collective's entry and a phase-0 node barrier post).
__device__ __forceinline__ const uint64_t* entryFlags(const DevComm& c) {
  return dev::flagsOf(c, c.localRank) + kBarrierSlot;
}
// Tells every peer that this rank has entered the call (one block).
__device__ __forceinline__ void postEntry(const DevComm& c) {
  const int q = threadIdx.x;
  if (q < c.localRanks && q != c.localRank)
    dev::storeRelease(dev::flagsOf(c, q) + kBarrierSlot + c.localRank, dev::flagValue(c.seq, 0));
}

__device__ __forceinline__ uint64_t* moeFlags(char* region) { return reinterpret_cast<uint64_t*>(region); }

// Exclusive prefix sum of v[0, n) in place (block-wide, n <= 2 * blockDim.x), total in v[n].
// v has n + 1 entries in shared memory; warpSums has 32 entries.
__device__ __forceinline__ void blockExclusiveScan(long long* v, int n, long long* warpSums) {
  const int i0 = 2 * threadIdx.x;
  const long long a = i0 < n ? v[i0] : 0, b = i0 + 1 < n ? v[i0 + 1] : 0;
  long long x = a + b;  // inclusive scan of the pairs across the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const long long y = __shfl_up_sync(0xffffffffu, x, o);
    if (laneId() >= o) x += y;
  }
  if (laneId() == 31) warpSums[warpId()] = x;
  __syncthreads();
  if (threadIdx.x < 32) {
    const int nw = blockDim.x / 32;
    long long s = threadIdx.x < nw ? warpSums[threadIdx.x] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const long long y = __shfl_up_sync(0xffffffffu, s, o);
      if (laneId() >= o) s += y;
    }
    warpSums[threadIdx.x] = s;  // inclusive over warps
  }
  __syncthreads();
  const long long before = (warpId() > 0 ? warpSums[warpId() - 1] : 0) + x - (a + b);
  if (i0 < n) v[i0] = before;
  if (i0 + 1 < n) v[i0 + 1] = before + a;
  if (threadIdx.x == blockDim.x - 1) v[n] = warpSums[blockDim.x / 32 - 1];
  __syncthreads();
}

// Element conversions of the combine.
template <class T> struct Elem;
template <> struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float2 two(uint32_t u) {
    __nv_bfloat162 h = *reinterpret_cast<__nv_bfloat162*>(&u);
    return __bfloat1622float2(h);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float one(uint16_t u) { return __bfloat162float(__ushort_as_bfloat16(u)); }
  static __device__ __forceinline__ uint16_t from(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
};
template <> struct Elem<__half> {
  static __device__ __forceinline__ float2 two(uint32_t u) {
    __half2 h = *reinterpret_cast<__half2*>(&u);
    return __half22float2(h);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float one(uint16_t u) { return __half2float(__ushort_as_half(u)); }
  static __device__ __forceinline__ uint16_t from(float f) { return __half_as_ushort(__float2half_rn(f)); }
};

// acc[0..8) += w * the 8 elements of T in v.
template <class T>
__device__ __forceinline__ void fma8(float* acc, uint4 v, float w) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = Elem<T>::two(u[i]);
    acc[2 * i] = fmaf(w, f.x, acc[2 * i]);
    acc[2 * i + 1] = fmaf(w, f.y, acc[2 * i + 1]);
  }
}

}  // namespace moe
}  // namespace mkccl
