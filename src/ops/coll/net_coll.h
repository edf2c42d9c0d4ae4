// Kernels of the inter-node step of the hierarchical collectives (src/ops/coll/coll_net.cc): an
// exchange between the counterpart ranks of all nodes through the network window, and the
// reduction of what arrived. Host-side declarations.
//
// Window layout of one round (the same on every rank): 2 * nNodes slots of `slot` bytes.
//   S[m] = slot m           what this rank sends to node m (or, for a broadcast, S[node]: what it
//                           sends to every node)
//   R[m] = slot nNodes + m  what node m's counterpart sent here
// A put goes from my S[...] to the counterpart's R[my node].
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "mkccl.h"
#include "kernels/abi/devcomm.h"
#include "kernels/abi/fifo.h"

namespace mkccl {
namespace netcoll {

// Arrival flags of the exchange (flag 0 is netBarrier's).
constexpr uint32_t kReadyFlag = 1;  // "my R slots are free for this call": the receiver may be written
constexpr uint32_t kDataFlag = 2;   // "your R[my node] holds this call's data"
// The pieced exchange (launchExchangeSend): piece j raises kPieceFlag0 + j. The top of the 4096
// flags per sender (0 netBarrier, 1-2 above, 3-63 MoE, 64-128 AllGather+GEMM, 130+ the fused
// GEMM+ReduceScatter); a piece has a flag of its own because nothing is ordered across puts.
constexpr uint32_t kPieceFlag0 = 4032;
constexpr int kMaxPieces = 64;
static_assert(kPieceFlag0 + kMaxPieces <= (uint32_t)kFifoMaxFlags, "the pieces' flags exist");

__host__ __device__ inline uint64_t slotS(int m, uint64_t slot) { return (uint64_t)m * slot; }
__host__ __device__ inline uint64_t slotR(int m, int nNodes, uint64_t slot) { return (uint64_t)(nNodes + m) * slot; }

// One CTA: a node barrier (every local rank has entered this launch, hence finished the ones
// before it: each launch of a hierarchical call is then a complete call for the node, as the NVLink
// protocols may assume), then with every other node's counterpart: handshake (kReadyFlag), put
// `bytes` from S[perNode ? m : my node] to its R[my node] (kDataFlag), wait for its put into my
// R[m], and wait until my puts have left the window. c.seq must be a fresh call number of the
// communicator (flags are raised to netFlagValue(c.seq)).
mkcclResult_t launchExchange(const DevComm& c, uint64_t slot, uint64_t bytes, bool perNode, cudaStream_t s);

// The exchange of launchExchange in pieces, for collectives whose input is produced or whose output
// is consumed piece by piece (coll_net.h: netReduceScatterProducedOp, netAllGatherConsumedOp): each
// piece leaves as soon as it is in the S slots, and is used as soon as it has landed.
//   launchExchangeSend: piece 0 first does the node barrier and the handshake (kReadyFlag); then,
//     to every other node's counterpart, puts bytes [off, off + bytes) of S[perNode ? m : my node]
//     to R[my node] + off, raising kPieceFlag0 + piece. Waits for no data. A later piece is pushed
//     only while the communicator has no device error (so not after a failed handshake).
//   launchExchangeWait: waits for piece `piece` from every other node's counterpart; with `sent`
//     (the call's last), then until every put of this rank has left the window.
//   launchReduceArrivals: out = the nodes' partials of `units` units of `unitElems` elements summed
//     in node order (own for this node, R[m] for node m), each piece summed as soon as it has come
//     from every other node (piece j: units [units j / pieces, units (j + 1) / pieces)); then waits
//     until every put of this rank has left the window. Float types (f16, bf16, f32), sum only.
// Both take the DevComm of the same call number (its flags' values); nothing else in the window
// may be written between them.
mkcclResult_t launchExchangeSend(const DevComm& c, uint64_t slot, uint64_t off, uint64_t bytes, int piece,
                                 bool perNode, cudaStream_t s);
mkcclResult_t launchExchangeWait(const DevComm& c, int piece, bool sent, cudaStream_t s);
mkcclResult_t launchReduceArrivals(const DevComm& c, const char* window, uint64_t slot, int nNodes, const void* own,
                                   void* out, size_t units, size_t unitElems, int pieces, mkcclDataType_t t,
                                   cudaStream_t s);

// out[i] = op over nodes m in node order of (m == node ? own : window + R[m])[i], i < count, then
// divided by avgDiv when > 0 (mkcclAvg; op is then mkcclSum). mkcclInvalidArgument for a
// type/op pair without a kernel. own and out may be the same buffer.
mkcclResult_t launchReduce(const char* window, uint64_t slot, int nNodes, int node, const void* own, void* out,
                           size_t count, mkcclDataType_t t, mkcclRedOp_t op, int avgDiv, cudaStream_t s);

// Loads every kernel above now (see src/ops/coll/coll_net.cc: no launch may have to load a kernel
// while a kernel that waits for the network runs).
mkcclResult_t preload();

}  // namespace netcoll
}  // namespace mkccl
