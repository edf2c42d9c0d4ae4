// The collective kernels for reductions of floating-point types (half/bf16 accumulate in fp32).
#include "kernels/coll/coll_kernel.cuh"
#include "kernels/coll/coll_kernels.h"

namespace mkccl {
namespace coll {
namespace {

template <typename T>
const void* byOp(mkcclRedOp_t op) {
  switch (op) {
    case mkcclSum:
    case mkcclAvg: return reinterpret_cast<const void*>(&collKernel<T, dev::OpSum, true>);
    case mkcclProd: return reinterpret_cast<const void*>(&collKernel<T, dev::OpProd, true>);
    case mkcclMax: return reinterpret_cast<const void*>(&collKernel<T, dev::OpMax, true>);
    case mkcclMin: return reinterpret_cast<const void*>(&collKernel<T, dev::OpMin, true>);
    default: return nullptr;
  }
}

}  // namespace

const void* reduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op) {
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
