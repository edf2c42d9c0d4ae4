// Host planning of the NVLink collectives: ring layout in the workspace, channels, work split.
#pragma once
#include <stddef.h>
#include "kernels/coll/coll_args.h"
#include "mkccl.h"
#include "runtime/enqueue.h"

namespace mkccl {
namespace coll {

// Documented overrides (all optional; every rank must see the same values, since they change
// the layout that senders and receivers share):
//   MKCCL_COLL_CHANNELS            channels per collective (1..64)
//   MKCCL_COLL_SLOT_BYTES          ring slot size, the largest chunk (>= 1 KiB)
//   MKCCL_ALLREDUCE_ALGO           oneshot | twoshot | auto
//   MKCCL_ALLREDUCE_ONESHOT_BYTES  largest AllReduce that auto runs one-shot
struct Tuning {
  int channels = 0;       // 0: heuristic
  size_t slotBytes = 0;   // 0: default
  int algo = 0;           // 0 auto, 1 one-shot, 2 two-shot
  size_t oneShotMaxBytes = 256 << 10;
};
Tuning tuningFromEnv();

// Starts an Args for a call on ctx (device view, buffers, rank order).
void initArgs(const OpCtx& ctx, Kind kind, const void* send, void* recv, Args* a);

// Chooses the layout (channels, ring slots, slot size; the same on every rank: it depends on the
// kind, the longest stream, the workspace and the tuning) and this rank's work split. An error
// (with the reason) when the workspace cannot hold even the smallest layout.
mkcclResult_t planLayout(const OpCtx& ctx, const Tuning& tune, size_t maxStream, Args* a, int* grid);

// Launches the kernel of a (t and op select the reduction; ignored for the copy kinds).
mkcclResult_t launchColl(const OpCtx& ctx, const Args& a, int grid, mkcclDataType_t t, mkcclRedOp_t op);

// nNodes > 1 is not implemented yet: mkcclInvalidUsage with a message.
mkcclResult_t requireSingleNode(const OpCtx& ctx, const char* opName);

}  // namespace coll
}  // namespace mkccl
