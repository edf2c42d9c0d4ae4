#include "runtime/copy_engines.h"
#include <string.h>
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/cudriver.h"

namespace mkccl {

bool copyEnginesUsable() { return cu().streamWaitValue64 != nullptr && cu().streamBatchMemOp != nullptr; }

mkcclResult_t copyEnginesGet(mkcclComm* comm, int streams, CopyEngines** out) {
  if (streams < 1 || streams > kMaxLocalRanks)
    return setError(mkcclInternalError, "copy engines: %d streams asked for (1..%d)", streams, kMaxLocalRanks);
  CopyEngines& ce = comm->ce;
  if (!ce.fork) CUDA_CHECK(cudaEventCreateWithFlags(&ce.fork, cudaEventDisableTiming));
  // Only as many as a call has used: every stream takes one of the context's hardware queues.
  for (; ce.count < streams; ++ce.count) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&ce.stream[ce.count], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&ce.join[ce.count], cudaEventDisableTiming));
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
