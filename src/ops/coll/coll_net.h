// Collectives across nodes (hierarchical): NVLink inside a node through the NVLink collective
// kernel (src/kernels/coll), the network between counterpart ranks (the same local rank in every
// node) through FIFO -> proxy -> transport (src/ops/coll/net_coll.h). Called by coll_ops.cc
// when the communicator spans several nodes. Arguments are checked by the API (api_coll.cc).
#pragma once
#include <stdint.h>
#include <functional>
#include <string>
#include <vector>
#include "runtime/net_coll_info.h"
#include "runtime/ops.h"

namespace mkccl {

mkcclResult_t netAllGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t);
mkcclResult_t netReduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                                 mkcclRedOp_t op);
// A ReduceScatter (sum) whose input is produced during the call, block by block, so that the
// network moves the first blocks while the rest is computed (GEMM+ReduceScatter's split route
// across nodes, src/ops/gemm_rs/net_split.cu). Block g (global rank g's share: `units` units of
// `unitElems` elements, at send + g * units * unitElems) is made by produce(g0, n, u0, un): enqueue
// on ctx.stream the work that writes units [u0, u0 + un) of blocks g0 .. g0 + n - 1 into send. The
// order: the other nodes' blocks in `pieces` pieces of units (for each piece: produce it, reduce
// it over NVLink into the counterpart's S slot, put it on the network), then this node's blocks
// whole, their NVLink ReduceScatter into recv, and recv = the nodes' partials summed in node order
// (as netReduceScatterOp), each piece as soon as it has come from every other node. send is a
// symmetric buffer, as netReduceScatterOp's. *ran false (nothing enqueued): a block does not fit
// one window slot, or t is not a float type (the caller runs another route).
struct NetProducedInput {
  size_t unitElems = 0, units = 0;
  int pieces = 1;  // 1 .. netcoll::kMaxPieces, at most `units`
  std::function<mkcclResult_t(int g0, int n, size_t u0, size_t un)> produce;
};
mkcclResult_t netReduceScatterProducedOp(OpCtx& ctx, const NetProducedInput& in, void* send, void* recv,
                                         mkcclDataType_t t, bool* ran);

// Whether a rank's block of `blockBytes` fits one window slot (the pieced collectives below run one
// round: *ran false otherwise), for a caller that must know before it enqueues anything.
mkcclResult_t netPiecedFits(OpCtx& ctx, size_t blockBytes, bool* fits);

// An AllGather whose output is consumed during the call, piece by piece, so that the work on the
// first pieces overlaps the network moving the rest (AllGather+GEMM's split route across nodes,
// src/ops/ag_gemm/net_split.cu). gathered holds every rank's block (global rank g's: `units` units
// of `unitElems` elements at gathered + g * units * unitElems); this rank's block must be in place
// on entry. The order: this rank's block in `pieces` pieces into its S slot and onto the network;
// this node's blocks over NVLink, then consume(g0, n, u0 = 0, un = units) for them; then for each
// piece, once it has landed from every other node: its rows copied to their place, spread over
// NVLink, consume(g0, n, u0, un) for the other nodes' blocks. consume enqueues on ctx.stream the
// work on units [u0, u0 + un) of blocks g0 .. g0 + n - 1. *ran false (nothing enqueued): a block
// does not fit one window slot (the caller runs another route).
struct NetConsumedInput {
  size_t unitElems = 0, units = 0;
  int pieces = 1;  // 1 .. netcoll::kMaxPieces, at most `units`
  std::function<mkcclResult_t(int g0, int n, size_t u0, size_t un)> consume;
};
mkcclResult_t netAllGatherConsumedOp(OpCtx& ctx, const NetConsumedInput& in, void* gathered, mkcclDataType_t t,
                                     bool* ran);

mkcclResult_t netAllReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                             mkcclRedOp_t op);


}  // namespace mkccl
