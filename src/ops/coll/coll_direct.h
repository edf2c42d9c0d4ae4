// The collectives' in-place paths over registered buffers (coll_direct.cu).
#pragma once
#include "runtime/enqueue.h"
#include "runtime/regmem.h"

namespace mkccl {
namespace coll {

// Whether AllGather can store straight into the registered receive buffers: one node, 16-byte
// aligned block and pointers. Every rank decides alike when every rank passes registered buffers
// (mkcclCommRegister's rule) of the same alignment.
bool directAllGatherFits(const OpCtx& ctx, const Registration* g, const void* send, const void* recv, size_t bytes);
// AllGather of `bytes` per rank into recv, which lies in registration g.
mkcclResult_t directAllGather(OpCtx& ctx, Registration* g, const void* send, void* recv, size_t bytes);
// For preloading.
const void* directAllGatherKernelPtr();

}  // namespace coll
}  // namespace mkccl
