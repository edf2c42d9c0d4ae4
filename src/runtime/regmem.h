// Registered buffers (mkcclMemAlloc / mkcclCommRegister): user memory that every local peer maps,
// so that an op reads or writes it in place instead of staging it through the symmetric
// workspace. docs/GRAPHS.md has the rules.
#pragma once
#include <stddef.h>
#include <atomic>
#include <memory>
#include <vector>
#include <cuda.h>
#include "mkccl.h"
#include "kernels/abi/devcomm.h"

struct mkcclComm;

namespace mkccl {

// One registration of a communicator: this rank's [base, base + bytes), and the same buffer of
// every local peer, mapped here (peer[localRank] == base).
struct Registration {
  char* base = nullptr;
  size_t bytes = 0;
  char* peer[kMaxLocalRanks] = {};
  // Mappings of the peers' whole allocations (their buffers lie inside).
  CUdeviceptr map[kMaxLocalRanks] = {};
  size_t mapBytes[kMaxLocalRanks] = {};
  CUmemGenericAllocationHandle handle[kMaxLocalRanks] = {};
  // Captured CUDA graphs alive that use it (a graph's user object drops its count when the graph
  // is destroyed): deregistration is refused while > 0.
  std::shared_ptr<std::atomic<int>> graphUses = std::make_shared<std::atomic<int>>(0);
};

// The registration of comm that holds [p, p + bytes) entirely, or null. Host side, at enqueue.
Registration* regFind(mkcclComm* comm, const void* p, size_t bytes);
// A call being captured uses reg: the graph keeps it registered while it exists.
mkcclResult_t regNoteUse(Registration* reg, cudaStream_t stream, bool capturing);
// At communicator destruction: unmaps every registration.
void regDestroyAll(mkcclComm* comm);

}  // namespace mkccl
