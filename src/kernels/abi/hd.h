// Functions that host and device code share (layouts, schedules, index math): one macro for
// "callable from both" and the few integer helpers every layout needs.
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define MKCCL_HD __host__ __device__ __forceinline__
#else
#define MKCCL_HD inline
#endif

namespace mkccl {

MKCCL_HD int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
MKCCL_HD int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
MKCCL_HD int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
MKCCL_HD int minI(int a, int b) { return a < b ? a : b; }
MKCCL_HD int maxI(int a, int b) { return a > b ? a : b; }

}  // namespace mkccl
