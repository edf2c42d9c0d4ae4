// TMA (cp.async.bulk.tensor) loads and stores of 2-D tiles, and the proxy fences around them.
//
// Tensor maps are encoded on the host (src/ops/gemm/gemm_plan.h: encodeTileMap) and passed as
// `const __grid_constant__ CUtensorMap` kernel parameters; their generic address goes to the
// instructions below. Coordinates are {inner (contiguous) element, row}; boxes that reach past
// the tensor are zero-filled on load and clipped on store, which is how GEMM tails work.
#pragma once
#include <cuda.h>
#include <stdint.h>

namespace mkccl {
namespace dev {

__device__ __forceinline__ uint64_t mapAddr(const CUtensorMap* map) { return reinterpret_cast<uint64_t>(map); }

// Pulls the descriptor into the TMA unit's cache ahead of the first use.
__device__ __forceinline__ void tmaPrefetchMap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(mapAddr(map)) : "memory");
}

// Box at {x, y} into this CTA's shared memory at `dst`; completes `box bytes` on barrier `bar`.
__device__ __forceinline__ void tmaLoad2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t x,
                                          int32_t y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(dst),
      "l"(mapAddr(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// The same box into every CTA of the cluster named in `ctaMask`, at the same shared-memory offset
// `dst` in each; each destination's barrier at offset `bar` receives the complete_tx of its copy.
__device__ __forceinline__ void tmaLoad2dMulticast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t x,
                                                   int32_t y, uint16_t ctaMask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(mapAddr(map)), "r"(x), "r"(y), "r"(bar), "h"(ctaMask)
      : "memory");
}

// 4-D box at {c0 (contiguous), c1, c2, c3} into this CTA's shared memory at `dst`, completing on
// barrier `bar` (e.g. a [B, S, H, D] tensor read as one head's rows: the box's unit dimensions
// collapse, so a box {64, 1, 128, 1} lands as 128 rows of 64 elements, swizzled as the map says).
__device__ __forceinline__ void tmaLoad4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0, int32_t c1,
                                          int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];" ::"r"(dst),
      "l"(mapAddr(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// Shared memory at `src` to the 4-D box at {c0, c1, c2, c3}; tracked by this thread's bulk groups.
__device__ __forceinline__ void tmaStore4d(const CUtensorMap* map, uint32_t src, int32_t c0, int32_t c1, int32_t c2,
                                           int32_t c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   mapAddr(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// Shared memory at `src` to the box at {x, y}; tracked by this thread's bulk groups.
__device__ __forceinline__ void tmaStore2d(const CUtensorMap* map, uint32_t src, int32_t x, int32_t y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(mapAddr(map)),
               "r"(src), "r"(x), "r"(y)
               : "memory");
}
// 1-D bulk copies (no tensor map): `bytes` a multiple of 16, addresses 16-byte aligned. Global
// addresses may be a peer's mapped memory (NVLink), which is how a few threads keep hundreds of
// KiB of stores in flight without spending registers or SM issue slots on them.
// Global -> this CTA's shared memory at `dst`; completes `bytes` on barrier `bar`.
__device__ __forceinline__ void bulkLoad1d(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// This CTA's shared memory at `src` -> global `dst`; tracked by this thread's bulk groups.
__device__ __forceinline__ void bulkStore1d(void* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulkCommit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Until at most N of this thread's committed bulk groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void bulkWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Until at most N of this thread's bulk groups are incomplete (their global writes performed).
template <int N>
__device__ __forceinline__ void bulkWait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// Orders this thread's generic shared-memory writes before later async-proxy reads of them
// (a TMA store, or wgmma reading an operand written with st.shared).
__device__ __forceinline__ void fenceProxyAsyncSmem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Orders async-proxy global writes (completed TMA stores) with later generic accesses, e.g. before
// a flag that tells another GPU the tile has landed.
__device__ __forceinline__ void fenceProxyAsyncGlobal() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

}  // namespace dev
}  // namespace mkccl
