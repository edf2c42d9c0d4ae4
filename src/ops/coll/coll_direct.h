// The collectives' in-place paths over registered buffers (coll_direct.cu, kernels/coll/coll_direct.cuh).
#pragma once
#include "mkccl.h"
#include "ops/coll/coll_plan.h"
#include "runtime/enqueue.h"
#include "runtime/regmem.h"

namespace mkccl {
namespace coll {

// The rule (tuner keys coll.direct, coll.direct_bytes, coll.direct_max_bytes; every rank must set
// them alike). Why a lower cut:
// the in-place kernels save the staging copy (LL sends twice the bytes; simple copies once more at
// the receiver) but pay a fixed handshake per call that the LL protocol does not: the entry flags
// and the info words, a grid-wide arrival and a second NVLink round trip for the done flags. So
// staging wins for small blocks and the in-place path for large ones. The cut is per block between
// two ranks, where the cost of both paths is set: measured for AllGather on 1xH100 (2 ranks sharing
// the GPU, docs/PERFORMANCE.md): registered 0.60-0.84x at 4-256 KiB blocks, 1.66x at 2 MiB, 1.15x at
// 16 MiB; the other collectives use the same cut (the same handshake; pulls instead of pushes)
// until they are measured on their own. Why an upper cut: on 2xH200 (one process per GPU,
// docs/PERFORMANCE.md) every collective gained in place at 2 and 8 MiB blocks (1.05-1.29x) but
// pulls over NVLink run at about half the rate of the staged path's stores per CTA, and at 32 MiB
// blocks AllGather, AllReduce and AllToAll lost (0.86-0.99x; ReduceScatter still 1.15x), at 128 MiB
// all four (0.80-0.97x); the cut sits between the measured sides. AllToAllv takes the in-place path whenever its send buffer
// is registered (auto): its blocks differ per rank, so no rank could apply a size cut that the
// others reach too without talking.
//   block: the bytes between two ranks (AllGather, AllToAll: a rank's block; ReduceScatter: the
//   output block; AllReduce: the slice each rank reduces).
bool directWanted(const Tuning& tune, size_t block);

// The registration of comm holding [p, p + bytes) (null: none); a captured call notes its use (a
// graph keeps a registration it uses registered, whichever path the call takes).
mkcclResult_t findReg(OpCtx& ctx, const void* p, size_t bytes, Registration** g);

// AllGather of `bytes` per rank into recv, which lies in gRecv: each rank stores its block straight
// into every peer's receive buffer (any alignment).
mkcclResult_t directAllGather(OpCtx& ctx, Registration* gRecv, const void* send, void* recv, size_t bytes);

// ReduceScatter of `recvBytes` per rank from send, which lies in gSend: each rank pulls its block
// from every peer's send buffer and reduces it into recv (any memory).
mkcclResult_t directReduceScatter(OpCtx& ctx, Registration* gSend, const void* send, void* recv, size_t recvBytes,
                                  mkcclDataType_t t, mkcclRedOp_t op);

// AllReduce of count elements, send in gSend and recv in gRecv (possibly the same buffer): rank r
// pulls slice r (blkElems elements, the last one shorter) from every peer, reduces it and stores the
// result into every rank's recv.
mkcclResult_t directAllReduce(OpCtx& ctx, Registration* gSend, Registration* gRecv, const void* send, void* recv,
                              size_t count, size_t blkElems, mkcclDataType_t t, mkcclRedOp_t op);

// AllToAll(v), send in gSend: each rank pulls the block every peer holds for it (counts and
// displacements in bytes by rank; the peers' sendcounts must match this rank's recvcounts).
mkcclResult_t directAllToAll(OpCtx& ctx, Registration* gSend, const void* send, const size_t* sendBytes,
                             const size_t* sdisplBytes, void* recv, const size_t* recvBytes, const size_t* rdisplBytes);

// The index of g among comm's registrations: registering and deregistering are collective, so the
// same buffer has the same index on every rank (the in-place kernels check it). Also used by the
// fused ops' in-place paths.
int regIndexOf(const mkcclComm* comm, const Registration* g);

// For preloading.
const void* directAllGatherKernelPtr();
const void* directAllToAllKernelPtr();
// nullptr when the (type, op) pair has no kernel; mkcclAvg uses the sum kernel.
const void* directReduceKernelFloat(mkcclDataType_t t, mkcclRedOp_t op);
const void* directReduceKernelInt(mkcclDataType_t t, mkcclRedOp_t op);

}  // namespace coll
}  // namespace mkccl
