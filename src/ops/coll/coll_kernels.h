// The instantiated collective kernels, looked up by protocol, element type and reduction (host side).
#pragma once
#include "mkccl.h"

namespace mkccl {
namespace coll {

// AllGather / AllToAll (bytes only).
const void* copyKernel();
// ReduceScatter / AllReduce: nullptr when the type/op pair has no kernel. mkcclAvg uses the sum
// kernel (Args::avgDiv divides).
const void* reduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op);  // fp16, bf16, fp32, fp64
const void* reduceKernelInt(mkcclDataType_t t, mkcclRedOp_t op);    // (u)int8, (u)int32, (u)int64

// The same for the LL protocol (coll_ll.cuh).
const void* llCopyKernel();
const void* llReduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op);
const void* llReduceKernelInt(mkcclDataType_t t, mkcclRedOp_t op);

}  // namespace coll
}  // namespace mkccl
