// The LL collective kernels for reductions of floating-point types (half/bf16 accumulate in fp32).
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

const void* llReduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op) {
  switch (t) {
    case mkcclFloat16: return byOp<__half>(op);
    case mkcclBfloat16: return byOp<__nv_bfloat16>(op);
    case mkcclFloat32: return byOp<float>(op);
    case mkcclFloat64: return byOp<double>(op);
    default: return nullptr;
  }
}

}  // namespace coll
}  // namespace mkccl
