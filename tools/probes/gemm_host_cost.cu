// One-off probe (docs/PERFORMANCE.md, decode and small shapes): what a GEMM call costs the host.
// A small GEMM takes less GPU time than some launches take to issue, so calls back to back run at
// the host's rate, not the GPU's. Printed per shape: host microseconds per enqueued call of
// mkcclGemm and of cublasGemmEx (200 calls queued without a sync; the queue holds them), the GPU
// time per call of the same 200 (CUDA events), and the host cost of the driver calls mkcclGemm's
// checks and launch make (each timed over 2000 calls).
// Build: part of the tree (tools/CMakeLists.txt). Run: ./gemm_host_cost_probe
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include "mkccl.h"

#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));         \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

namespace {

double hostUs(int n, const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

}  // namespace

int main() {
  CK(cudaSetDevice(0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(h, s);
  const size_t shapes[][3] = {{1, 1024, 1024}, {1, 4096, 4096}, {128, 8192, 8192}, {1000, 1032, 4096}, {2000, 2056, 4096}};
  void *A, *W, *C;
  CK(cudaMalloc(&A, size_t(2000) * 8192 * 2));
  CK(cudaMalloc(&W, size_t(8192) * 8192 * 2));
  CK(cudaMalloc(&C, size_t(2000) * 8192 * 2));
  CK(cudaMemset(A, 0, size_t(2000) * 8192 * 2));
  CK(cudaMemset(W, 0, size_t(8192) * 8192 * 2));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int kCalls = 200;
  for (const auto& sh : shapes) {
    const size_t M = sh[0], N = sh[1], K = sh[2];
    auto ours = [&] {
      if (mkcclGemm(A, W, C, M, N, K, mkcclBfloat16, mkcclBfloat16, s) != mkcclSuccess) {
        printf("mkcclGemm: %s\n", mkcclGetLastError(nullptr));
        exit(1);
      }
    };
    const float one = 1.f, zero = 0.f;
    auto theirs = [&] {
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, W, CUDA_R_16BF, int(K), A, CUDA_R_16BF,
                   int(K), &zero, C, CUDA_R_16BF, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    for (int r = 0; r < 3; ++r) {  // warm-up (first-call setup) and three rounds, the last printed
      double hu[2], gu[2];
      int i = 0;
      for (const std::function<void()>& f : {std::function<void()>(ours), std::function<void()>(theirs)}) {
        for (int w = 0; w < 10; ++w) f();
        CK(cudaStreamSynchronize(s));
        CK(cudaEventRecord(e0, s));
        hu[i] = hostUs(kCalls, f);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        gu[i] = ms * 1000.0 / kCalls;
        ++i;
      }
      if (r == 2)
        printf("HOST %zux%zux%zu: host us/call mkcclGemm %.2f cublas %.2f | GPU us/call (same calls) mkcclGemm %.2f "
               "cublas %.2f\n",
               M, N, K, hu[0], hu[1], gu[0], gu[1]);
    }
  }
  // The driver calls behind mkcclGemm's checks and launch, host us each.
  cudaPointerAttributes pa;
  int dev = 0, v = 0;
  CUdeviceptr base = 0;
  size_t size = 0;
  alignas(64) CUtensorMap map;
  const cuuint64_t dims[2] = {4096, 4096};
  const cuuint64_t strides[1] = {4096 * 2};
  const cuuint32_t box[2] = {64, 128};
  const cuuint32_t es[2] = {1, 1};
  cudaStreamCaptureStatus cap;
  printf("HOST calls (us each): cudaPointerGetAttributes %.3f, cuMemGetAddressRange %.3f, cuTensorMapEncodeTiled "
         "%.3f, cudaGetDevice %.3f, cudaDeviceGetAttribute %.3f, cudaStreamGetDevice %.3f, cudaStreamIsCapturing "
         "%.3f, cudaGetLastError %.3f\n",
         hostUs(2000, [&] { cudaPointerGetAttributes(&pa, W); }),
         hostUs(2000, [&] { cuMemGetAddressRange(&base, &size, (CUdeviceptr)W); }),
         hostUs(2000,
                [&] {
                  cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, W, dims, strides, box, es,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
                }),
         hostUs(2000, [&] { cudaGetDevice(&dev); }),
         hostUs(2000, [&] { cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0); }),
         hostUs(2000, [&] { cudaStreamGetDevice(s, &dev); }), hostUs(2000, [&] { cudaStreamIsCapturing(s, &cap); }),
         hostUs(2000, [&] { cudaGetLastError(); }));
  cublasDestroy(h);
  return 0;
}
