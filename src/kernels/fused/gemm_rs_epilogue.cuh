// GEMM+RS/AR epilogues of one consumer warpgroup (64 x BN of a tile): add the running sum that
// arrived from the previous rank (if any) to the fp32 accumulators, round once to the input type,
// and either
//   stageTile  store the sum in fragment order (gemm_rs_layout.cuh) into a local staging slot,
//              for the copy warps to send on (16-byte coalesced stores, no shared memory), or
//   storeFinal write it to C through swizzled shared memory and TMA stores (the final step).
// The accumulators are only read: an epilogue that wrote them would make ptxas serialise the
// next tile's wgmma chain (C7515), so the incoming sum is added on the way out.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include "kernels/device/store.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/device/wgmma.cuh"
#include "kernels/fused/gemm_rs_layout.cuh"
#include "kernels/gemm/epilogue.cuh"

namespace mkccl {
namespace rs {

// Pairs of the input/output type in a 32-bit word (low half = lower column).
template <class In>
struct Pair;
template <>
struct Pair<dev::Bf16> {
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) { return dev::packBf16x2(lo, hi); }
  __device__ __forceinline__ static float2 unpack(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  }
};
template <>
struct Pair<dev::F16> {
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) { return dev::packF16x2(lo, hi); }
  __device__ __forceinline__ static float2 unpack(uint32_t w) {
    __half2 h;
    memcpy(&h, &w, 4);
    return __half22float2(h);
  }
};

// Accumulator pair q (0..3) of this thread's fragment vector i, plus word q of `in` when kIn.
template <class In, bool kIn, int kAcc>
__device__ __forceinline__ uint32_t sumPair(const float (&acc)[kAcc], int i, int q, const uint4& in) {
  float lo = acc[8 * i + 2 * q], hi = acc[8 * i + 2 * q + 1];
  if constexpr (kIn) {
    const uint32_t w = q == 0 ? in.x : q == 1 ? in.y : q == 2 ? in.z : in.w;
    const float2 f = Pair<In>::unpack(w);
    lo += f.x;
    hi += f.y;
  }
  return Pair<In>::pack(lo, hi);
}

// The incoming sum is read in groups of 4 vectors (one 64-column chunk), the next group's loads in
// flight while the current one is used: 32 registers on top of the 128 accumulators.
constexpr int kGroup = 4;

// This thread's vectors [first, first + kGroup) of a fragment-order half-tile slot (L2 only: a
// peer wrote them during the kernel).
__device__ __forceinline__ void loadGroup(uint4 (&in)[kGroup], const char* half, uint32_t tid, int first) {
  const uint4* p = reinterpret_cast<const uint4*>(half) + tid + first * kThreadsPerHalf;
#pragma unroll
  for (int i = 0; i < kGroup; ++i) in[i] = __ldcg(p + i * kThreadsPerHalf);
}

// acc (+ in) -> fragment-order slot `outHalf` (this warpgroup's 64 rows). Every thread stores;
// the caller synchronises the warpgroup before publishing.
template <class Cfg, bool kIn>
__device__ __forceinline__ void stageTile(const float (&acc)[Cfg::kAcc], const char* inHalf, char* outHalf,
                                          uint32_t tid) {
  using In = typename Cfg::In;
  constexpr int kGroups = Cfg::BN / 16 / kGroup;
  uint4 cur[kGroup], nxt[kGroup];
  if constexpr (kIn) loadGroup(nxt, inHalf, tid, 0);
  uint4* out = reinterpret_cast<uint4*>(outHalf) + tid;
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi) {
    if constexpr (kIn) {
#pragma unroll
      for (int k = 0; k < kGroup; ++k) cur[k] = nxt[k];
      if (gi + 1 < kGroups) loadGroup(nxt, inHalf, tid, (gi + 1) * kGroup);
    }
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      const int i = gi * kGroup + k;
      uint4 r;
      r.x = sumPair<In, kIn>(acc, i, 0, cur[k]);
      r.y = sumPair<In, kIn>(acc, i, 1, cur[k]);
      r.z = sumPair<In, kIn>(acc, i, 2, cur[k]);
      r.w = sumPair<In, kIn>(acc, i, 3, cur[k]);
      out[i * kThreadsPerHalf] = r;
    }
  }
}

// What storeFinal keeps between tiles (one per consumer warpgroup).
struct FinalCtx {
  const CUtensorMap* mapC;
  uint32_t smem;       // this warpgroup's two 64 x 64 staging chunks (SmemLayout::epi)
  uint32_t barrierId;  // the warpgroup's named barrier
  uint32_t tid;
  uint32_t chunks;     // chunks stored so far (picks the buffer)
};

// acc (+ in) -> C at (row0, col0) (64 rows x BN, clipped by the map), 64 columns per chunk:
// stmatrix into a 128B-swizzled chunk, TMA store. Double-buffered like EpilogueTmaStore: a
// buffer is rewritten once the store issued from it two chunks ago has read it.
template <class Cfg, bool kIn>
__device__ __forceinline__ void storeFinal(const float (&acc)[Cfg::kAcc], const char* inHalf, FinalCtx& c,
                                           int32_t row0, int32_t col0) {
  using In = typename Cfg::In;
  constexpr uint32_t kChunkBytes = 64 * 128;
  static_assert(kGroup == 4, "one group of fragment vectors per 64-column chunk");
  uint4 cur[kGroup], nxt[kGroup];
  if constexpr (kIn) loadGroup(nxt, inHalf, c.tid, 0);
  const uint32_t warp = c.tid >> 5, lane = c.tid & 31u;
#pragma unroll
  for (int ch = 0; ch < Cfg::BN / 64; ++ch) {
    if constexpr (kIn) {
#pragma unroll
      for (int k = 0; k < kGroup; ++k) cur[k] = nxt[k];
      if (ch + 1 < Cfg::BN / 64) loadGroup(nxt, inHalf, c.tid, (ch + 1) * kGroup);
    }
    if (c.tid == 0) dev::bulkWaitRead<1>();
    dev::namedBarrierSync(c.barrierId, 128);
    const uint32_t buf = c.smem + (c.chunks & 1u) * kChunkBytes;
#pragma unroll
    for (int jj = 0; jj < 8; jj += 2) {
      // Column groups jj, jj+1 of the chunk: accumulator pairs 2j..2j+3 (j = 8ch + jj), i.e.
      // fragment vector i = j / 2, in stmatrix's matrix order.
      const int k = jj / 2, i = ch * kGroup + k;
      dev::stmatrixX4(buf + stmatrixOffset(warp, lane, static_cast<uint32_t>(jj)), sumPair<In, kIn>(acc, i, 0, cur[k]),
                      sumPair<In, kIn>(acc, i, 1, cur[k]), sumPair<In, kIn>(acc, i, 2, cur[k]),
                      sumPair<In, kIn>(acc, i, 3, cur[k]));
    }
    dev::fenceProxyAsyncSmem();
    dev::namedBarrierSync(c.barrierId, 128);
    if (c.tid == 0) {
      dev::tmaStore2d(c.mapC, buf, col0 + ch * 64, row0);
      dev::bulkCommit();
    }
    ++c.chunks;
  }
}

}  // namespace rs
}  // namespace mkccl
