// The online softmax of one consumer warpgroup, in registers.
//
// A thread holds two rows of the warpgroup's 64 (wgmma D fragment, wgmma.cuh): row 16 w + l/4
// ("half" 0) and the row 8 below ("half" 1); register i of a 64 x N fp32 tile belongs to half
// (i / 2) % 2 and column 8 (i / 4) + 2 (l % 4) + i % 2. Row statistics are reduced over the four
// lanes of a quad (shuffles xor 1 and 2).
//
// Scores are kept in the log2 domain: with c = scale x log2(e), p = 2^(c s - c m) where m is the
// running row maximum. The running sum l is a per-thread partial (a quarter of the row's
// columns), reduced over the quad once at the end.
#pragma once
#include <math.h>
#include <stdint.h>
#include "kernels/device/store.cuh"

namespace mkccl {
namespace attn {

__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float fastLog2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <int N>
__device__ __forceinline__ void fenceRegs(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Keys at or past `limit[half]` (block-relative column) are masked: -inf. Column of register i is
// 8 (i / 4) + 2 (l % 4) + i % 2; the caller folds 2 (l % 4) into the limits.
template <int kAcc>
__device__ __forceinline__ void maskScores(float (&s)[kAcc], const int (&limit)[2]) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const int col = 8 * (i / 4) + (i % 2);
    if (col >= limit[(i / 2) % 2]) s[i] = -INFINITY;
  }
}

// Per-row state of the online softmax.
struct RowState {
  float m[2];  // running maximum (raw scores), -inf before any key
  float l[2];  // this thread's part of the running sum
};

// New block of scores s (masked): raises the maxima, turns s into 2^(c s - c m) in place, returns
// the factors by which the older sums and outputs must be scaled (0 when there were none).
template <int kAcc>
__device__ __forceinline__ void softmaxBlock(float (&s)[kAcc], RowState& st, float c, float (&corr)[2]) {
  float mx[2] = {st.m[0], st.m[1]};
#pragma unroll
  for (int i = 0; i < kAcc; ++i) mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], s[i]);
  float base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = quadMax(mx[h]);
    // A row with no key yet keeps m = -inf: every p is 2^-inf = 0 against a base of 0.
    base[h] = mx[h] == -INFINITY ? 0.0f : mx[h] * c;
    corr[h] = fastExp2(st.m[h] * c - base[h]);
    st.m[h] = mx[h];
  }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    s[i] = fastExp2(fmaf(s[i], c, -base[(i / 2) % 2]));
    sum[(i / 2) % 2] += s[i];
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) st.l[h] = fmaf(st.l[h], corr[h], sum[h]);
}

template <int kAcc>
__device__ __forceinline__ void scaleRows(float (&o)[kAcc], const float (&f)[2]) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) o[i] *= f[(i / 2) % 2];
}

// P (16-bit pairs, in register order: the A fragments of P . V) from the probabilities s.
template <bool kBf16, int kAcc>
__device__ __forceinline__ void packP(const float (&s)[kAcc], uint32_t (&p)[kAcc / 2]) {
#pragma unroll
  for (int i = 0; i < kAcc / 2; ++i)
    p[i] = kBf16 ? dev::packBf16x2(s[2 * i], s[2 * i + 1]) : dev::packF16x2(s[2 * i], s[2 * i + 1]);
}

// End of a tile: O / l and the natural-log LSE = m scale + ln(l) per row; a row that saw no key
// gets O = 0 and LSE = -inf.
template <int kAcc>
__device__ __forceinline__ void finishRows(float (&o)[kAcc], RowState& st, float c, float (&lse)[2]) {
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = quadSum(st.l[h]);
    const bool any = l > 0.0f;
    inv[h] = any ? 1.0f / l : 0.0f;
    lse[h] = any ? (st.m[h] * c + fastLog2(l)) * 0.69314718056f : -INFINITY;
  }
  scaleRows(o, inv);
}

// Weights that merge two normalised partials (O_a, LSE_a) and (O_b, LSE_b) of the same rows in
// fp32: O = w_a O_a + w_b O_b, LSE = log(e^LSE_a + e^LSE_b); rows where both are empty get zero
// weights and LSE = -inf. lseA is replaced by the merged LSE.
__device__ __forceinline__ void mergeWeights(float (&lseA)[2], const float (&lseB)[2], float (&wa)[2], float (&wb)[2]) {
  constexpr float kLog2e = 1.4426950408889634f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mx = fmaxf(lseA[h], lseB[h]);
    if (mx == -INFINITY) {
      wa[h] = 0.0f;
      wb[h] = 0.0f;
      lseA[h] = -INFINITY;
    } else {
      const float a = exp2f((lseA[h] - mx) * kLog2e), b = exp2f((lseB[h] - mx) * kLog2e);
      const float inv = 1.0f / (a + b);
      wa[h] = a * inv;
      wb[h] = b * inv;
      lseA[h] = mx + logf(a + b);
    }
  }
}

}  // namespace attn
}  // namespace mkccl
