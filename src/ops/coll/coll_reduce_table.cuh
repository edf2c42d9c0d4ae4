// The (type, op) -> kernel tables of the reduction collectives, written once. Each protocol and type
// family instantiates them in its own .cu (so the kernels compile in parallel) through a selector:
//   struct S { template <typename T, class Op> static const void* kernel(); };
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include "kernels/device/reduce.cuh"
#include "mkccl.h"

namespace mkccl {
namespace coll {

template <class S, typename T>
const void* kernelForOp(mkcclRedOp_t op) {
  switch (op) {
    case mkcclSum:
    case mkcclAvg: return S::template kernel<T, dev::OpSum>();  // avg: sum, then scaled
    case mkcclProd: return S::template kernel<T, dev::OpProd>();
    case mkcclMax: return S::template kernel<T, dev::OpMax>();
    case mkcclMin: return S::template kernel<T, dev::OpMin>();
    default: return nullptr;
  }
}

template <class S>
const void* floatKernel(mkcclDataType_t t, mkcclRedOp_t op) {
  switch (t) {
    case mkcclFloat16: return kernelForOp<S, __half>(op);
    case mkcclBfloat16: return kernelForOp<S, __nv_bfloat16>(op);
    case mkcclFloat32: return kernelForOp<S, float>(op);
    case mkcclFloat64: return kernelForOp<S, double>(op);
    default: return nullptr;
  }
}

template <class S>
const void* intKernel(mkcclDataType_t t, mkcclRedOp_t op) {
  switch (t) {
    case mkcclInt8: return kernelForOp<S, int8_t>(op);
    case mkcclUint8: return kernelForOp<S, uint8_t>(op);
    case mkcclInt32: return kernelForOp<S, int32_t>(op);
    case mkcclUint32: return kernelForOp<S, uint32_t>(op);
    case mkcclInt64: return kernelForOp<S, int64_t>(op);
    case mkcclUint64: return kernelForOp<S, uint64_t>(op);
    default: return nullptr;
  }
}

}  // namespace coll
}  // namespace mkccl
