// Shared test helpers (see test_util.h).
#include "test_util.h"
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <map>
#include <mutex>

namespace mkccl {
namespace test {

int gpuCount() {
  static int n = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return c;
  }();
  return n;
}

const launch::World& world() {
  static const bool ready = [] {
    launch::World w;
    std::string err;
    if (launch::worldInit(&w, &err) != 0) {
      fprintf(stderr, "test world: %s\n", err.c_str());
      exit(2);  // test harness only: without a world no multi-process test can run
    }
    return true;
  }();
  (void)ready;
  return launch::world();
}

mkcclComm_t worldComm(const mkcclConfig_t* config) {
  const launch::World& w = world();
  if (gpuCount() > 0) cudaSetDevice(w.localRank % gpuCount());
  mkcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (w.rank == 0) EXPECT_EQ(mkcclSuccess, mkcclGetUniqueId(&id)) << mkcclGetLastError(nullptr);
  std::string err;
  EXPECT_EQ(0, launch::worldBroadcast(&id, sizeof(id), 0, &err)) << err;
  mkcclComm_t comm = nullptr;
  mkcclConfig_t cfg = MKCCL_CONFIG_INITIALIZER;
  if (config) cfg = *config;
  EXPECT_EQ(mkcclSuccess, mkcclCommInitRankConfig(&comm, w.nranks, id, w.rank, &cfg)) << mkcclGetLastError(nullptr);
  return comm;
}

bool worldAllOk(bool ok) {
  const launch::World& w = world();
  std::vector<char> all(w.nranks);
  char mine = ok ? 1 : 0;
  std::string err;
  if (launch::worldAllGather(&mine, 1, all.data(), &err) != 0) {
    ADD_FAILURE() << "worldAllGather: " << err;
    return false;
  }
  for (char c : all)
    if (!c) return false;
  return true;
}

int smCount() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

uint64_t freshSeed() {
  static uint64_t counter = 0;
  static uint64_t base = [] {
    if (const char* s = getenv("MKCCL_TEST_SEED")) return (uint64_t)strtoull(s, nullptr, 0);
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
  }();
  uint64_t s = base + 0x9e3779b97f4a7c15ull * ++counter;
  printf("[ seed     ] MKCCL_TEST_SEED base 0x%llx, this draw 0x%llx\n", (unsigned long long)base,
         (unsigned long long)s);
  return s;
}

namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ double fromFloat<double>(float v) { return v; }
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __nv_fp8_e4m3 fromFloat<__nv_fp8_e4m3>(float v) { return __nv_fp8_e4m3(v); }
template <> __device__ __forceinline__ __nv_fp8_e5m2 fromFloat<__nv_fp8_e5m2>(float v) { return __nv_fp8_e5m2(v); }

template <typename T>
__global__ void fillFloatKernel(T* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t r = mix64(seed ^ (i * 0xd1b54a32d192ed03ull));
    const float u = (float)(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = fromFloat<T>((2.0f * u - 1.0f) * scale);
  }
}

template <typename T>
__global__ void fillIntKernel(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t r = mix64(seed ^ (i * 0xd1b54a32d192ed03ull));
    p[i] = (T)((int64_t)(r % 201) - 100);
  }
}

template <typename T>
void launchFill(void* d, size_t n, uint64_t seed, float scale, cudaStream_t s) {
  fillFloatKernel<T><<<1024, 256, 0, s>>>((T*)d, n, seed, scale);
}
template <typename T>
void launchFillInt(void* d, size_t n, uint64_t seed, cudaStream_t s) {
  fillIntKernel<T><<<1024, 256, 0, s>>>((T*)d, n, seed);
}

float bf16ToFloat(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

}  // namespace

void fillRandom(void* dptr, size_t count, mkcclDataType_t t, uint64_t seed, float scale, cudaStream_t stream) {
  if (count == 0) return;
  switch (t) {
    case mkcclFloat32: launchFill<float>(dptr, count, seed, scale, stream); break;
    case mkcclFloat64: launchFill<double>(dptr, count, seed, scale, stream); break;
    case mkcclFloat16: launchFill<__half>(dptr, count, seed, scale, stream); break;
    case mkcclBfloat16: launchFill<__nv_bfloat16>(dptr, count, seed, scale, stream); break;
    case mkcclFloat8e4m3: launchFill<__nv_fp8_e4m3>(dptr, count, seed, scale, stream); break;
    case mkcclFloat8e5m2: launchFill<__nv_fp8_e5m2>(dptr, count, seed, scale, stream); break;
    case mkcclInt8: launchFillInt<int8_t>(dptr, count, seed, stream); break;
    case mkcclUint8: launchFillInt<uint8_t>(dptr, count, seed, stream); break;
    case mkcclInt32: launchFillInt<int32_t>(dptr, count, seed, stream); break;
    case mkcclUint32: launchFillInt<uint32_t>(dptr, count, seed, stream); break;
    case mkcclInt64: launchFillInt<int64_t>(dptr, count, seed, stream); break;
    case mkcclUint64: launchFillInt<uint64_t>(dptr, count, seed, stream); break;
    default: ADD_FAILURE() << "fillRandom: bad type " << (int)t; return;
  }
  EXPECT_EQ(cudaSuccess, cudaGetLastError());
}

void poison(void* dptr, size_t bytes, cudaStream_t stream) {
  if (bytes) EXPECT_EQ(cudaSuccess, cudaMemsetAsync(dptr, 0xFF, bytes, stream));  // NaN in every float type
}

float toFloat(const void* p, size_t i, mkcclDataType_t t) {
  switch (t) {
    case mkcclFloat32: return ((const float*)p)[i];
    case mkcclFloat64: return (float)((const double*)p)[i];
    case mkcclFloat16: return __half2float(((const __half*)p)[i]);
    case mkcclBfloat16: return bf16ToFloat(((const uint16_t*)p)[i]);
    case mkcclFloat8e4m3: return (float)((const __nv_fp8_e4m3*)p)[i];
    case mkcclFloat8e5m2: return (float)((const __nv_fp8_e5m2*)p)[i];
    case mkcclInt8: return ((const int8_t*)p)[i];
    case mkcclUint8: return ((const uint8_t*)p)[i];
    case mkcclInt32: return (float)((const int32_t*)p)[i];
    case mkcclUint32: return (float)((const uint32_t*)p)[i];
    case mkcclInt64: return (float)((const int64_t*)p)[i];
    case mkcclUint64: return (float)((const uint64_t*)p)[i];
    default: return NAN;
  }
}

std::vector<double> toHostDouble(const void* dptr, size_t count, mkcclDataType_t t) {
  size_t es = 0;
  switch (t) {
    case mkcclInt8: case mkcclUint8: case mkcclFloat8e4m3: case mkcclFloat8e5m2: es = 1; break;
    case mkcclFloat16: case mkcclBfloat16: es = 2; break;
    case mkcclInt32: case mkcclUint32: case mkcclFloat32: es = 4; break;
    default: es = 8;
  }
  std::vector<char> raw(count * es);
  EXPECT_EQ(cudaSuccess, cudaMemcpy(raw.data(), dptr, count * es, cudaMemcpyDeviceToHost));
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (t == mkcclFloat64) out[i] = ((const double*)raw.data())[i];
    else if (t == mkcclInt64) out[i] = (double)((const int64_t*)raw.data())[i];
    else if (t == mkcclUint64) out[i] = (double)((const uint64_t*)raw.data())[i];
    else out[i] = toFloat(raw.data(), i, t);
  }
  return out;
}

ErrStats compare(const std::vector<double>& got, const std::vector<double>& ref, double tol) {
  ErrStats st;
  if (got.size() != ref.size()) {
    st.wrong = std::max(got.size(), ref.size());
    st.maxRelErr = INFINITY;
    return st;
  }
  double norm = 0;
  for (double r : ref) norm = std::max(norm, fabs(r));
  if (norm < 1e-30) norm = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = fabs(got[i] - ref[i]) / norm;
    if (!(e <= tol)) {  // NaN counts as wrong
      if (st.wrong == 0) st.firstWrong = i;
      ++st.wrong;
    }
    if (!(e <= st.maxRelErr)) st.maxRelErr = std::isnan(e) ? INFINITY : std::max(st.maxRelErr, e);
  }
  return st;
}

template <typename T>
__global__ void convertKernel(const float* in, T* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = fromFloat<T>(in[i]);
}

void cublasGemmRef(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                   mkcclDataType_t outType, cudaStream_t stream) {
  static std::mutex mu;
  static std::map<int, cublasHandle_t> handles;
  int dev = 0;
  cudaGetDevice(&dev);
  cublasHandle_t h;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = handles.find(dev);
    if (it == handles.end()) {
      ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasCreate(&h));
      handles[dev] = h;
    } else {
      h = it->second;
    }
  }
  auto cudaType = [](mkcclDataType_t t) {
    return t == mkcclBfloat16 ? CUDA_R_16BF : t == mkcclFloat16 ? CUDA_R_16F : CUDA_R_32F;
  };
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSetStream(h, stream));
  const float alpha = 1.0f, beta = 0.0f;
  // cuBLAS has no mixed 16-bit combinations (bf16 in, fp16 out): compute fp32, then convert.
  const bool direct = outType == inType || outType == mkcclFloat32;
  void* out = C;
  if (!direct) ASSERT_EQ(cudaSuccess, cudaMallocAsync(&out, M * N * sizeof(float), stream));
  // Row-major C[M,N] = A[M,K]·W[N,K]^T is column-major C^T[N,M] = W^T(op T on W' [K,N]) · A'[K,M].
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS,
            cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, W, cudaType(inType), (int)K, A,
                         cudaType(inType), (int)K, &beta, out, direct ? cudaType(outType) : CUDA_R_32F, (int)N,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (!direct) {
    if (outType == mkcclFloat16) convertKernel<__half><<<1024, 256, 0, stream>>>((const float*)out, (__half*)C, M * N);
    else convertKernel<__nv_bfloat16><<<1024, 256, 0, stream>>>((const float*)out, (__nv_bfloat16*)C, M * N);
    ASSERT_EQ(cudaSuccess, cudaFreeAsync(out, stream));
  }
}

}  // namespace test
}  // namespace mkccl
