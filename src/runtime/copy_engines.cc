#include "runtime/copy_engines.h"
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

}  // namespace mkccl
