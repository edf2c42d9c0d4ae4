// Block-wide vectorised copies between global buffers (local memory or a peer's mapped workspace).
//
// Every thread of the block calls these with the same arguments. Loads go through L2 only
// (ld.global.cg): staging written by a peer during the kernel must never be served from an L1
// line cached before the flag that guards it was acquired. 16-byte accesses are used when the
// source and destination have the same address phase modulo 16; otherwise the widest width that
// keeps both aligned (8, 4, 2, 1 bytes), so a misaligned user pointer costs speed, never
// correctness.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace mkccl {
namespace dev {

template <int W> struct VecOf;
template <> struct VecOf<16> { using T = uint4; };
template <> struct VecOf<8> { using T = uint2; };
template <> struct VecOf<4> { using T = unsigned int; };
template <> struct VecOf<2> { using T = unsigned short; };
template <> struct VecOf<1> { using T = unsigned char; };

// Loads in flight per thread in the copy loops: enough to cover HBM/NVLink latency at 512 threads.
constexpr int kCopyUnroll = 8;

// dst[0, nvec) = src[0, nvec) in W-byte words, both W-aligned.
template <int W>
__device__ __forceinline__ void copyWords(char* dst, const char* src, size_t nvec) {
  using V = typename VecOf<W>::T;
  V* d = reinterpret_cast<V*>(dst);
  const V* s = reinterpret_cast<const V*>(src);
  const size_t stride = blockDim.x;
  size_t i = threadIdx.x;
  for (; i + (kCopyUnroll - 1) * stride < nvec; i += kCopyUnroll * stride) {
    V r[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) r[u] = __ldcg(s + i + u * stride);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) d[i + u * stride] = r[u];
  }
  for (; i < nvec; i += stride) d[i] = __ldcg(s + i);
}

__device__ __forceinline__ void copyBytewise(char* dst, const char* src, size_t n) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x)
    dst[i] = (char)__ldcg(reinterpret_cast<const unsigned char*>(src) + i);
}

// Widest access width (16..1) that keeps dst and src aligned together.
__device__ __forceinline__ int commonWidth(const void* a, const void* b) {
  const unsigned diff = (unsigned)(reinterpret_cast<uintptr_t>(a) ^ reinterpret_cast<uintptr_t>(b));
  return (diff & 15) == 0 ? 16 : (diff & 7) == 0 ? 8 : (diff & 3) == 0 ? 4 : (diff & 1) == 0 ? 2 : 1;
}

// dst[0, n) = src[0, n). No barrier inside: the caller synchronises before publishing.
__device__ __forceinline__ void blockCopy(char* dst, const char* src, size_t n) {
  if (n == 0) return;
  const int w = commonWidth(dst, src);
  size_t head = (size_t)((w - (reinterpret_cast<uintptr_t>(dst) & (w - 1))) & (w - 1));
  if (head > n) head = n;
  copyBytewise(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  const size_t nvec = n / w;
  switch (w) {
    case 16: copyWords<16>(dst, src, nvec); break;
    case 8: copyWords<8>(dst, src, nvec); break;
    case 4: copyWords<4>(dst, src, nvec); break;
    case 2: copyWords<2>(dst, src, nvec); break;
    default: copyWords<1>(dst, src, nvec); break;
  }
  const size_t done = nvec * (size_t)w;
  copyBytewise(dst + done, src + done, n - done);
}

// Copies src[0, n) to nd destinations with one read of the source (a broadcast push). dsts is a
// block-visible array (shared memory); every dsts[i] and src must be 16-byte aligned.
__device__ __forceinline__ void blockCopyMulti16(char* const* dsts, int nd, const char* src, size_t n) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  const size_t nvec = n / 16, stride = blockDim.x;
  constexpr int U = kCopyUnroll / 2;  // fewer loads in flight: each is stored nd times
  size_t i = threadIdx.x;
  for (; i + (U - 1) * stride < nvec; i += U * stride) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = __ldcg(s + i + u * stride);
    for (int o = 0; o < nd; ++o) {
      uint4* d = reinterpret_cast<uint4*>(dsts[o]);
#pragma unroll
      for (int u = 0; u < U; ++u) d[i + u * stride] = r[u];
    }
  }
  for (; i < nvec; i += stride) {
    const uint4 r = __ldcg(s + i);
    for (int o = 0; o < nd; ++o) reinterpret_cast<uint4*>(dsts[o])[i] = r;
  }
  const size_t done = nvec * 16;
  for (size_t b = done + threadIdx.x; b < n; b += stride) {
    const unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(src) + b);
    for (int o = 0; o < nd; ++o) dsts[o][b] = (char)v;
  }
}

// ---- one thread, up to 8 bytes (the LL protocol's unit) -------------------------------------

// Widest width (8, 4, 2, 1) that divides both the address and the byte count.
__device__ __forceinline__ int unitWidth(const void* p, size_t nb) {
  const unsigned m = (unsigned)reinterpret_cast<uintptr_t>(p) | (unsigned)nb;
  return (m & 7) == 0 ? 8 : (m & 3) == 0 ? 4 : (m & 1) == 0 ? 2 : 1;
}

// Bytes [0, nb) of p (nb in [1, 8]) as the low bytes of a little-endian word; the rest are 0.
// Never reads past p + nb, whatever p's alignment.
__device__ __forceinline__ uint64_t loadUnit(const char* p, size_t nb) {
  const int w = unitWidth(p, nb);
  if (w == 8) return *reinterpret_cast<const uint64_t*>(p);
  uint64_t v = 0;
  for (size_t b = 0; b < nb; b += w) {
    uint64_t x;
    if (w == 4) x = *reinterpret_cast<const uint32_t*>(p + b);
    else if (w == 2) x = *reinterpret_cast<const uint16_t*>(p + b);
    else x = *reinterpret_cast<const uint8_t*>(p + b);
    v |= x << (8 * b);
  }
  return v;
}

// p[0, nb) = the low nb bytes of v.
__device__ __forceinline__ void storeUnit(char* p, uint64_t v, size_t nb) {
  const int w = unitWidth(p, nb);
  if (w == 8) {
    *reinterpret_cast<uint64_t*>(p) = v;
    return;
  }
  for (size_t b = 0; b < nb; b += w) {
    const uint64_t x = v >> (8 * b);
    if (w == 4) *reinterpret_cast<uint32_t*>(p + b) = (uint32_t)x;
    else if (w == 2) *reinterpret_cast<uint16_t*>(p + b) = (uint16_t)x;
    else *reinterpret_cast<uint8_t*>(p + b) = (uint8_t)x;
  }
}

}  // namespace dev
}  // namespace mkccl
