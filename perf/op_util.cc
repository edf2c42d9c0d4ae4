// mkccl-perf: the ops' shared helpers (perf/op_util.h).
#include "op_util.h"
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "launch/launch.h"

namespace mkccl {
namespace perf {

DevBuf::~DevBuf() {
  if (p) cudaFree(p);
}

bool DevBuf::alloc(size_t n, const char* op, const char* what) {
  if (p) cudaFree(p);
  p = nullptr;
  bytes = n;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(n, 16));
  if (e == cudaSuccess) return true;
  fprintf(stderr, "%s: cudaMalloc %s (%zu bytes): %s\n", op, what, n, cudaGetErrorString(e));
  p = nullptr;
  return false;
}

bool cudaOk(const char* op, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "%s: %s: %s\n", op, what, cudaGetErrorString(e));
  return false;
}

cublasStatus_t cublasGemmRef(cublasHandle_t h, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                             mkcclDataType_t in, cudaDataType_t out) {
  // Row-major C[M,N] = A[M,K] W[N,K]^T is column-major C^T[N,M] = W (as K x N, transposed) . A^T.
  const cudaDataType_t ct = in == mkcclBfloat16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one,
                      W, ct, static_cast<int>(K), A, ct, static_cast<int>(K), &zero, C, out, static_cast<int>(N),
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t cublasGemmRef(cublasHandle_t h, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                             mkcclDataType_t in) {
  return cublasGemmRef(h, A, W, C, M, N, K, in, in == mkcclBfloat16 ? CUDA_R_16BF : CUDA_R_16F);
}

double halfToDouble(uint16_t v, mkcclDataType_t t) {
  if (t == mkcclBfloat16) {  // the top half of a float
    const uint32_t u = static_cast<uint32_t>(v) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  // fp16: sign, 5-bit exponent (bias 15), 10-bit mantissa; every value is exact in a double.
  const uint32_t s = (v >> 15) & 1, e = (v >> 10) & 31, m = v & 1023;
  double d;
  if (e == 0) d = std::ldexp(static_cast<double>(m), -24);  // zero and subnormals
  else if (e == 31) d = m ? NAN : INFINITY;
  else d = std::ldexp(static_cast<double>(m + 1024), static_cast<int>(e) - 25);
  return s ? -d : d;
}

bool combineOverRanks(const char* op, double* v, size_t n, bool sum) {
  const launch::World& w = launch::world();
  std::vector<double> all(n * w.nranks);
  std::string err;
  if (launch::worldAllGather(v, n * sizeof(double), all.data(), &err) != 0) {
    fprintf(stderr, "%s: combining over ranks: %s\n", op, err.c_str());
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    double x = sum ? 0 : all[i];
    for (int r = 0; r < w.nranks; ++r) {
      const double y = all[static_cast<size_t>(r) * n + i];
      x = sum ? x + y : std::max(x, y);
    }
    v[i] = x;
  }
  return true;
}

bool maxOverRanks(const char* op, double* v, size_t n) { return combineOverRanks(op, v, n, false); }

void setFloor(Result* r, double oursUs, double gemmUs, double commUs) {
  if (gemmUs <= 0 || commUs <= 0) return;
  const double floorUs = gemmUs > commUs ? gemmUs : commUs;
  r->extra["gemm_alone_us"] = gemmUs;
  r->extra["comm_alone_us"] = commUs;
  r->extra["floor_us"] = floorUs;
  r->extra["floor_ratio"] = oursUs / floorUs;
}

}  // namespace perf
}  // namespace mkccl
