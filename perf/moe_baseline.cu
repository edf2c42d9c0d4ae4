// The unfused MoE baseline's SwiGLU and weighted sum (moe_baseline.h): 8 elements per thread
// (16-byte loads) where the row length allows it, one otherwise.
#include "moe_baseline.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace mkccl {
namespace perf {
namespace {

template <class T>
__device__ __forceinline__ float toF(T v) {
  return static_cast<float>(v);
}
template <class T>
__device__ __forceinline__ T fromF(float v) {
  return static_cast<T>(v);
}

// V elements of T loaded and stored as one access (16 bytes at V = 8).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <class T, int V>
__global__ void swigluKernel(const T* __restrict__ h, T* __restrict__ act, size_t rows, size_t I) {
  const size_t perRow = I / V, n = rows * perRow;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const size_t r = i / perRow, c = (i % perRow) * V;
    const Pack<T, V> g = *reinterpret_cast<const Pack<T, V>*>(h + r * 2 * I + c);
    const Pack<T, V> u = *reinterpret_cast<const Pack<T, V>*>(h + r * 2 * I + I + c);
    Pack<T, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float x = toF(g.v[j]);
      o.v[j] = fromF<T>(x / (1.f + __expf(-x)) * toF(u.v[j]));
    }
    *reinterpret_cast<Pack<T, V>*>(act + r * I + c) = o;
  }
}

template <class T, int V>
__global__ void weightedSumKernel(const T* __restrict__ rows, const int32_t* __restrict__ rowOf,
                                  const float* __restrict__ w, T* __restrict__ out, size_t T_, int k, size_t H) {
  const size_t perRow = H / V, n = T_ * perRow;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const size_t tok = i / perRow, c = (i % perRow) * V;
    float acc[V] = {};
    for (int j = 0; j < k; ++j) {
      const int32_t r = rowOf[tok * k + j];
      if (r < 0) continue;
      const float wt = w[tok * k + j];
      const Pack<T, V> src = *reinterpret_cast<const Pack<T, V>*>(rows + (size_t)r * H + c);
#pragma unroll
      for (int q = 0; q < V; ++q) acc[q] += wt * toF(src.v[q]);
    }
    Pack<T, V> o;
#pragma unroll
    for (int q = 0; q < V; ++q) o.v[q] = fromF<T>(acc[q]);
    *reinterpret_cast<Pack<T, V>*>(out + tok * H + c) = o;
  }
}

int blocksFor(size_t n) {
  const size_t b = (n + 255) / 256;
  return (int)(b < 4096 ? (b ? b : 1) : 4096);
}

template <class T>
void swiglu(const void* h, void* act, size_t rows, size_t I, cudaStream_t s) {
  if (I % 8 == 0)
    swigluKernel<T, 8><<<blocksFor(rows * I / 8), 256, 0, s>>>((const T*)h, (T*)act, rows, I);
  else
    swigluKernel<T, 1><<<blocksFor(rows * I), 256, 0, s>>>((const T*)h, (T*)act, rows, I);
}

template <class T>
void weightedSum(const void* rows, const int32_t* rowOf, const float* w, void* out, size_t T_, int k, size_t H,
                 cudaStream_t s) {
  if (H % 8 == 0)
    weightedSumKernel<T, 8><<<blocksFor(T_ * H / 8), 256, 0, s>>>((const T*)rows, rowOf, w, (T*)out, T_, k, H);
  else
    weightedSumKernel<T, 1><<<blocksFor(T_ * H), 256, 0, s>>>((const T*)rows, rowOf, w, (T*)out, T_, k, H);
}

}  // namespace

void moeSwiglu(const void* h, void* act, size_t rows, size_t I, mkcclDataType_t t, cudaStream_t s) {
  if (rows == 0 || I == 0) return;
  if (t == mkcclFloat16) swiglu<__half>(h, act, rows, I, s);
  else swiglu<__nv_bfloat16>(h, act, rows, I, s);
}

void moeWeightedSum(const void* rows, const int32_t* rowOf, const float* w, void* out, size_t T, int k, size_t H,
                    mkcclDataType_t t, cudaStream_t s) {
  if (T == 0 || H == 0) return;
  if (t == mkcclFloat16) weightedSum<__half>(rows, rowOf, w, out, T, k, H, s);
  else weightedSum<__nv_bfloat16>(rows, rowOf, w, out, T, k, H, s);
}

}  // namespace perf
}  // namespace mkccl
