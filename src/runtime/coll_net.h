// Collectives across nodes (hierarchical): NVLink inside a node through the NVLink collective
// kernel (src/kernels/coll), the network between counterpart ranks (the same local rank in every
// node) through FIFO -> proxy -> transport (src/kernels/coll/net_coll.h). Called by coll_ops.cc
// when the communicator spans several nodes. Arguments are checked by the API (api_coll.cc).
#pragma once
#include <stdint.h>
#include <string>
#include <vector>
#include "runtime/ops.h"

namespace mkccl {

// What the collectives need from the inter-node state (filled by netInitComm).
struct NetCollInfo {
  char* window = nullptr;     // the network window: device memory, or pinned host memory mapped into
                              // the GPU; usable by kernels and by cudaMemcpyAsync (cudaMemcpyDefault)
  uint64_t windowBytes = 0;   // the same on every rank
  int nNodes = 1, node = 0, localRanks = 1;
  bool uniform = false;       // every node has localRanks ranks (counterparts exist)
  std::vector<int> rankAt;    // [node * localRanks + local] -> rank, when uniform
  std::string nodeSizes;      // "node 0: 3 ranks, node 1: 1 rank" (for the error when not uniform)
};
// Null when the communicator has one node.
NetCollInfo* netCollInfo(mkcclComm* comm);
// The proxy's state in one line ("" without a network), for error messages.
std::string netDescribe(const mkcclComm* comm);

mkcclResult_t netAllGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t);
mkcclResult_t netReduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                                 mkcclRedOp_t op);
mkcclResult_t netAllReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                             mkcclRedOp_t op);

// Loads every kernel these ops launch (netInitComm calls it). Why: with lazy module loading,
// CUDA's default, a kernel's first launch may wait until every kernel of the context has finished;
// if one of them waits for the network, and the network for this very thread, nothing moves.
mkcclResult_t netCollPreload();

}  // namespace mkccl
