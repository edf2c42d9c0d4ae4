// Symmetric memory inside a node: one allocation per rank of equal size, each mapped into every
// local peer's address space. CUDA VMM (cuMemCreate with POSIX file descriptors), the fds passed
// between processes over abstract Unix sockets (SCM_RIGHTS); works in one process too.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include "mkccl.h"
#include "kernels/abi/devcomm.h"

struct mkcclComm;

namespace mkccl {

// One symmetric allocation: peer[q] is local rank q's share, mapped in this process.
struct SymRegion {
  size_t bytes = 0;                        // per rank, rounded to the allocation granularity
  CUdeviceptr base = 0;                    // VA reservation of localRanks * bytes
  CUmemGenericAllocationHandle handles[kMaxLocalRanks] = {};  // [localRank] is ours
  bool mapped[kMaxLocalRanks] = {};
  char* peer[kMaxLocalRanks] = {};
  bool rdmaCapable = false;                // allocated with gpuDirectRDMACapable
};

// The communicator's workspace: [0, flagsBytes) flags, then data (devcomm.h has the layout).
struct SymWorkspace : SymRegion {
  size_t flagsBytes = 0;
};

// Scratch regions for ops whose buffers outgrow the workspace (e.g. a gathered A of a fused op).
constexpr int kSymScratchSlots = 4;
enum SymScratchSlot : int { kScratchAllGatherGemm = 0, kScratchGemmReduce = 1, kScratchRingAttention = 2, kScratchSpare3 = 3 };

// Collective over the comm's ranks (uses comm->bootstrap): every rank passes the same bytes.
mkcclResult_t symRegionCreate(mkcclComm* comm, size_t bytes, SymRegion* out);
void symRegionDestroy(mkcclComm* comm, SymRegion* region);

mkcclResult_t symWorkspaceCreate(mkcclComm* comm, size_t bytes, size_t flagsBytes);  // zeroes the flags
void symWorkspaceDestroy(mkcclComm* comm);

// A scratch region of at least `bytes` per rank in `slot`, kept for later calls. Growing it is
// collective (every rank of the comm must make the same call with the same bytes, as they do when
// they make the same op call), waits for the comm's outstanding work (kernels may still use the old
// region) and rounds up to limit re-growth. Contents are undefined after growth.
mkcclResult_t symScratchGet(mkcclComm* comm, int slot, size_t bytes, const SymRegion** out);
void symScratchDestroyAll(mkcclComm* comm);

}  // namespace mkccl
