// Host planning of the NVLink collectives: ring layout in the workspace, channels, work split.
#pragma once
#include <stddef.h>
#include "kernels/coll/coll_args.h"
#include "kernels/coll/direct_rule.h"
#include "mkccl.h"
#include "runtime/enqueue.h"

namespace mkccl {
namespace coll {

// The tuner's overrides of the collectives (ops/tuner/tuning.h: coll.* and allreduce.* keys; every
// rank must use the same values, since they change the layout or the protocol that senders and
// receivers share):
//   coll.proto               auto | ll | simple: ll = LL for every stream that fits the LL area
//   coll.ll_bytes            auto: the largest stream (bytes per peer) sent with LL (512 KiB)
//   coll.ll_cta_units        LL: 8-byte units of the longest stream per CTA (the grid size)
//   coll.channels            simple: channels per collective (1..64)
//   coll.slot_bytes          simple: ring slot size, the largest chunk (>= 1 KiB)
//   coll.slots               simple: ring slots per (channel, peer) (2..16)
//   allreduce.algo           oneshot | twoshot | auto
//   allreduce.oneshot_bytes  largest AllReduce that auto runs one-shot (LL: 64 KiB, simple: 256 KiB)
//   coll.direct              auto | on | off: registered buffers used in place (coll_direct.h); auto
//                            where the block between two ranks lies between coll.direct_bytes and
//                            coll.direct_max_bytes, on: always when registered, off: never (staged)
//   coll.direct_bytes        auto's lower cut: the smallest block that goes in place (1 MiB)
//   coll.direct_max_bytes    auto's upper cut: the largest block that goes in place (16 MiB; 0: none)
//
// The workspace data region belongs to the collectives: [0, llLayout().base) holds the simple
// protocol's rings, the rest is the LL area (coll_args.h).
struct Tuning {
  int proto = 0;              // 0 auto, 1 LL wherever it fits, 2 simple only
  size_t llMaxBytes = 512 << 10;
  size_t llCtaUnits = 256;    // LL: 8-byte units of the longest stream per CTA (grid size)
  int channels = 0;           // 0: heuristic
  size_t slotBytes = 0;       // 0: default
  int slots = 0;              // 0: default
  int algo = 0;               // 0 auto, 1 one-shot, 2 two-shot
  static constexpr size_t kUnset = ~(size_t)0;
  size_t oneShotMaxBytes = kUnset;  // kUnset: the protocol's default
  int direct = 0;                     // 0 auto, 1 on, 2 off
  size_t directMinBytes = kDirectMinBlockBytes;
  size_t directMaxBytes = kDirectMaxBlockBytes;
};
constexpr size_t kMinSlotBytes = 1 << 10;
constexpr int kMaxChannels = 64;

// The communicator's overrides of the collectives.
const Tuning& tuningOf(const OpCtx& ctx);

// Starts an Args for a call on ctx (device view, buffers, rank order).
void initArgs(const OpCtx& ctx, Kind kind, const void* send, void* recv, Args* a);

// The largest stream (bytes between two ranks) that this call may send with LL: the tuned
// threshold in auto mode, all that fits the LL area when forced, 0 when LL is off or has no area.
// The same on every rank (it depends on the tuning, the workspace size and the rank count).
size_t llStreamLimit(const OpCtx& ctx, const Tuning& tune);

// The simple protocol: chooses the layout (channels, ring slots, slot size; the same on every
// rank: it depends on the kind, the longest stream, the workspace and the tuning) and this rank's
// work split. An error (with the reason) when the workspace cannot hold even the smallest layout.
mkcclResult_t planLayout(const OpCtx& ctx, const Tuning& tune, size_t maxStream, Args* a, int* grid);

// The LL protocol: the LL area and this rank's grid. Every stream of a must fit (llStreamLimit).
mkcclResult_t planLL(const OpCtx& ctx, const Tuning& tune, Args* a, int* grid);

// Launches the kernel of a's protocol and kind (t and op select the reduction; ignored for the copy kinds).
mkcclResult_t launchColl(const OpCtx& ctx, const Args& a, int grid, mkcclDataType_t t, mkcclRedOp_t op);

// nNodes > 1 is not implemented yet: mkcclInvalidUsage with a message.
mkcclResult_t requireSingleNode(const OpCtx& ctx, const char* opName);

}  // namespace coll
}  // namespace mkccl
