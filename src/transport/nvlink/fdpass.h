// Passing file descriptors between the local ranks of a communicator (SCM_RIGHTS over abstract
// Unix sockets named after the communicator's token). Works between processes and between the
// threads of one process alike.
#pragma once
#include <stdint.h>
#include <functional>
#include <vector>
#include "mkccl.h"

namespace mkccl {

// Every local rank sends `myFd` to every other local rank and receives theirs: fds[q] is local rank
// q's (fds[localRank] = myFd, not duplicated). `localRanks` are the global ranks of the node by local
// rank; `token` names the sockets (the communicator's, the same on every rank). Collective over the
// whole communicator: `barrier` is the communicator's (bounded) host barrier. Bounded by timeoutMs.
// The caller closes the received fds.
mkcclResult_t exchangeFds(uint64_t token, const std::function<mkcclResult_t()>& barrier,
                          const std::vector<int>& localRanks, int localRank, int myFd, int timeoutMs,
                          std::vector<int>* fds);

}  // namespace mkccl
