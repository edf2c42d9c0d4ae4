#include "runtime/copy_engines.h"
#include <string.h>
#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/cudriver.h"

namespace mkccl {

bool copyEnginesUsable() { return cu().streamWaitValue64 != nullptr && cu().streamBatchMemOp != nullptr; }

mkcclResult_t copyEnginesGet(mkcclComm* comm, CopyEngines** out) {
  CopyEngines& ce = comm->ce;
  if (!ce.ready) {
    CUDA_CHECK(cudaEventCreateWithFlags(&ce.fork, cudaEventDisableTiming));
    // Every slot, whatever the ranks: GEMM+RS/AR may spread one owner's batches over several
    // streams (MKCCL_GEMM_RS_CE_STREAMS).
    for (int i = 0; i < kMaxLocalRanks; ++i) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&ce.stream[i], cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&ce.join[i], cudaEventDisableTiming));
    }
    ce.ready = true;
  }
  *out = &ce;
  return mkcclSuccess;
}

void copyEnginesFree(mkcclComm* comm) {
  CopyEngines& ce = comm->ce;
  if (ce.fork) cudaEventDestroy(ce.fork);
  for (int i = 0; i < kMaxLocalRanks; ++i) {
    if (ce.stream[i]) cudaStreamDestroy(ce.stream[i]);
    if (ce.join[i]) cudaEventDestroy(ce.join[i]);
  }
  ce = CopyEngines{};
}

CUstreamBatchMemOpParams ceWrite64(uint64_t* at, uint64_t value) {
  CUstreamBatchMemOpParams op;
  memset(&op, 0, sizeof(op));
  op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  op.writeValue.address = reinterpret_cast<CUdeviceptr>(at);
  op.writeValue.value64 = value;
  op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;  // fenced after the stream's earlier work
  return op;
}

CUstreamBatchMemOpParams ceWaitGeq64(const uint64_t* at, uint64_t value) {
  CUstreamBatchMemOpParams op;
  memset(&op, 0, sizeof(op));
  op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
  op.waitValue.address = reinterpret_cast<CUdeviceptr>(at);
  op.waitValue.value64 = value;
  op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  return op;
}

}  // namespace mkccl
