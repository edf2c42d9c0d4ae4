// The collective kernel for the copy-only collectives (AllGather, AllToAll(v)).
#include "kernels/coll/coll_kernel.cuh"
#include "ops/coll/coll_kernels.h"

namespace mkccl {
namespace coll {

const void* copyKernel() { return reinterpret_cast<const void*>(&collKernel<uint8_t, dev::OpSum, false>); }

}  // namespace coll
}  // namespace mkccl
