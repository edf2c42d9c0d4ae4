// Symmetric workspace inside a node: one allocation per rank of equal size, each mapped into
// every local peer's address space. CUDA VMM (cuMemCreate with POSIX file descriptors), the fds
// passed between processes over abstract Unix sockets (SCM_RIGHTS); works in one process too.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include "mkccl.h"
#include "runtime/devcomm.h"

struct mkcclComm;

namespace mkccl {

struct SymWorkspace {
  size_t bytes = 0;                        // per rank (flags + data), rounded to the granularity
  size_t flagsBytes = 0;
  CUdeviceptr base = 0;                    // VA reservation of localRanks * bytes
  CUmemGenericAllocationHandle handles[kMaxLocalRanks] = {};  // [localRank] is ours
  bool mapped[kMaxLocalRanks] = {};
  char* peer[kMaxLocalRanks] = {};         // peer q's workspace in this process
};

// Collective over the comm's local ranks (uses comm->bootstrap). Zeroes the flags.
mkcclResult_t symWorkspaceCreate(mkcclComm* comm, size_t bytes, size_t flagsBytes);
void symWorkspaceDestroy(mkcclComm* comm);

}  // namespace mkccl
