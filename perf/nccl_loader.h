// NCCL as a baseline, loaded at run time (dlopen) so that neither libmkccl nor mkccl-perf links it
// and no nccl.h is needed: the few prototypes and enums used are declared here (NCCL's ABI).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <string>
#include "mkccl.h"

namespace mkccl {
namespace perf {

typedef int ncclResult_t;  // 0 = ncclSuccess
typedef struct ncclComm* ncclComm_t;
struct ncclUniqueId {
  char internal[128];
};
// ncclDataType_t and ncclRedOp_t have the same values as mkcclDataType_t / mkcclRedOp_t
// (int8 0, uint8 1, int32 2, uint32 3, int64 4, uint64 5, fp16 6, fp32 7, fp64 8, bf16 9,
// fp8e4m3 10, fp8e5m2 11; sum 0, prod 1, max 2, min 3, avg 4): they are passed through as ints.
inline int ncclType(mkcclDataType_t t) { return (int)t; }
inline int ncclOp(mkcclRedOp_t op) { return (int)op; }

struct Nccl {
  std::string path;
  int version = 0;  // e.g. 22809
  ncclResult_t (*getVersion)(int*) = nullptr;
  const char* (*getErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*allGather)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;

  const char* err(ncclResult_t r) const { return getErrorString ? getErrorString(r) : "?"; }
};

// Loads NCCL once per process: `path` if not empty, else $MKCCL_PERF_NCCL_LIB, else libnccl.so.2
// from the loader's search path, else the pip wheels (site-packages/nvidia/nccl/lib). Sets
// NCCL_NVLS_ENABLE=0 first (never NVLink multicast). Null with *why on failure.
const Nccl* loadNccl(const std::string& path, std::string* why);

}  // namespace perf
}  // namespace mkccl
