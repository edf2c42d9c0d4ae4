// The collective kernels for reductions of floating-point types (half/bf16 accumulate in fp32).
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

const void* reduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op) { return floatKernel<Select>(t, op); }

}  // namespace coll
}  // namespace mkccl
