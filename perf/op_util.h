// mkccl-perf: helpers the ops share (device buffers, CUDA error checks, the cuBLAS reference GEMM,
// 16-bit float decoding on the host, combining numbers over the ranks). Host code only; every
// message starts with the op's name (the `op` argument) so that a failure says which op it was.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "mkccl.h"
#include "perf.h"

namespace mkccl {
namespace perf {

// A device allocation freed when it goes out of scope, so that an op can return from anywhere.
// alloc() takes at least 16 bytes (a zero-sized input still gets a valid pointer) and says on
// stderr what could not be allocated, for which op; `bytes` keeps the size asked for.
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf();
  bool alloc(size_t bytes, const char* op, const char* what);
  char* c() const { return static_cast<char*>(p); }  // for byte offsets
};

// True when e is cudaSuccess; else says "op: what: <CUDA's error>" on stderr and returns false.
bool cudaOk(const char* op, cudaError_t e, const char* what);

// The reference GEMM the ops check against and time as their baseline: row-major
// C[M, N] = A[M, K] . W[N, K]^T with cublasGemmEx (fp32 compute), A and W of type `in` (bf16 or
// fp16), C of type `out`; without `out`, C has the inputs' type.
cublasStatus_t cublasGemmRef(cublasHandle_t h, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                             mkcclDataType_t in, cudaDataType_t out);
cublasStatus_t cublasGemmRef(cublasHandle_t h, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                             mkcclDataType_t in);

// A bf16 (t == mkcclBfloat16) or else fp16 value, as raw bits copied back from the device, as a
// double (exact), for host-side checks without the CUDA half types.
double halfToDouble(uint16_t v, mkcclDataType_t t);

// Each of v[0..n) replaced by its max over the ranks, so that every rank reports the same numbers.
// False (with a message naming op) when the ranks cannot exchange them.
bool maxOverRanks(const char* op, double* v, size_t n);
// Each value summed over the ranks (sum) or its maximum; false (and a message naming op) on failure.
bool combineOverRanks(const char* op, double* v, size_t n, bool sum);

// A fused op's floor (docs/PERFORMANCE.md): gemm_alone_us, comm_alone_us, floor_us = their max and
// floor_ratio = ours / floor, when both parts were timed (> 0).
void setFloor(Result* r, double oursUs, double gemmUs, double commUs);

}  // namespace perf
}  // namespace mkccl
