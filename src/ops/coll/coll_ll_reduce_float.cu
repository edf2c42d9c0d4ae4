// The LL collective kernels for reductions of floating-point types (half/bf16 accumulate in fp32).
#include "kernels/coll/coll_ll.cuh"
#include "ops/coll/coll_kernels.h"
#include "ops/coll/coll_reduce_table.cuh"

namespace mkccl {
namespace coll {
namespace {
struct Select {
  template <typename T, class Op>
  static const void* kernel() { return reinterpret_cast<const void*>(&collLLKernel<T, Op, true>); }
};
}  // namespace

const void* llReduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op) { return floatKernel<Select>(t, op); }

}  // namespace coll
}  // namespace mkccl
