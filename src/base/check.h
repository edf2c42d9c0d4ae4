// Error-propagation macros. Every failure path says why (setError logs at WARN).
#pragma once
#include <cuda_runtime.h>
#include <errno.h>
#include <string.h>
#include "base/log.h"

// Propagate a non-success mkcclResult_t.
#define MKCCL_CHECK(call)                              \
  do {                                                 \
    mkcclResult_t mkccl_r_ = (call);                   \
    if (mkccl_r_ != mkcclSuccess) return mkccl_r_;     \
  } while (0)

// A failed CUDA runtime call becomes mkcclUnhandledCudaError with the call and its message.
#define CUDA_CHECK(call)                                                                         \
  do {                                                                                           \
    cudaError_t mkccl_e_ = (call);                                                               \
    if (mkccl_e_ != cudaSuccess)                                                                 \
      return ::mkccl::setError(mkcclUnhandledCudaError, "%s:%d: %s failed: %s", __FILE__,         \
                               __LINE__, #call, cudaGetErrorString(mkccl_e_));                   \
  } while (0)

// A failed driver call (through mkccl::cu(), see cudriver.h).
#define CU_CHECK(call)                                                                           \
  do {                                                                                           \
    CUresult mkccl_c_ = (call);                                                                  \
    if (mkccl_c_ != CUDA_SUCCESS)                                                                \
      return ::mkccl::setError(mkcclUnhandledCudaError, "%s:%d: %s failed: %s", __FILE__,         \
                               __LINE__, #call, ::mkccl::cuErrorString(mkccl_c_));               \
  } while (0)

// A failed OS call (returns -1 and sets errno).
#define SYS_CHECK(call)                                                                          \
  do {                                                                                           \
    if ((call) == -1)                                                                            \
      return ::mkccl::setError(mkcclSystemError, "%s:%d: %s failed: %s", __FILE__, __LINE__,      \
                               #call, strerror(errno));                                          \
  } while (0)

// Argument checks: mkcclInvalidArgument with the reason.
#define ARG_CHECK(cond, ...)                                                  \
  do {                                                                        \
    if (!(cond)) return ::mkccl::setError(mkcclInvalidArgument, __VA_ARGS__); \
  } while (0)
