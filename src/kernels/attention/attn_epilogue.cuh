// What a consumer warpgroup does with its 64 rows of a finished tile.
//
//  storeTile (plain calls): O -> 16-bit -> swizzled shared memory (stmatrix) -> TMA store of the
//    64-row half (clipped at S); the LSE row by row. The staging buffer is reused once the last
//    store has read it.
//  ringMerge (Ring Attention): merges the step's partial with the tile's state from earlier steps
//    (fp32, by LSE) and either keeps it for the next step (fragment order: coalesced, and the same
//    thread layout in whichever block runs the tile next) or, at the tile's last step, writes O and
//    the LSE.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include <type_traits>
#include "kernels/attention/attn_config.cuh"
#include "kernels/attention/attn_mainloop.cuh"
#include "kernels/attention/attn_params.h"
#include "kernels/attention/attn_softmax.cuh"
#include "kernels/device/signal.cuh"
#include "kernels/device/store.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"

namespace mkccl {
namespace attn {

// Byte offset in a 64-row x 128-byte swizzled box of the row address lane `lane` of warp `warp`
// gives stmatrix.x4 for column groups (jj, jj + 1): matrix i = lane / 8 is column group jj + i / 2,
// row half i % 2 (the D fragment: registers {4j + 2 half, +1}).
__device__ __forceinline__ uint32_t stmatrixRow(uint32_t warp, uint32_t lane, uint32_t jj) {
  const uint32_t mat = lane >> 3;
  const uint32_t row = warp * 16u + (mat & 1u) * 8u + (lane & 7u);
  return dev::sw128Offset(row, jj + (mat >> 1));
}

template <class Cfg>
__device__ __forceinline__ void storeLse(const AttnParams& p, const TileWork& w, int consumer, uint32_t tid,
                                         const float (&lse)[2]) {
  if (p.lse == nullptr || (tid & 3u) != 0) return;
  const int r = consumer * 64 + static_cast<int>(tid >> 5) * 16 + static_cast<int>((tid & 31u) >> 2);
  float* base = p.lse + (static_cast<int64_t>(w.b) * p.shape.Hq + w.h) * p.lseRows + w.qRow0;
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (r + 8 * h < w.qRows) base[r + 8 * h] = lse[h];
}

// Plain calls: O half through shared memory and a TMA store.
template <class Cfg>
__device__ __forceinline__ void storeTile(const float (&o)[Cfg::kAccO], const float (&lse)[2], const TileWork& w,
                                          const AttnMaps& maps, const AttnParams& p, const AttnSmem<Cfg>& sm,
                                          int consumer, uint32_t tid) {
  constexpr bool kBf16 = std::is_same<typename Cfg::In, dev::Bf16>::value;
  const uint32_t warp = tid >> 5, lane = tid & 31u;
  const uint32_t buf = sm.o(consumer);
  const uint32_t bar = kBarConsumer0 + static_cast<uint32_t>(consumer);
  if (tid == 0) dev::bulkWaitRead<0>();  // the previous tile's store has read the buffer
  dev::namedBarrierSync(bar, 128);
#pragma unroll
  for (int box = 0; box < Cfg::kBoxes; ++box) {
#pragma unroll
    for (int jj = 0; jj < 8; jj += 2) {
      const int j = box * 8 + jj;
      uint32_t r[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float lo = o[4 * j + 2 * i], hi = o[4 * j + 2 * i + 1];
        r[i] = kBf16 ? dev::packBf16x2(lo, hi) : dev::packF16x2(lo, hi);
      }
      dev::stmatrixX4(buf + box * Cfg::kOBoxBytes + stmatrixRow(warp, lane, static_cast<uint32_t>(jj)), r[0], r[1],
                      r[2], r[3]);
    }
  }
  dev::fenceProxyAsyncSmem();
  dev::namedBarrierSync(bar, 128);
  if (tid == 0) {
#pragma unroll
    for (int box = 0; box < Cfg::kBoxes; ++box)
      dev::tmaStore4d(&maps.o, buf + box * Cfg::kOBoxBytes, box * 64, w.h, w.qRow0 + consumer * 64, w.b);
    dev::bulkCommit();
  }
  storeLse<Cfg>(p, w, consumer, tid, lse);
}

// Ring: merge state of (tile, warpgroup): D/2 fp32 per thread as float4 groups [g][thread], then
// the two LSEs per thread.
template <class Cfg>
__device__ __forceinline__ float* accOf(const AttnParams& p, int item, int consumer) {
  return p.ring.oAcc + (static_cast<int64_t>(item) * 2 + consumer) * (128 * Cfg::kAccO);
}
__device__ __forceinline__ float* lseAccOf(const AttnParams& p, int item, int consumer) {
  return p.ring.lseAcc + (static_cast<int64_t>(item) * 2 + consumer) * 256;
}

// Ring: O rows straight to the caller's [B, S, Hq, D] tensor (rows inside the tile's segment).
template <class Cfg>
__device__ __forceinline__ void storeRows(const float (&o)[Cfg::kAccO], const TileWork& w, const AttnParams& p,
                                          int consumer, uint32_t tid) {
  constexpr bool kBf16 = std::is_same<typename Cfg::In, dev::Bf16>::value;
  const int r = consumer * 64 + static_cast<int>(tid >> 5) * 16 + static_cast<int>((tid & 31u) >> 2);
  const int col = 2 * static_cast<int>(tid & 3u);
  char* O = static_cast<char*>(p.ring.O);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (r + 8 * h >= w.qRows) continue;
    const int64_t row = w.qRow0 + r + 8 * h;
    uint32_t* dst = reinterpret_cast<uint32_t*>(
        O + (((static_cast<int64_t>(w.b) * p.shape.sLocal + row) * p.shape.Hq + w.h) * Cfg::D + col) * 2);
#pragma unroll
    for (int g = 0; g < Cfg::D / 8; ++g) {
      const float lo = o[4 * g + 2 * h], hi = o[4 * g + 2 * h + 1];
      dst[4 * g] = kBf16 ? dev::packBf16x2(lo, hi) : dev::packF16x2(lo, hi);  // column 8 g + col
    }
  }
}

// Ring: returns false if the wait for the earlier step's state gave up (the error is recorded;
// the merge goes on with whatever memory holds, as a drained GEMM does).
template <class Cfg>
__device__ __forceinline__ void ringMerge(float (&o)[Cfg::kAccO], float (&lse)[2], const TileWork& w,
                                          const AttnParams& p, int consumer, uint32_t tid) {
  const uint32_t bar = kBarConsumer0 + static_cast<uint32_t>(consumer);
  const int prev = prevWorkStep(p.shape, w);
  const int last = lastWorkStep(p.shape, w);
  float* acc = accOf<Cfg>(p, w.item, consumer);
  float* lacc = lseAccOf(p, w.item, consumer);
  uint64_t* flag = p.ring.itemFlags + 2 * static_cast<int64_t>(w.item) + consumer;
  if (prev >= 0) {
    if (tid == 0) flagWait(p.comm, flag, dev::flagValue(ringEpoch(p), static_cast<uint64_t>(prev) + 1), kSiteUser + 2);
    dev::namedBarrierSync(bar, 128);
    const float2 la = __ldcg(reinterpret_cast<const float2*>(lacc) + tid);
    float lseA[2] = {la.x, la.y}, wa[2], wb[2];
    mergeWeights(lseA, lse, wa, wb);
#pragma unroll
    for (int g = 0; g < Cfg::kAccO / 4; ++g) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(acc) + g * 128 + tid);
      const float a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * g + e;
        o[i] = a[e] * wa[(i / 2) % 2] + o[i] * wb[(i / 2) % 2];
      }
    }
    lse[0] = lseA[0];
    lse[1] = lseA[1];
  }
  if (w.step == last) {
    storeRows<Cfg>(o, w, p, consumer, tid);
    storeLse<Cfg>(p, w, consumer, tid, lse);
    return;
  }
#pragma unroll
  for (int g = 0; g < Cfg::kAccO / 4; ++g)
    __stcg(reinterpret_cast<float4*>(acc) + g * 128 + tid, make_float4(o[4 * g], o[4 * g + 1], o[4 * g + 2], o[4 * g + 3]));
  __stcg(reinterpret_cast<float2*>(lacc) + tid, make_float2(lse[0], lse[1]));
  dev::namedBarrierSync(bar, 128);
  if (tid == 0) {
    __threadfence();
    dev::storeRelease(flag, dev::flagValue(ringEpoch(p), static_cast<uint64_t>(w.step) + 1));
  }
}

}  // namespace attn
}  // namespace mkccl
