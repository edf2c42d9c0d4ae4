// The device error site of the collectives' in-place paths over registered buffers
// (kernels/coll/coll_direct.cuh): a peer did not take the in-place path in the same call, or
// described its buffer differently. Shared with the host, which words the message (runtime/comm.cc).
#pragma once
#include "kernels/abi/devcomm.h"

namespace mkccl {

// DevError for it: code mkcclInvalidUsage, peer = the local peer, seen / want = what the peer
// posted and what this rank expected (entry flag, or a length in bytes).
constexpr int kSiteDirectMismatch = kSiteUser + 1;

}  // namespace mkccl
