// The LL collective kernel for the copy-only collectives (AllGather, AllToAll(v)).
#include "ops/coll/coll_kernels.h"
#include "kernels/coll/coll_ll.cuh"

namespace mkccl {
namespace coll {

const void* llCopyKernel() { return reinterpret_cast<const void*>(&collLLKernel<uint8_t, dev::OpSum, false>); }

}  // namespace coll
}  // namespace mkccl
