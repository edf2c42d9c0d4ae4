// What the inter-node collectives (src/ops/coll/coll_net.cc) need from the communicator's network
// state, which netInitComm (net_init.cc) fills.
#pragma once
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"

struct mkcclComm;

namespace mkccl {

// What the collectives need from the inter-node state (filled by netInitComm).
struct NetCollInfo {
  char* window = nullptr;     // the network window: device memory, or pinned host memory mapped into
                              // the GPU; usable by kernels and by cudaMemcpyAsync (cudaMemcpyDefault)
  uint64_t windowBytes = 0;   // the same on every rank
  bool windowOnHost = false;  // the transport cannot reach GPU memory (a socket: libfabric tcp)
  int nNodes = 1, node = 0, localRanks = 1;
  bool uniform = false;       // every node has localRanks ranks (counterparts exist)
  std::vector<int> rankAt;    // [node * localRanks + local] -> rank, when uniform
  std::string nodeSizes;      // "node 0: 3 ranks, node 1: 1 rank" (for the error when not uniform)
};
// Null when the communicator has one node.
NetCollInfo* netCollInfo(mkcclComm* comm);
// For an op across nodes that needs every node to hold the same number of ranks (counterparts):
// the network state, or mkcclInternalError without one, or netNotUniform's error.
mkcclResult_t netUniformCollInfo(mkcclComm* comm, const char* op, NetCollInfo** out);
// The mkcclInvalidUsage of `op` on nodes of different sizes (naming them and MKCCL_RANKS_PER_NODE).
mkcclResult_t netNotUniform(const NetCollInfo& info, const char* op);
// The proxy's state in one line ("" without a network), for error messages.
std::string netDescribe(const mkcclComm* comm);

}  // namespace mkccl
