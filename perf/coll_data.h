// Inputs and result checks of the collective benchmarks, on the GPU: every input element is a hash
// of (seed, rank, index), so each rank can compute what any output element must be without
// moving data (no NCCL, no host copies), for any size.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "mkccl.h"

namespace mkccl {
namespace perf {

enum class CollKind { AllGather, ReduceScatter, AllReduce, AllToAll };

// buf[i] = input(seed, rank, first + i), i < count, as type t (floats in [-1, 1), integers in [-100, 100]).
void fillInput(void* buf, size_t count, mkcclDataType_t t, uint64_t seed, int rank, size_t first, cudaStream_t s);

struct CheckResult {
  long long wrong = 0;
  double maxRelErr = 0;
};

// Checks the output of a collective run on every rank's fillInput(seed, rank, 0, ...) input:
//   AllGather / AllToAll: out has nranks*count elements (count per rank), exact.
//   AllReduce: out has count elements; ReduceScatter: count = recvcount. Reductions are compared
//   with an fp64 reference (integers: exact, with C's wrap-around) by relative error
//   |got-ref| / max(|ref|, floor) against a tolerance of the type (bf16 1e-2, fp16 2e-3, fp32 1e-5):
//   what one rounding of an exact (fp32-accumulated) result may cost, as libmkccl reduces.
// inTypeAccumulation: the output was reduced with a rounding after every addition, in some order
//   (NCCL's ring and tree reduce bf16 in bf16): the tolerance grows to what nranks-1 roundings of
//   partial results up to nranks in size may cost, u * n(n+1)/2 (u: the type's unit roundoff).
// Returns a CUDA error code (0 on success).
cudaError_t checkOutput(const void* out, size_t count, mkcclDataType_t t, mkcclRedOp_t op, CollKind kind, int nranks,
                        int rank, uint64_t seed, cudaStream_t s, CheckResult* res, bool inTypeAccumulation = false);

}  // namespace perf
}  // namespace mkccl
