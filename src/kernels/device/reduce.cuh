// Element-wise reductions of several buffers into one or more outputs, block-wide.
//
// Element types and their accumulators: half/bf16 accumulate in fp32 (one rounding at the end,
// whatever the number of inputs); fp32/fp64 in themselves; integers in their own type (sum and
// product wrap as in C, as NCCL does). Inputs are combined in the order given, so every rank that
// reduces the same inputs in the same order gets bit-identical results.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace mkccl {
namespace dev {

// ---- element <-> accumulator ----------------------------------------------------------------

template <typename T> struct Elem {  // integers and fp32/fp64: accumulate in the type itself
  using Acc = T;
  __device__ static Acc toAcc(T v) { return v; }
  __device__ static T fromAcc(Acc v) { return v; }
};
template <> struct Elem<__half> {
  using Acc = float;
  __device__ static Acc toAcc(__half v) { return __half2float(v); }
  __device__ static __half fromAcc(Acc v) { return __float2half_rn(v); }
};
template <> struct Elem<__nv_bfloat16> {
  using Acc = float;
  __device__ static Acc toAcc(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 fromAcc(Acc v) { return __float2bfloat16_rn(v); }
};

// ---- operators (on accumulators) ------------------------------------------------------------

struct OpSum {
  template <typename A> __device__ static A apply(A a, A b) { return (A)(a + b); }
};
struct OpProd {
  template <typename A> __device__ static A apply(A a, A b) { return (A)(a * b); }
};
struct OpMax {
  template <typename A> __device__ static A apply(A a, A b) { return b > a ? b : a; }
};
struct OpMin {
  template <typename A> __device__ static A apply(A a, A b) { return b < a ? b : a; }
};

// Average = sum, then divided by the number of ranks (integers: C division of the wrapped sum).
template <typename A> __device__ __forceinline__ A divideBy(A v, int n) { return (A)(v / (A)n); }

// ---- raw bits <-> elements ------------------------------------------------------------------

// The bits of element i of a 16-byte word (i is a compile-time constant after unrolling).
template <typename T>
__device__ __forceinline__ T elemOf(const uint4& v, int i) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if constexpr (sizeof(T) == 8) {
    const uint64_t b = ((uint64_t)w[2 * i + 1] << 32) | w[2 * i];
    T r;
    memcpy(&r, &b, 8);
    return r;
  } else if constexpr (sizeof(T) == 4) {
    T r;
    memcpy(&r, &w[i], 4);
    return r;
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short b = (unsigned short)(w[i / 2] >> (16 * (i % 2)));
    T r;
    memcpy(&r, &b, 2);
    return r;
  } else {
    const unsigned char b = (unsigned char)(w[i / 4] >> (8 * (i % 4)));
    T r;
    memcpy(&r, &b, 1);
    return r;
  }
}

template <typename T>
__device__ __forceinline__ void setElem(uint32_t (&w)[4], int i, T x) {
  if constexpr (sizeof(T) == 8) {
    uint64_t b;
    memcpy(&b, &x, 8);
    w[2 * i] = (uint32_t)b;
    w[2 * i + 1] = (uint32_t)(b >> 32);
  } else if constexpr (sizeof(T) == 4) {
    memcpy(&w[i], &x, 4);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short b;
    memcpy(&b, &x, 2);
    const int sh = 16 * (i % 2);
    w[i / 2] = (w[i / 2] & ~(0xffffu << sh)) | ((uint32_t)b << sh);
  } else {
    unsigned char b;
    memcpy(&b, &x, 1);
    const int sh = 8 * (i % 4);
    w[i / 4] = (w[i / 4] & ~(0xffu << sh)) | ((uint32_t)b << sh);
  }
}

template <typename T>
__device__ __forceinline__ T loadElem(const char* p) {
  T r;
  if constexpr (sizeof(T) == 8) {
    const unsigned long long b = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    memcpy(&r, &b, 8);
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int b = __ldcg(reinterpret_cast<const unsigned int*>(p));
    memcpy(&r, &b, 4);
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short b = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&r, &b, 2);
  } else {
    const unsigned char b = __ldcg(reinterpret_cast<const unsigned char*>(p));
    memcpy(&r, &b, 1);
  }
  return r;
}

// ---- block-wide reduction -------------------------------------------------------------------

// Vectors of 16 bytes per thread and pass (fewer for 1-byte types, whose accumulators take 16
// registers per vector); the next input's vectors load while the current ones are combined.
template <typename T> constexpr int reduceUnroll() { return sizeof(T) == 1 ? 2 : 4; }

// outs[o][i] = op(ins[0][i], ..., ins[nin-1][i]) for i < nelem (then /avgDiv when avgDiv > 0).
// ins/outs are block-visible arrays (shared memory), nin >= 1. 16-byte vectors when every pointer
// is 16-byte aligned, element by element otherwise and for the tail (pointers must be aligned to
// the element size). No barrier inside.
template <typename T, typename Op>
__device__ __forceinline__ void blockReduce(const char* const* ins, int nin, char* const* outs, int nout, size_t nelem,
                                            int avgDiv) {
  using E = Elem<T>;
  using A = typename E::Acc;
  constexpr int V = 16 / sizeof(T);
  constexpr int U = reduceUnroll<T>();
  uintptr_t phase = 0;
  for (int q = 0; q < nin; ++q) phase |= reinterpret_cast<uintptr_t>(ins[q]);
  for (int o = 0; o < nout; ++o) phase |= reinterpret_cast<uintptr_t>(outs[o]);
  const size_t nvec = (phase & 15) == 0 ? nelem / V : 0;
  const size_t stride = blockDim.x;

  for (size_t i0 = threadIdx.x; i0 < nvec; i0 += U * stride) {
    uint4 cur[U], nxt[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t i = i0 + u * stride;
      if (i < nvec) cur[u] = __ldcg(reinterpret_cast<const uint4*>(ins[0]) + i);
      if (i < nvec && nin > 1) nxt[u] = __ldcg(reinterpret_cast<const uint4*>(ins[1]) + i);
    }
    A acc[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[u][e] = E::toAcc(elemOf<T>(cur[u], e));
    for (int q = 1; q < nin; ++q) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        cur[u] = nxt[u];
        const size_t i = i0 + u * stride;
        if (i < nvec && q + 1 < nin) nxt[u] = __ldcg(reinterpret_cast<const uint4*>(ins[q + 1]) + i);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[u][e] = Op::apply(acc[u][e], E::toAcc(elemOf<T>(cur[u], e)));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t i = i0 + u * stride;
      if (i >= nvec) continue;
      uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
      for (int e = 0; e < V; ++e) setElem<T>(w, e, E::fromAcc(avgDiv > 0 ? divideBy<A>(acc[u][e], avgDiv) : acc[u][e]));
      const uint4 r = make_uint4(w[0], w[1], w[2], w[3]);
      for (int o = 0; o < nout; ++o) reinterpret_cast<uint4*>(outs[o])[i] = r;
    }
  }

  for (size_t i = nvec * V + threadIdx.x; i < nelem; i += stride) {
    A acc = E::toAcc(loadElem<T>(ins[0] + i * sizeof(T)));
    for (int q = 1; q < nin; ++q) acc = Op::apply(acc, E::toAcc(loadElem<T>(ins[q] + i * sizeof(T))));
    const T r = E::fromAcc(avgDiv > 0 ? divideBy<A>(acc, avgDiv) : acc);
    for (int o = 0; o < nout; ++o) *reinterpret_cast<T*>(outs[o] + i * sizeof(T)) = r;
  }
}

}  // namespace dev
}  // namespace mkccl
