// The in-place reduction kernels over registered buffers (kernels/coll/coll_direct.cuh), floating-point types.
#include "kernels/coll/coll_direct.cuh"
#include "ops/coll/coll_direct.h"
#include "ops/coll/coll_reduce_table.cuh"

namespace mkccl {
namespace coll {
namespace {
struct Select {
  template <typename T, class Op>
  static const void* kernel() { return reinterpret_cast<const void*>(&directReduceKernel<T, Op>); }
};
}  // namespace

const void* directReduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op) { return floatKernel<Select>(t, op); }

}  // namespace coll
}  // namespace mkccl
