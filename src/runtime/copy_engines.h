// Streams for the work a call hands to the GPU's copy engines (AllGather+GEMM's ce plan,
// src/ops/ag_gemm/ce.cu; GEMM+RS/AR's ce push, ops/gemm_rs/ce.cu): up to kMaxLocalRanks of
// them (one per receiver, or several per owner), made as calls first need them, with the events
// that fork them from the caller's stream and join them back.
// Stream 0 (with the fork event and join[0]) is also the second stream of the fused MoE calls
// (ops/moe/moe_handle.h, sideStreamOf): one per communicator, not one per handle.
// These streams wait on memory (cuStreamWaitValue64) for words that kernels or other ranks' copy
// engines raise. CUDA runs a context's streams over a few hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), and a stream that waits holds up what shares its
// queue and was enqueued after it. A call enqueues its streams' work so that every wait can be met
// by work enqueued before it (ours and every rank's: our own shard before forwarded ones, slot j's
// batches before slot j+1's, whose sums need them), so within a communicator a shared queue only
// delays. Streams are still made only as calls need them (fewer to share the queues with the
// caller's). Where several ranks share a context on one GPU (MKCCL_SHARE_GPUS, tests), their
// threads enqueue in any order, so one rank's waiting stream can sit in front of the stream another
// rank's wait needs: the likely cause of one test run that timed out (2xH200, the AllGather+GEMM
// ce ring at 4 ranks on 2 GPUs), so those tests raise CUDA_DEVICE_MAX_CONNECTIONS to 32.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "mkccl.h"
#include "kernels/abi/devcomm.h"

struct mkcclComm;

namespace mkccl {

struct CopyEngines {
  int count = 0;  // streams made so far: stream[0, count)
  cudaStream_t stream[kMaxLocalRanks] = {};
  cudaEvent_t fork = nullptr;
  cudaEvent_t join[kMaxLocalRanks] = {};
};

// Whether the driver has the stream memory operations these streams' work needs
// (cuStreamWaitValue64, cuStreamBatchMemOp; after cuDriverLoad()).
bool copyEnginesUsable();
// The communicator's streams, at least `streams` of them (made on its device as needed).
mkcclResult_t copyEnginesGet(mkcclComm* comm, int streams, CopyEngines** out);
// At destroy, after the last call's work has finished.
void copyEnginesFree(mkcclComm* comm);

// One 64-bit operation for cuStreamBatchMemOp: a write of `value` fenced after the stream's earlier
// work (a copy's flag), or a wait until the word is >= `value`.
CUstreamBatchMemOpParams ceWrite64(uint64_t* at, uint64_t value);
CUstreamBatchMemOpParams ceWaitGeq64(const uint64_t* at, uint64_t value);

}  // namespace mkccl
