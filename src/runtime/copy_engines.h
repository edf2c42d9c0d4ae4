// Streams for the work a call hands to the GPU's copy engines (AllGather+GEMM's ce plan,
// src/kernels/fused/ag_gemm_ce.cu; GEMM+RS/AR's ce push, gemm_rs_ce.cu): kMaxLocalRanks of them
// (one per receiver, or several per owner), made on a communicator's first use, with the events
// that fork them from the caller's stream and join them back.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "mkccl.h"
#include "runtime/devcomm.h"

struct mkcclComm;

namespace mkccl {

struct CopyEngines {
  bool ready = false;
  cudaStream_t stream[kMaxLocalRanks] = {};
  cudaEvent_t fork = nullptr;
  cudaEvent_t join[kMaxLocalRanks] = {};
};

// Whether the driver has the stream memory operations these streams' work needs
// (cuStreamWaitValue64, cuStreamBatchMemOp; after cuDriverLoad()).
bool copyEnginesUsable();
// The communicator's streams (created on first use, on its device).
mkcclResult_t copyEnginesGet(mkcclComm* comm, CopyEngines** out);
// At destroy, after the last call's work has finished.
void copyEnginesFree(mkcclComm* comm);

// One 64-bit operation for cuStreamBatchMemOp: a write of `value` fenced after the stream's earlier
// work (a copy's flag), or a wait until the word is >= `value`.
CUstreamBatchMemOpParams ceWrite64(uint64_t* at, uint64_t value);
CUstreamBatchMemOpParams ceWaitGeq64(const uint64_t* at, uint64_t value);

}  // namespace mkccl
