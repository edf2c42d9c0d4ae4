#include "attn_ref.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <sstream>

namespace mkccl {
namespace test {

namespace {

template <class T>
__device__ float ld(const T* p, size_t i);
template <>
__device__ float ld<__nv_bfloat16>(const __nv_bfloat16* p, size_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ float ld<__half>(const __half* p, size_t i) {
  return __half2float(p[i]);
}

// One warp per (b, h, i); lane l holds dims l, l + 32, ... (d / 32 of them).
template <class T>
__global__ void refKernel(const T* Q, const T* K, const T* V, float* O, float* lse, int B, int sq, int skv, int hq,
                          int hkv, int d, float scale, int causal, int qPos0) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= static_cast<int64_t>(B) * hq * sq) return;
  const int i = static_cast<int>(row % sq);
  const int h = static_cast<int>((row / sq) % hq);
  const int b = static_cast<int>(row / (static_cast<int64_t>(sq) * hq));
  const int hk = h / (hq / hkv);
  const int per = d / 32;
  float q[4], o[4] = {0, 0, 0, 0};
  for (int e = 0; e < per; ++e) q[e] = ld(Q, ((static_cast<size_t>(b) * sq + i) * hq + h) * d + lane + 32 * e);
  float m = -INFINITY, l = 0.0f;
  const int64_t pos = static_cast<int64_t>(qPos0) + i;
  const int n = causal ? static_cast<int>(pos + 1 < skv ? (pos + 1 > 0 ? pos + 1 : 0) : skv) : skv;
  for (int j = 0; j < n; ++j) {
    float s = 0.0f;
    const size_t kb = ((static_cast<size_t>(b) * skv + j) * hkv + hk) * d + lane;
    for (int e = 0; e < per; ++e) s += q[e] * ld(K, kb + 32 * e);
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    s *= scale;
    const float mn = fmaxf(m, s);
    const float corr = expf(m - mn), p = expf(s - mn);
    l = l * corr + p;
    for (int e = 0; e < per; ++e) o[e] = o[e] * corr + p * ld(V, kb + 32 * e);
    m = mn;
  }
  const size_t ob = ((static_cast<size_t>(b) * sq + i) * hq + h) * d + lane;
  for (int e = 0; e < per; ++e) O[ob + 32 * e] = l > 0 ? o[e] / l : 0.0f;
  if (lane == 0) lse[(static_cast<size_t>(b) * hq + h) * sq + i] = l > 0 ? m + logf(l) : -INFINITY;
}

}  // namespace

void refAttention(const void* Q, const void* K, const void* V, float* O, float* lse, int B, int sq, int skv, int hq,
                  int hkv, int d, float scale, int causal, int qPos0, mkcclDataType_t t, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(B) * hq * sq;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((rows * 32 + threads - 1) / threads);
  if (t == mkcclBfloat16)
    refKernel<<<blocks, threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(Q), static_cast<const __nv_bfloat16*>(K),
                                              static_cast<const __nv_bfloat16*>(V), O, lse, B, sq, skv, hq, hkv, d, scale,
                                              causal, qPos0);
  else
    refKernel<<<blocks, threads, 0, stream>>>(static_cast<const __half*>(Q), static_cast<const __half*>(K),
                                              static_cast<const __half*>(V), O, lse, B, sq, skv, hq, hkv, d, scale,
                                              causal, qPos0);
}

AttnErr compareAttention(const std::vector<double>& gotO, const std::vector<float>& refO,
                         const std::vector<float>& gotLse, const std::vector<float>& refLse, double oTol,
                         double lseTol) {
  AttnErr e;
  double refMax = 1e-30;
  for (float v : refO) refMax = fmax(refMax, fabs(v));
  for (size_t i = 0; i < refO.size() && i < gotO.size(); ++i) {
    const double d = fabs(gotO[i] - refO[i]);
    if (!(d <= oTol * refMax)) {
      if (e.oWrong++ == 0) {
        std::ostringstream os;
        os << "O[" << i << "] = " << gotO[i] << ", reference " << refO[i];
        e.first = os.str();
      }
    }
    if (d == d) e.oRel = fmax(e.oRel, d / refMax);
  }
  for (size_t i = 0; i < gotLse.size() && i < refLse.size(); ++i) {
    const double g = gotLse[i], r = refLse[i];
    const bool same = (std::isinf(r) && g == r) || fabs(g - r) <= lseTol;
    if (!same) {
      if (e.lseWrong++ == 0 && e.first.empty()) {
        std::ostringstream os;
        os << "LSE[" << i << "] = " << g << ", reference " << r;
        e.first = os.str();
      }
    }
    if (!std::isinf(r) && g == g) e.lseAbs = fmax(e.lseAbs, fabs(g - r));
  }
  return e;
}

}  // namespace test
}  // namespace mkccl
