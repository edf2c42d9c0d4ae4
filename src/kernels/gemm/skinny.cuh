// The skinny GEMM: C[M, N] = A[M, K] . W[N, K]^T for decode-sized M (at most 32 rows), where the
// time is reading W once. The persistent engine's 64-row wgmma tiles, TMA boxes and split-K
// partials cost a few microseconds per call that dominate there (docs/PERFORMANCE.md: the first
// data ~2.7 us after a CTA starts, the parts' sum ~3 us); this kernel has none of them.
//
// Operands swapped: W's rows are the mma's M side (16 per warp), the tokens its N side (8 per
// mma.sync m16n8k16). Each thread loads W and the tokens straight from global memory into the mma
// fragments with 16-byte loads: thread (g = lane / 4, t = lane % 4) loads k = 8t .. 8t + 7 and
// 32 + 8t .. 32 + 8t + 7 of W rows g and g + 8 and of token g, one 64-wide k-chunk at a time. The
// fragments' k slots are thereby a permutation of the chunk's k (slot pair 2t of step j is k pair
// 8t + 2j of the first or second half), the same for W and the tokens, so the sum over k is the
// GEMM's. The 8 warps of a CTA split K and share their 16 x M sums through shared memory; nothing
// crosses CTAs, so the result is deterministic and there is no workspace.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <type_traits>
#include "kernels/device/wgmma.cuh"
#include "mkccl.h"

namespace mkccl {
namespace skinny {

struct Args {
  const void* A;  // [M][lda]
  const void* W;  // [N][ldw]
  void* C;        // [M][ldc] of outType
  const void* bias;  // [N] of biasType, or null
  int64_t M, N, K, lda, ldw, ldc;
  int outType, biasType;
};

constexpr int kWarps = 8;    // split K inside the CTA
constexpr int kRows = 16;    // W rows (output columns) per CTA
constexpr int kChunk = 64;   // k per load step of a warp
constexpr int kMaxRows = 32;  // tokens: up to 4 groups of 8

__device__ __forceinline__ uint4 loadStream(const void* p) {  // W: read once, keep it out of L1
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <class In>
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same<In, dev::Bf16>::value)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float loadScalar(const void* p, int64_t i, int type) {
  if (type == mkcclFloat32) return static_cast<const float*>(p)[i];
  const unsigned short h = static_cast<const unsigned short*>(p)[i];
  return type == mkcclFloat16 ? __half2float(__ushort_as_half(h)) : __uint_as_float(uint32_t(h) << 16);
}

__device__ __forceinline__ void storeScalar(void* p, int64_t i, int type, float v) {
  if (type == mkcclFloat32) static_cast<float*>(p)[i] = v;
  else if (type == mkcclFloat16) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// kGroups groups of 8 tokens (M <= 8 kGroups); kUnroll k-chunks per stage (the next stage's loads
// are in flight during a stage's mma). Two CTAs per SM (128 registers) up to 16 tokens.
template <class In, int kGroups, int kUnroll>
__global__ void __launch_bounds__(kWarps * 32, kGroups < 4 ? 2 : 1) skinnyGemmKernel(const __grid_constant__ Args a) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t chunks = (a.K + kChunk - 1) / kChunk, per = (chunks + kWarps - 1) / kWarps;
  const int64_t cBegin = warp * per, cEnd = cBegin + per < chunks ? cBegin + per : chunks;

  const bool row0 = n0 + g < a.N, row1 = n0 + g + 8 < a.N;
  const char* w0 = static_cast<const char*>(a.W) + (row0 ? (n0 + g) * a.ldw * 2 : 0);
  const char* w1 = static_cast<const char*>(a.W) + (row1 ? (n0 + g + 8) * a.ldw * 2 : 0);
  const char* x[kGroups];
  bool tok[kGroups];
#pragma unroll
  for (int q = 0; q < kGroups; ++q) {
    tok[q] = 8 * q + g < a.M;
    x[q] = static_cast<const char*>(a.A) + (tok[q] ? (8 * q + g) * a.lda * 2 : 0);
  }

  float acc[kGroups][4];
#pragma unroll
  for (int q = 0; q < kGroups; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.f;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

  // A stage: kUnroll k-chunks of W (rows g, g + 8) and of the tokens. k = 8t.. and 32 + 8t..: whole
  // 16-byte pieces (K is a multiple of 8). Every load is issued (from k = 0 where it lies past the
  // warp's range or K) and its value zeroed after, and the next stage is loaded before this one's
  // mma: ptxas would otherwise sink each load next to its mma and keep only one chunk in flight.
  struct Stage {
    uint4 w[kUnroll][4], b[kUnroll][kGroups][2];
  };
  auto load = [&](int64_t c, Stage& st) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k0 = (c + u) * kChunk + 8 * t, k1 = k0 + 32;
      const bool in0 = c + u < cEnd && k0 < a.K, in1 = c + u < cEnd && k1 < a.K;
      const int64_t o0 = in0 ? k0 * 2 : 0, o1 = in1 ? k1 * 2 : 0;
      st.w[u][0] = loadStream(w0 + o0);
      st.w[u][1] = loadStream(w0 + o1);
      st.w[u][2] = loadStream(w1 + o0);
      st.w[u][3] = loadStream(w1 + o1);
      if (!(row0 && in0)) st.w[u][0] = zero;
      if (!(row0 && in1)) st.w[u][1] = zero;
      if (!(row1 && in0)) st.w[u][2] = zero;
      if (!(row1 && in1)) st.w[u][3] = zero;
#pragma unroll
      for (int q = 0; q < kGroups; ++q) {
        st.b[u][q][0] = __ldg(reinterpret_cast<const uint4*>(x[q] + o0));
        st.b[u][q][1] = __ldg(reinterpret_cast<const uint4*>(x[q] + o1));
        if (!(tok[q] && in0)) st.b[u][q][0] = zero;
        if (!(tok[q] && in1)) st.b[u][q][1] = zero;
      }
    }
  };
  // Fragment A: (row g, slot 2t), (row g + 8, slot 2t), (row g, slot 2t + 8), (row g + 8, slot
  // 2t + 8); fragment B: (slot 2t, token g), (slot 2t + 8, token g). Step j takes the pairs
  // 2 (j % 2) and 2 (j % 2) + 1 of the piece j / 2.
  auto compute = [&](const Stage& st) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int q = 0; q < kGroups; ++q) {
        const uint4 &p0 = st.w[u][0], &p1 = st.w[u][1], &p2 = st.w[u][2], &p3 = st.w[u][3];
        const uint4 &x0 = st.b[u][q][0], &x1 = st.b[u][q][1];
        mma<In>(acc[q], p0.x, p2.x, p0.y, p2.y, x0.x, x0.y);
        mma<In>(acc[q], p0.z, p2.z, p0.w, p2.w, x0.z, x0.w);
        mma<In>(acc[q], p1.x, p3.x, p1.y, p3.y, x1.x, x1.y);
        mma<In>(acc[q], p1.z, p3.z, p1.w, p3.w, x1.z, x1.w);
      }
  };
  if (cBegin < cEnd) {
    Stage s0, s1;
    load(cBegin, s0);
    for (int64_t c = cBegin;; c += 2 * kUnroll) {
      const bool more = c + kUnroll < cEnd;
      if (more) load(c + kUnroll, s1);
      compute(s0);
      if (!more) break;
      const bool more2 = c + 2 * kUnroll < cEnd;
      if (more2) load(c + 2 * kUnroll, s0);
      compute(s1);
      if (!more2) break;
    }
  }

  // The warps' sums: [warp][group][element][lane] (conflict-free), then each output summed over
  // the warps in order. Element e of lane (g, t): W row g + 8 (e / 2), token 8 q + 2t + e % 2.
  __shared__ float red[kWarps][kGroups][4][32];
#pragma unroll
  for (int q = 0; q < kGroups; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp][q][e][lane] = acc[q][e];
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < kGroups * 128; i += kWarps * 32) {
    const int q = i / 128, e = (i / 32) % 4, l = i % 32;
    const int64_t n = n0 + l / 4 + 8 * (e / 2), m = 8 * q + 2 * (l % 4) + e % 2;
    if (n >= a.N || m >= a.M) continue;
    float s = 0.f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) s += red[v][q][e][l];
    if (a.bias != nullptr) s += loadScalar(a.bias, n, a.biasType);
    storeScalar(a.C, m * a.ldc + n, a.outType, s);
  }
}

}  // namespace skinny
}  // namespace mkccl
