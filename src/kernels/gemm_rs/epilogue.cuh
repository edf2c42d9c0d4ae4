// GEMM+RS/AR epilogues of one consumer warpgroup (64 x BN of a tile):
//   sendPartial a partial of another rank's chunk (ring reduction: plus the neighbour's sum):
//              round the fp32 accumulators once to the input type, write them in fragment order
//              (layout.h) into shared memory and bulk-store them, straight into the
//              owner's rx slot (gemm_rs.push=bulk) or into a local staging slot that the
//              push team or the copy engines send on;
//   storeFinal a tile of our own chunk: add the ws-1 partials the other ranks sent (ring: the one
//              sum the neighbour sent; fragment order, in our rx slots) to the accumulators,
//              round once, write C through swizzled shared memory and TMA stores (one partial:
//              its loads run one chunk ahead).
// The accumulators are only read: an epilogue that wrote them would make ptxas serialise the
// next tile's wgmma chain (C7515), so the partials are summed into a copy on the way out.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include "kernels/device/store.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/device/wgmma.cuh"
#include "kernels/gemm_rs/layout.h"
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

// What storeFinal and sendPartial keep between tiles (one per consumer warpgroup).
struct FinalCtx {
  const CUtensorMap* mapC;
  uint32_t smem;       // this warpgroup's two 64 x 64 staging chunks (SmemLayout::epi)
  uint32_t barrierId;  // the warpgroup's named barrier
  uint32_t tid;
  uint32_t chunks;     // chunks stored so far (picks the buffer)
};

// One 64-column chunk = 4 fragment vectors per thread. Partials are read kBatch at a time (all
// their vectors of the chunk in flight at once: one L2 latency per batch, not per partial):
// 128 accumulators + 32 sums + 48 loaded words fit the consumers' 216 registers.
constexpr int kVecsPerChunk = 4;
constexpr int kBatch = 2;

// f[8k + e] += partial vector k of the chunk (unpacked pairs).
template <class In>
__device__ __forceinline__ void addVec(float* f, const uint4& v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 x = Pair<In>::unpack(w[q]);
    f[2 * q] += x.x;
    f[2 * q + 1] += x.y;
  }
}

// The warpgroup's two chunk buffers (EpilogueTmaStore's area), rotated over by storeFinal and
// sendPartial as the engine's epilogue does. (Four buffers, at the price of a pipeline stage, were
// measured: no faster.)
struct Staging {
  static constexpr uint32_t kChunkBytes = EpilogueTmaStore::kChunkBytes;
  __device__ __forceinline__ static uint32_t take(FinalCtx& c) {
    return EpilogueTmaStore::chunkBuffer(c.smem, c.barrierId, c.tid, c.chunks);
  }
};

// Chunk ch of (f + partials) -> stmatrix into a 128B-swizzled buffer -> TMA store to C.
template <class Cfg>
__device__ __forceinline__ void storeChunk(const float* f, FinalCtx& c, int ch, int32_t row0, int32_t col0) {
  using In = typename Cfg::In;
  const uint32_t warp = c.tid >> 5, lane = c.tid & 31u;
  const uint32_t buf = Staging::take(c);
#pragma unroll
  for (int jj = 0; jj < 8; jj += 2) {
    // Column groups jj, jj+1 of the chunk: accumulator pairs 2j..2j+3 (j = 8ch + jj), i.e.
    // fragment vector k = jj / 2 of the chunk, in stmatrix's matrix order.
    const float* g = f + 4 * jj;
    dev::stmatrixX4(buf + stmatrixOffset(warp, lane, static_cast<uint32_t>(jj)), Pair<In>::pack(g[0], g[1]),
                    Pair<In>::pack(g[2], g[3]), Pair<In>::pack(g[4], g[5]), Pair<In>::pack(g[6], g[7]));
  }
  dev::fenceProxyAsyncSmem();
  dev::namedBarrierSync(c.barrierId, 128);
  if (c.tid == 0) {
    dev::tmaStore2d(c.mapC, buf, col0 + ch * 64, row0);
    dev::bulkCommit();
  }
  ++c.chunks;
}

// (acc + sum of kIn partials) -> C, each (chunk, partial) item's loads issued one item ahead: the
// next chunk's first partial is in flight while this chunk is stored (one exposed L2 latency per
// tile at 2 ranks instead of one per chunk). Indices are compile-time (the buffer stays in
// registers); one buffer, not two: two would be live across the stores and spill.
template <class Cfg, int kIn>
__device__ __forceinline__ void storeFinalPipelined(const float (&acc)[Cfg::kAcc], const uint4* base, int64_t stride,
                                                    FinalCtx& c, int32_t row0, int32_t col0) {
  constexpr int kChunks = Cfg::BN / 64, kItems = kChunks * kIn;
  constexpr int kPer = kIn > 0 ? kIn : 1;  // (kIn = 0: nothing is loaded)
  uint4 v[kVecsPerChunk];
  auto load = [&](int i) {
    const uint4* src = base + (int64_t(i % kPer) * stride) / 16 + (i / kPer) * kVecsPerChunk * kThreadsPerHalf;
#pragma unroll
    for (int k = 0; k < kVecsPerChunk; ++k) v[k] = __ldcg(src + k * kThreadsPerHalf);
  };
  if constexpr (kItems > 0) load(0);
#pragma unroll
  for (int ch = 0; ch < kChunks; ++ch) {
    float f[8 * kVecsPerChunk];
#pragma unroll
    for (int e = 0; e < 8 * kVecsPerChunk; ++e) f[e] = acc[8 * kVecsPerChunk * ch + e];
#pragma unroll
    for (int s = 0; s < kIn; ++s) {
      const int i = ch * kIn + s;
#pragma unroll
      for (int k = 0; k < kVecsPerChunk; ++k) addVec<typename Cfg::In>(f + 8 * k, v[k]);
      if (i + 1 < kItems) load(i + 1);
    }
    storeChunk<Cfg>(f, c, ch, row0, col0);
  }
}

// (acc + sum of nIn partials) -> C at (row0, col0) (64 rows x BN, clipped by the map), 64 columns
// per chunk: stmatrix into a 128B-swizzled chunk, TMA store. Partial s of this half is at
// in0 + s * stride (fragment order; L2 hits when the push team prefetched them). One partial (2
// ranks): the pipelined path; more: kBatch partials of a chunk at a time.
template <class Cfg>
__device__ __forceinline__ void storeFinal(const float (&acc)[Cfg::kAcc], const char* in0, int nIn, int64_t stride,
                                           FinalCtx& c, int32_t row0, int32_t col0) {
  using In = typename Cfg::In;
  const uint4* base = reinterpret_cast<const uint4*>(in0) + c.tid;
  switch (nIn) {
    case 0: return storeFinalPipelined<Cfg, 0>(acc, base, stride, c, row0, col0);
    case 1: return storeFinalPipelined<Cfg, 1>(acc, base, stride, c, row0, col0);
    default: break;
  }
#pragma unroll
  for (int ch = 0; ch < Cfg::BN / 64; ++ch) {
    float f[8 * kVecsPerChunk];
#pragma unroll
    for (int e = 0; e < 8 * kVecsPerChunk; ++e) f[e] = acc[8 * kVecsPerChunk * ch + e];
    for (int s0 = 0; s0 < nIn; s0 += kBatch) {
      uint4 v[kBatch][kVecsPerChunk];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (s0 + b < nIn) {
          const uint4* src = base + (int64_t(s0 + b) * stride) / 16 + ch * kVecsPerChunk * kThreadsPerHalf;
#pragma unroll
          for (int k = 0; k < kVecsPerChunk; ++k) v[b][k] = __ldcg(src + k * kThreadsPerHalf);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (s0 + b < nIn) {
#pragma unroll
          for (int k = 0; k < kVecsPerChunk; ++k) addVec<In>(f + 8 * k, v[b][k]);
        }
    }
    storeChunk<Cfg>(f, c, ch, row0, col0);
  }
}

// A partial of another rank's chunk from shared memory: 64 columns at a time, round the
// accumulators once (ring reduction: plus the sum that arrived from the neighbour, `in`, fragment
// order, loaded one chunk ahead) and write them in fragment order (4 vectors per thread: exactly
// the contiguous 8 KiB those vectors occupy in a staging or rx slot) into the staging buffer
// storeFinal uses (same double buffering, same chunk counter), then thread 0 bulk-stores the
// chunk to `dstHalf` (this half of a local staging slot, or of the owner's rx slot over NVLink)
// and commits it. send is thread 0's (false in drain mode: nothing leaves). Completion is the
// caller's business (bulkWait<0> before the tile is published); only the reuse of a buffer waits
// for its read.
template <class Cfg, int kIn>
__device__ __forceinline__ void sendPartialImpl(const float (&acc)[Cfg::kAcc], const uint4* in, char* dstHalf,
                                                bool send, FinalCtx& c) {
  using In = typename Cfg::In;
  constexpr uint32_t kChunkBytes = Staging::kChunkBytes;
  constexpr int kChunks = Cfg::BN / 64;
  static_assert(kVecsPerChunk * kThreadsPerHalf * 16 == kChunkBytes, "a chunk of fragment vectors is one buffer");
  uint4 v[kVecsPerChunk];
  auto load = [&](int ch) {
#pragma unroll
    for (int k = 0; k < kVecsPerChunk; ++k) v[k] = __ldcg(in + (ch * kVecsPerChunk + k) * kThreadsPerHalf);
  };
  if constexpr (kIn > 0) load(0);
#pragma unroll
  for (int ch = 0; ch < kChunks; ++ch) {
    const uint32_t buf = Staging::take(c);
    float f[8 * kVecsPerChunk];
    if constexpr (kIn > 0) {
#pragma unroll
      for (int e = 0; e < 8 * kVecsPerChunk; ++e) f[e] = acc[8 * kVecsPerChunk * ch + e];
#pragma unroll
      for (int k = 0; k < kVecsPerChunk; ++k) addVec<In>(f + 8 * k, v[k]);
      if (ch + 1 < kChunks) load(ch + 1);
    }
#pragma unroll
    for (int k = 0; k < kVecsPerChunk; ++k) {
      const float* a = kIn > 0 ? f + 8 * k : acc + 8 * (kVecsPerChunk * ch + k);
      // A warp's 32 consecutive vectors: 512 contiguous bytes, no bank conflicts.
      dev::stSharedV4B32(buf + (uint32_t(k) * kThreadsPerHalf + c.tid) * 16u, Pair<In>::pack(a[0], a[1]),
                         Pair<In>::pack(a[2], a[3]), Pair<In>::pack(a[4], a[5]), Pair<In>::pack(a[6], a[7]));
    }
    dev::fenceProxyAsyncSmem();
    dev::namedBarrierSync(c.barrierId, 128);
    if (c.tid == 0 && send) {
      dev::bulkStore1d(dstHalf + ch * kChunkBytes, buf, kChunkBytes);
      dev::bulkCommit();
    }
    ++c.chunks;
  }
}

// in0: this half of the rx slot to add (ring reduction), or null.
template <class Cfg>
__device__ __forceinline__ void sendPartial(const float (&acc)[Cfg::kAcc], char* dstHalf, bool send, FinalCtx& c,
                                            const char* in0 = nullptr) {
  if (in0) sendPartialImpl<Cfg, 1>(acc, reinterpret_cast<const uint4*>(in0) + c.tid, dstHalf, send, c);
  else sendPartialImpl<Cfg, 0>(acc, nullptr, dstHalf, send, c);
}

}  // namespace rs
}  // namespace mkccl
