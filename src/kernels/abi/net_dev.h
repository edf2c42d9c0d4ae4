// The device view of the inter-node transport (DevComm::net; null when the communicator has one
// node). Filled by netInitComm (src/runtime/net_init.cc), copied to device memory once.
#pragma once
#include <stdint.h>
#include "kernels/abi/fifo.h"

namespace mkccl {

struct NetDevComm {
  FifoDev fifo;           // commands to this rank's proxy
  char* window;           // this rank's network window (device memory): sources and destinations of puts
  uint64_t windowBytes;   // the same on every rank
  uint64_t* flags;        // arrival flags, [nranks][flagsPerPeer]: flags[s*flagsPerPeer + f] is raised by
                          // sender s; GPU-visible (device memory for ib, host-mapped for efa)
  int flagsPerPeer;       // <= kFifoMaxFlags
  int nranks;
  const int* rankNode;    // device array: node of each rank
  int nNodes;
  const int* nodePeer;    // device array [nNodes]: the rank with this rank's local index in each node
                          // (its counterpart there; itself in its own node), -1 where there is none
};

}  // namespace mkccl
