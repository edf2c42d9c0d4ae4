// The collectives' in-place paths over registered buffers (coll_direct.cu).
#pragma once
#include "runtime/enqueue.h"
#include "runtime/regmem.h"

namespace mkccl {
namespace coll {

// Blocks below this go the staged way even when registered: the direct kernel's handshake (entry,
// grid-wide arrival, a done flag per peer) costs more than LL staging there. 1xH100, 2 ranks
// sharing the GPU (docs/PERFORMANCE.md): registered 0.60-0.84x at 4-256 KiB blocks, 1.66x at
// 2 MiB, 1.15x at 16 MiB; the cut is between the measured points, not measured itself.
constexpr size_t kDirectMinBlockBytes = size_t(1) << 20;

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
