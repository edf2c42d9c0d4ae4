// The LL collective kernels for reductions of integer types (sum and product wrap, as in C).
#include "kernels/coll/coll_kernels.h"
#include "kernels/coll/coll_ll.cuh"

namespace mkccl {
namespace coll {
namespace {

template <typename T>
const void* byOp(mkcclRedOp_t op) {
  switch (op) {
    case mkcclSum:
    case mkcclAvg: return reinterpret_cast<const void*>(&collLLKernel<T, dev::OpSum, true>);
    case mkcclProd: return reinterpret_cast<const void*>(&collLLKernel<T, dev::OpProd, true>);
    case mkcclMax: return reinterpret_cast<const void*>(&collLLKernel<T, dev::OpMax, true>);
    case mkcclMin: return reinterpret_cast<const void*>(&collLLKernel<T, dev::OpMin, true>);
    default: return nullptr;
  }
}

}  // namespace

const void* llReduceKernelInt(mkcclDataType_t t, mkcclRedOp_t op) {
  switch (t) {
    case mkcclInt8: return byOp<int8_t>(op);
    case mkcclUint8: return byOp<uint8_t>(op);
    case mkcclInt32: return byOp<int32_t>(op);
    case mkcclUint32: return byOp<uint32_t>(op);
    case mkcclInt64: return byOp<int64_t>(op);
    case mkcclUint64: return byOp<uint64_t>(op);
    default: return nullptr;
  }
}

}  // namespace coll
}  // namespace mkccl
