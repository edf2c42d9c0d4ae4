// The collective kernels for reductions of integer types (sum and product wrap, as in C).
#include "kernels/coll/coll_kernel.cuh"
#include "ops/coll/coll_kernels.h"
#include "ops/coll/coll_reduce_table.cuh"

namespace mkccl {
namespace coll {
namespace {
struct Select {
  template <typename T, class Op>
  static const void* kernel() { return reinterpret_cast<const void*>(&collKernel<T, Op, true>); }
};
}  // namespace

const void* reduceKernelInt(mkcclDataType_t t, mkcclRedOp_t op) { return intKernel<Select>(t, op); }

}  // namespace coll
}  // namespace mkccl
