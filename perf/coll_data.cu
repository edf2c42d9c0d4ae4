// Inputs and result checks of the collective benchmarks (see coll_data.h).
#include "coll_data.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <string.h>

namespace mkccl {
namespace perf {
namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T> struct Num {  // integers
  static constexpr bool kFloat = false;
  __device__ static T make(uint64_t r) { return (T)((int64_t)(r % 201) - 100); }
  __device__ static double toDouble(T v) { return (double)v; }
};
template <> struct Num<float> {
  static constexpr bool kFloat = true;
  __device__ static float make(uint64_t r) { return 2.0f * (float)(r >> 40) * (1.0f / 16777216.0f) - 1.0f; }
  __device__ static double toDouble(float v) { return v; }
};
template <> struct Num<double> {
  static constexpr bool kFloat = true;
  __device__ static double make(uint64_t r) { return 2.0 * (double)(r >> 11) * (1.0 / 9007199254740992.0) - 1.0; }
  __device__ static double toDouble(double v) { return v; }
};
template <> struct Num<__half> {
  static constexpr bool kFloat = true;
  __device__ static __half make(uint64_t r) { return __float2half_rn(Num<float>::make(r)); }
  __device__ static double toDouble(__half v) { return __half2float(v); }
};
template <> struct Num<__nv_bfloat16> {
  static constexpr bool kFloat = true;
  __device__ static __nv_bfloat16 make(uint64_t r) { return __float2bfloat16_rn(Num<float>::make(r)); }
  __device__ static double toDouble(__nv_bfloat16 v) { return __bfloat162float(v); }
};
template <> struct Num<__nv_fp8_e4m3> {
  static constexpr bool kFloat = true;
  __device__ static __nv_fp8_e4m3 make(uint64_t r) { return __nv_fp8_e4m3(Num<float>::make(r)); }
  __device__ static double toDouble(__nv_fp8_e4m3 v) { return (float)v; }
};
template <> struct Num<__nv_fp8_e5m2> {
  static constexpr bool kFloat = true;
  __device__ static __nv_fp8_e5m2 make(uint64_t r) { return __nv_fp8_e5m2(Num<float>::make(r)); }
  __device__ static double toDouble(__nv_fp8_e5m2 v) { return (float)v; }
};

template <typename T>
__device__ __forceinline__ T input(uint64_t seed, int rank, size_t idx) {
  return Num<T>::make(mix64(seed ^ ((uint64_t)(rank + 1) * 0xd1b54a32d192ed03ull) ^ (idx * 0x8cb92ba72f3d8dd7ull)));
}

template <typename T>
__global__ void fillKernel(T* p, size_t n, uint64_t seed, int rank, size_t first) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = input<T>(seed, rank, first + i);
}

// What a reduction of every rank's element idx must give: floats as a double (fp64 reference)...
template <typename T>
__device__ double reduced(mkcclRedOp_t op, int nranks, uint64_t seed, size_t idx) {
  double acc = Num<T>::toDouble(input<T>(seed, 0, idx));
  for (int q = 1; q < nranks; ++q) {
    const double x = Num<T>::toDouble(input<T>(seed, q, idx));
    switch (op) {
      case mkcclProd: acc *= x; break;
      case mkcclMax: acc = fmax(acc, x); break;
      case mkcclMin: acc = fmin(acc, x); break;
      default: acc += x; break;
    }
  }
  return op == mkcclAvg ? acc / nranks : acc;
}

// ... integers exactly, in their own type (sum and product wrap as in C; avg divides the wrapped sum).
template <typename T>
__device__ T reducedInt(mkcclRedOp_t op, int nranks, uint64_t seed, size_t idx) {
  T acc = input<T>(seed, 0, idx);
  for (int q = 1; q < nranks; ++q) {
    const T x = input<T>(seed, q, idx);
    switch (op) {
      case mkcclProd: acc = (T)((uint64_t)acc * (uint64_t)x); break;
      case mkcclMax: acc = x > acc ? x : acc; break;
      case mkcclMin: acc = x < acc ? x : acc; break;
      default: acc = (T)((uint64_t)acc + (uint64_t)x); break;
    }
  }
  if (op == mkcclAvg) acc = (T)(acc / (T)nranks);
  return acc;
}

template <typename T>
__global__ void checkKernel(const T* out, size_t count, mkcclRedOp_t op, CollKind kind, int nranks, int rank,
                            uint64_t seed, double tol, unsigned long long* wrong, unsigned long long* maxErrBits) {
  unsigned long long myWrong = 0;
  double myMax = 0;
  const size_t total = (kind == CollKind::AllGather || kind == CollKind::AllToAll) ? count * nranks : count;
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < total; j += (size_t)gridDim.x * blockDim.x) {
    if constexpr (!Num<T>::kFloat) {  // integers: exact, compared in the type (64-bit values exceed a double's)
      T want;
      switch (kind) {
        case CollKind::AllGather: want = input<T>(seed, (int)(j / count), j % count); break;
        case CollKind::AllToAll: want = input<T>(seed, (int)(j / count), (size_t)rank * count + j % count); break;
        case CollKind::AllReduce: want = reducedInt<T>(op, nranks, seed, j); break;
        default: want = reducedInt<T>(op, nranks, seed, (size_t)rank * count + j); break;
      }
      if (out[j] != want) ++myWrong;
      continue;
    }
    const double got = Num<T>::toDouble(out[j]);
    double ref, floor = 1e-30;
    switch (kind) {
      case CollKind::AllGather: ref = Num<T>::toDouble(input<T>(seed, (int)(j / count), j % count)); break;
      case CollKind::AllToAll:
        ref = Num<T>::toDouble(input<T>(seed, (int)(j / count), (size_t)rank * count + j % count));
        break;
      case CollKind::AllReduce: ref = reduced<T>(op, nranks, seed, j); break;
      default: ref = reduced<T>(op, nranks, seed, (size_t)rank * count + j); break;
    }
    // Sums cancel: measure their error against the size of the inputs, not of the result; tiny
    // products are measured against 1e-2 (fp16 subnormals).
    if (op == mkcclSum) floor = 1.0;
    if (op == mkcclAvg) floor = 1.0 / nranks;
    if (op == mkcclProd) floor = 1e-2;
    const bool exact = kind == CollKind::AllGather || kind == CollKind::AllToAll;
    const double err = fabs(got - ref) / fmax(fabs(ref), floor);
    if (isnan(got) || (exact ? got != ref : err > tol)) ++myWrong;
    if (!isnan(err)) myMax = fmax(myMax, err);
  }
  if (myWrong) atomicAdd(wrong, myWrong);
  if (myMax > 0) atomicMax(maxErrBits, (unsigned long long)__double_as_longlong(myMax));
}

template <typename T>
cudaError_t runCheck(const void* out, size_t count, mkcclRedOp_t op, CollKind kind, int nranks, int rank, uint64_t seed,
                     double tol, cudaStream_t s, CheckResult* res) {
  unsigned long long* d = nullptr;
  cudaError_t e = cudaMallocAsync(&d, 2 * sizeof(unsigned long long), s);
  if (e != cudaSuccess) return e;
  cudaMemsetAsync(d, 0, 2 * sizeof(unsigned long long), s);
  checkKernel<T><<<1024, 256, 0, s>>>(static_cast<const T*>(out), count, op, kind, nranks, rank, seed, tol, d, d + 1);
  unsigned long long h[2] = {0, 0};
  cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s);
  cudaFreeAsync(d, s);
  e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) return e;
  res->wrong = (long long)h[0];
  double m;
  memcpy(&m, &h[1], sizeof(m));
  res->maxRelErr = m;
  return cudaGetLastError();
}

}  // namespace

void fillInput(void* buf, size_t count, mkcclDataType_t t, uint64_t seed, int rank, size_t first, cudaStream_t s) {
  if (count == 0) return;
  const dim3 g(1024), b(256);
  switch (t) {
    case mkcclInt8: fillKernel<int8_t><<<g, b, 0, s>>>((int8_t*)buf, count, seed, rank, first); break;
    case mkcclUint8: fillKernel<uint8_t><<<g, b, 0, s>>>((uint8_t*)buf, count, seed, rank, first); break;
    case mkcclInt32: fillKernel<int32_t><<<g, b, 0, s>>>((int32_t*)buf, count, seed, rank, first); break;
    case mkcclUint32: fillKernel<uint32_t><<<g, b, 0, s>>>((uint32_t*)buf, count, seed, rank, first); break;
    case mkcclInt64: fillKernel<int64_t><<<g, b, 0, s>>>((int64_t*)buf, count, seed, rank, first); break;
    case mkcclUint64: fillKernel<uint64_t><<<g, b, 0, s>>>((uint64_t*)buf, count, seed, rank, first); break;
    case mkcclFloat16: fillKernel<__half><<<g, b, 0, s>>>((__half*)buf, count, seed, rank, first); break;
    case mkcclFloat32: fillKernel<float><<<g, b, 0, s>>>((float*)buf, count, seed, rank, first); break;
    case mkcclFloat64: fillKernel<double><<<g, b, 0, s>>>((double*)buf, count, seed, rank, first); break;
    case mkcclBfloat16: fillKernel<__nv_bfloat16><<<g, b, 0, s>>>((__nv_bfloat16*)buf, count, seed, rank, first); break;
    case mkcclFloat8e4m3: fillKernel<__nv_fp8_e4m3><<<g, b, 0, s>>>((__nv_fp8_e4m3*)buf, count, seed, rank, first); break;
    case mkcclFloat8e5m2: fillKernel<__nv_fp8_e5m2><<<g, b, 0, s>>>((__nv_fp8_e5m2*)buf, count, seed, rank, first); break;
    default: break;
  }
}

cudaError_t checkOutput(const void* out, size_t count, mkcclDataType_t t, mkcclRedOp_t op, CollKind kind, int nranks,
                        int rank, uint64_t seed, cudaStream_t s, CheckResult* res, bool inTypeAccumulation) {
  *res = CheckResult();
  if (count == 0) return cudaSuccess;
  // Tolerance of one rounding; with rounding after every addition, u * n(n+1)/2.
  auto tol = [&](double one, double u) {
    const double n = nranks;
    return inTypeAccumulation ? fmax(one, u * n * (n + 1) / 2) : one;
  };
  switch (t) {
    case mkcclInt8: return runCheck<int8_t>(out, count, op, kind, nranks, rank, seed, 0, s, res);
    case mkcclUint8: return runCheck<uint8_t>(out, count, op, kind, nranks, rank, seed, 0, s, res);
    case mkcclInt32: return runCheck<int32_t>(out, count, op, kind, nranks, rank, seed, 0, s, res);
    case mkcclUint32: return runCheck<uint32_t>(out, count, op, kind, nranks, rank, seed, 0, s, res);
    case mkcclInt64: return runCheck<int64_t>(out, count, op, kind, nranks, rank, seed, 0, s, res);
    case mkcclUint64: return runCheck<uint64_t>(out, count, op, kind, nranks, rank, seed, 0, s, res);
    case mkcclFloat16: return runCheck<__half>(out, count, op, kind, nranks, rank, seed, tol(2e-3, 0x1p-11), s, res);
    case mkcclFloat32: return runCheck<float>(out, count, op, kind, nranks, rank, seed, tol(1e-5, 0x1p-24), s, res);
    case mkcclFloat64: return runCheck<double>(out, count, op, kind, nranks, rank, seed, tol(1e-12, 0x1p-53), s, res);
    case mkcclBfloat16:
      return runCheck<__nv_bfloat16>(out, count, op, kind, nranks, rank, seed, tol(1e-2, 0x1p-8), s, res);
    case mkcclFloat8e4m3: return runCheck<__nv_fp8_e4m3>(out, count, op, kind, nranks, rank, seed, 0.07, s, res);
    case mkcclFloat8e5m2: return runCheck<__nv_fp8_e5m2>(out, count, op, kind, nranks, rank, seed, 0.13, s, res);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace perf
}  // namespace mkccl
