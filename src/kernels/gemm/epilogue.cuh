// Epilogues: what a consumer warpgroup does with its 64 x BN fp32 accumulators once a tile's
// mainloop is done. All three convert to the output type at run time (args.outType).
//
//  EpilogueTmaStore  registers -> swizzled shared-memory chunks (stmatrix / st.shared.v2) -> TMA
//                    store to C (local). Double-buffered per warpgroup; the stores run while the
//                    next tile's mainloop starts. Tails are clipped by TMA. A width off 64
//                    columns (the plain GEMM's) stores its last columns from registers, which
//                    complete() does not fence: no tile hook follows such a width (gemm_op.cuh).
//  EpilogueRegStore  registers -> global memory through args.C / args.ldc (local, or a peer's
//                    buffer through its mapping). Bounds-checked element pairs. The debug
//                    ("simple") variant uses it.
//  EpilogueRegAdd    like RegStore but adds into the destination (red.global.add: v2.f32, bf16x2,
//                    f16x2), for reductions into a buffer several GEMMs write.
// The stores (not the add) take an optional bias[N] (EpiCtx::bias, from GemmArgs::bias), added in
// fp32 on the way out: the accumulators themselves are never written (an epilogue that wrote them
// would make ptxas serialise the next tile's wgmma chain, C7515). With no bias the TMA store runs
// its own instantiation, unchanged.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include <type_traits>
#include "kernels/device/store.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "mkccl.h"

namespace mkccl {

// Byte offset, in a 64-row x 128-byte swizzled staging chunk, of the stmatrix row address lane
// `lane` of warp `warp` supplies for the column-group pair (jj, jj + 1) (jj even, 8 columns each).
// Matrix i = lane / 8 is (column group jj + i / 2, row half i % 2): accumulator pair
// {4j + 2(i % 2), +1} with j = jj + i / 2 (wgmma.cuh's fragment layout).
__host__ __device__ __forceinline__ uint32_t stmatrixOffset(uint32_t warp, uint32_t lane, uint32_t jj) {
  const uint32_t mat = lane >> 3;
  const uint32_t row = warp * 16u + (mat & 1u) * 8u + (lane & 7u);
  return dev::sw128Offset(row, jj + (mat >> 1));
}
// Byte offset of the fp32 pair {acc[4j + 2h], acc[4j + 2h + 1]} of lane `lane` of warp `warp` in a
// 32-column chunk, column group jj (0..3) of the chunk, row half h. Column 8 jj + 2(l % 4) is byte
// 32 jj + 8(l % 4) of the row: 16-byte chunk 2 jj + (l % 4) / 2, offset 8 (l % 2) inside it.
__host__ __device__ __forceinline__ uint32_t pairOffsetF32(uint32_t warp, uint32_t lane, uint32_t jj, uint32_t h) {
  const uint32_t row = warp * 16u + (lane >> 2) + 8u * h;
  const uint32_t quad = lane & 3u;
  return dev::sw128Offset(row, 2u * jj + (quad >> 1)) + (quad & 1u) * 8u;
}

// What one consumer warpgroup's epilogue needs.
struct EpiCtx {
  const CUtensorMap* mapC;  // TMA store
  uint32_t smem;            // this warpgroup's staging area (TMA store)
  uint32_t barrierId;       // named barrier of this warpgroup
  uint32_t tid;             // thread in the warpgroup, 0..127
  uint32_t chunks;          // staging chunks used so far (selects the buffer)
  int outType;
  int64_t row0, col0;       // first row / column of this warpgroup's 64 x BN part
  int64_t M, N;             // bounds (register epilogues)
  void* C;                  // register epilogues
  int64_t ldc;
  const void* bias = nullptr;  // [N], added in fp32 before the conversion (null: none)
  int biasType = 0;            // mkcclDataType_t of bias
};

// bias[col] in fp32, 0 past N (odd N: the last pair's second column).
__device__ __forceinline__ float biasAt(const EpiCtx& c, int64_t col) {
  if (col >= c.N) return 0.f;
  if (c.biasType == mkcclFloat32) return __ldg(static_cast<const float*>(c.bias) + col);
  const unsigned short h = __ldg(static_cast<const unsigned short*>(c.bias) + col);
  return c.biasType == mkcclFloat16 ? __half2float(__ushort_as_half(h)) : __uint_as_float(uint32_t(h) << 16);
}
// The bias of columns col, col + 1, or zeros when there is none (kBias false: compiled out).
template <bool kBias>
__device__ __forceinline__ float2 biasPair(const EpiCtx& c, int64_t col) {
  if constexpr (!kBias) return make_float2(0.f, 0.f);
  return make_float2(biasAt(c, col), biasAt(c, col + 1));
}

// Register stores of column groups [j0, BN / 8) of a warpgroup's 64 x BN part: thread (warp w,
// lane l) owns rows 16w + l/4 (+8) and column pairs 8j + 2(l%4). Bounds-checked pairs; kAdd adds
// (red.global.add: v2.f32, bf16x2, f16x2). The register epilogues store every group; the TMA store
// the groups past its last whole chunk (widths off 64 columns).
template <bool kAdd, class T>
__device__ __forceinline__ void regPut(T* p, float a, float b, bool both) {
  if constexpr (sizeof(T) == 4) {
    if (both) {
      if constexpr (kAdd) dev::redAddF32x2(reinterpret_cast<float*>(p), a, b);
      else *reinterpret_cast<float2*>(p) = make_float2(a, b);
    } else {
      if constexpr (kAdd) dev::redAddF32(reinterpret_cast<float*>(p), a);
      else *reinterpret_cast<float*>(p) = a;
    }
  } else {
    constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
    if (both) {
      if constexpr (kAdd) {
        if constexpr (kBf16) dev::redAddBf16x2(p, dev::packBf16x2(a, b));
        else dev::redAddF16x2(p, dev::packF16x2(a, b));
      } else {
        *reinterpret_cast<uint32_t*>(p) = kBf16 ? dev::packBf16x2(a, b) : dev::packF16x2(a, b);
      }
    } else {
      // 16-bit adds need an even N (the host guarantees it: 16-byte row pitches make N a
      // multiple of 8): a lone 16-bit red is a CAS loop that, unrolled here, spills.
      if constexpr (!kAdd) {
        if constexpr (kBf16) *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(a);
        else *reinterpret_cast<__half*>(p) = __float2half_rn(a);
      }
    }
  }
}

template <class Cfg, class T, bool kAdd, int j0 = 0>
__device__ __forceinline__ void regStoreGroups(const float (&acc)[Cfg::kAcc], const EpiCtx& c) {
  const uint32_t warp = c.tid >> 5, lane = c.tid & 31u;
  const int64_t rowTop = c.row0 + warp * 16 + (lane >> 2);
  const int64_t colBase = c.col0 + 2 * (lane & 3u);
  T* out = static_cast<T*>(c.C);
#pragma unroll
  for (int j = j0; j < Cfg::BN / 8; ++j) {
    const int64_t col = colBase + 8 * j;
    if (col >= c.N) break;  // columns only grow with j
    const bool both = col + 1 < c.N;
    float2 b = make_float2(0.f, 0.f);
    if (!kAdd && c.bias != nullptr) b = biasPair<true>(c, col);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = rowTop + 8 * h;
      if (row < c.M) regPut<kAdd, T>(out + row * c.ldc + col, acc[4 * j + 2 * h] + b.x, acc[4 * j + 2 * h + 1] + b.y, both);
    }
  }
}

struct EpilogueTmaStore {
  // One chunk: 64 rows x 128 bytes (64 bf16/fp16 or 32 fp32 columns), the TMA box of C.
  static constexpr uint32_t kChunkBytes = 64 * 128;
  template <int kConsumers>
  static constexpr uint32_t smemBytes() {
    return kConsumers * 2 * kChunkBytes;
  }

  template <class Cfg>
  __device__ __forceinline__ static void store(const float (&acc)[Cfg::kAcc], EpiCtx& c) {
    // The bias is a second instantiation, so that the stores without one stay as they were.
    if (c.bias != nullptr) {
      storeAs<Cfg, true>(acc, c);
    } else {
      storeAs<Cfg, false>(acc, c);
    }
  }

  // The warpgroup's staging buffer for its chunk number `chunks` (two, alternating), once the bulk
  // operation issued from it two chunks ago has read it. Also the fused GEMM+RS epilogues'.
  __device__ __forceinline__ static uint32_t chunkBuffer(uint32_t smem, uint32_t barrierId, uint32_t tid,
                                                         uint32_t chunks) {
    if (tid == 0) dev::bulkWaitRead<1>();
    dev::namedBarrierSync(barrierId, 128);
    return smem + (chunks & 1u) * kChunkBytes;
  }

  // Makes this warpgroup's stores of the tile complete and visible before a tile hook (thread 0).
  __device__ __forceinline__ static void complete(EpiCtx& c) {
    if (c.tid == 0) {
      dev::bulkWait<0>();
      dev::fenceProxyAsyncGlobal();
      __threadfence_system();
    }
  }
  // Before the CTA exits: the last stores must have finished reading shared memory (and writing).
  __device__ __forceinline__ static void finish(EpiCtx& c) {
    if (c.tid == 0) dev::bulkWait<0>();
  }

 private:
  // Waits until the buffer about to be written is no longer read by an earlier store.
  __device__ __forceinline__ static uint32_t acquireBuffer(EpiCtx& c) {
    return chunkBuffer(c.smem, c.barrierId, c.tid, c.chunks);
  }
  __device__ __forceinline__ static void storeBuffer(EpiCtx& c, uint32_t buf, int64_t col) {
    dev::fenceProxyAsyncSmem();  // our st.shared / stmatrix before the TMA (async proxy) read
    dev::namedBarrierSync(c.barrierId, 128);
    if (c.tid == 0) {
      dev::tmaStore2d(c.mapC, buf, static_cast<int32_t>(col), static_cast<int32_t>(c.row0));
      dev::bulkCommit();
    }
    ++c.chunks;
  }

  template <class Cfg, bool kBias>
  __device__ __forceinline__ static void storeAs(const float (&acc)[Cfg::kAcc], EpiCtx& c) {
    if (c.outType == mkcclFloat32)
      store32<Cfg, kBias>(acc, c);
    else if (c.outType == mkcclFloat16)
      store16<Cfg, false, kBias>(acc, c);
    else
      store16<Cfg, true, kBias>(acc, c);
  }

  // bf16 / fp16: 64 columns per chunk, one stmatrix.x4 per 16 x 16 piece of a warp. Matrix i of
  // the x4 is (column group j + i / 2, row half i % 2); the bias goes by column group.
  template <class Cfg, bool kBf16, bool kBias>
  __device__ __forceinline__ static void store16(const float (&acc)[Cfg::kAcc], EpiCtx& c) {
    const uint32_t warp = c.tid >> 5, lane = c.tid & 31u;
    const int64_t colLane = c.col0 + 2 * (lane & 3u);
#pragma unroll
    for (int ch = 0; ch < Cfg::BN / 64; ++ch) {
      const uint32_t buf = acquireBuffer(c);
#pragma unroll
      for (int jj = 0; jj < 8; jj += 2) {
        const int j = ch * 8 + jj;
        const float2 b0 = biasPair<kBias>(c, colLane + 8 * j), b1 = biasPair<kBias>(c, colLane + 8 * (j + 1));
        uint32_t r[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 b = i < 2 ? b0 : b1;
          const float lo = acc[4 * j + 2 * i] + b.x, hi = acc[4 * j + 2 * i + 1] + b.y;
          r[i] = kBf16 ? dev::packBf16x2(lo, hi) : dev::packF16x2(lo, hi);
        }
        dev::stmatrixX4(buf + stmatrixOffset(warp, lane, static_cast<uint32_t>(jj)), r[0], r[1], r[2], r[3]);
      }
      storeBuffer(c, buf, c.col0 + ch * 64);
    }
    if constexpr (Cfg::BN % 64 != 0)  // the columns past the last whole chunk
      regStoreGroups<Cfg, std::conditional_t<kBf16, __nv_bfloat16, __half>, false, Cfg::BN / 64 * 8>(acc, c);
  }

  // fp32: 32 columns per chunk, 8-byte shared stores (two wavefronts per warp: no conflicts).
  template <class Cfg, bool kBias>
  __device__ __forceinline__ static void store32(const float (&acc)[Cfg::kAcc], EpiCtx& c) {
    const uint32_t warp = c.tid >> 5, lane = c.tid & 31u;
    const int64_t colLane = c.col0 + 2 * (lane & 3u);
#pragma unroll
    for (int ch = 0; ch < Cfg::BN / 32; ++ch) {
      const uint32_t buf = acquireBuffer(c);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int j = ch * 4 + jj;
        const float2 b = biasPair<kBias>(c, colLane + 8 * j);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          dev::stSharedV2F32(buf + pairOffsetF32(warp, lane, static_cast<uint32_t>(jj), static_cast<uint32_t>(h)),
                             acc[4 * j + 2 * h] + b.x, acc[4 * j + 2 * h + 1] + b.y);
      }
      storeBuffer(c, buf, c.col0 + ch * 32);
    }
    if constexpr (Cfg::BN % 32 != 0) regStoreGroups<Cfg, float, false, Cfg::BN / 32 * 4>(acc, c);
  }
};

// Register epilogues: every column group from registers (regStoreGroups). Row pitch ldc must be
// even (pairs are 4/8-byte aligned); EpilogueRegAdd with a 16-bit output also needs an even N.
template <bool kAdd>
struct EpilogueRegBase {
  template <int kConsumers>
  static constexpr uint32_t smemBytes() {
    return 0;
  }

  template <class Cfg>
  __device__ __forceinline__ static void store(const float (&acc)[Cfg::kAcc], EpiCtx& c) {
    if (c.outType == mkcclFloat32)
      regStoreGroups<Cfg, float, kAdd>(acc, c);
    else if (c.outType == mkcclFloat16)
      regStoreGroups<Cfg, __half, kAdd>(acc, c);
    else
      regStoreGroups<Cfg, __nv_bfloat16, kAdd>(acc, c);
  }
  // (A bias, if any, is added by the register store only: an add epilogue reduces partials.)
  // Every thread fences its own stores; then one thread may publish.
  __device__ __forceinline__ static void complete(EpiCtx& c) {
    __threadfence_system();
    dev::namedBarrierSync(c.barrierId, 128);
  }
  __device__ __forceinline__ static void finish(EpiCtx&) {}
};

using EpilogueRegStore = EpilogueRegBase<false>;
using EpilogueRegAdd = EpilogueRegBase<true>;

}  // namespace mkccl
