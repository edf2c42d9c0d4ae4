// GEMM+RS/AR with the copy-engine push (gemm_rs.push=ce): the fused kernel stages its partials locally and counts
// them in batches (slot j, B tiles; kernels/gemm_rs/push.cuh); the GPU's copy engines carry each batch to
// its owner (ring reduction: to our neighbour) while the GEMM keeps every SM. Per slot j (into
// rank q's rx slot j), one stream (gemm_rs.ce_streams: n, batches round-robin over them):
//   wait for the caller's stream up to the kernel (the fork event: the batch counts are zeroed),
//   then batch by batch, in the order the kernel fills them: wait for the batch's word (the
//   kernel raises it once the batch is staged and q has entered the call), one copy of the
//   batch's tiles from our staging slots into q's receive slots, one 64-bit write of q's flag for
//   the batch (fenced after the copy). The caller's stream joins every copy stream.
// Every value waited for or written is a constant (kCeValue; the words and flags are cleared before
// the kernel), so that a CUDA graph may replay these operations as they were enqueued.
// Enqueued after the kernel: the driver does not see a stream wait's dependency on the kernel,
// and a wait enqueued first can hold the kernel's launch behind it (the first version of
// tools/probes/ce_wait_latency.cu hung that way). The waits have no timeout of their own: the
// last CTA to end raises every word (ceEndOfKernel), after a failed call too; the owner's waits
// for the flags are the bounded ones.
// A wait for a word the kernel writes wakes its stream ~11-16 us after the write (2xH200,
// tools/probes/ce_wait_latency.cu), and one copy with its wait costs ~6 us besides its bytes.
#include <algorithm>
#include "kernels/device/signal.cuh"
#include "ops/gemm_rs/host.h"
#include "base/check.h"
#include "runtime/copy_engines.h"
#include "runtime/cudriver.h"

namespace mkccl {
namespace rs {

mkcclResult_t ceCopies(const CopyEngines& ce, const ReduceParams& p, int streamsPerSlot, cudaStream_t stream) {
  const Layout& L = p.L;
  const uint64_t want = kCeValue;  // a constant: a graph replays these operations as they are
  uint64_t* own = p.wsOf[p.rank] + kOpFlagSlot;
  const int per = ceStreamsPerSlot(L, streamsPerSlot);
  for (int j = 0; j < L.ws - 1; ++j) {
    const int q = L.sendTo(p.rank, j);  // where our slot j goes (its owner; ring: our neighbour)
    for (int k = 0; k < per; ++k) CUDA_CHECK(cudaStreamWaitEvent(ce.stream[j * per + k], ce.fork, 0));
    for (int b = 0; b < L.ceBatches(); ++b) {
      // Batches round-robin over the slot's streams: one stream's wake-up and copy tail overlap
      // the next batch's copy on another.
      cudaStream_t s = ce.stream[j * per + b % per];
      const int u0 = b * L.ceBatch;
      CU_CHECK(cu().streamWaitValue64(reinterpret_cast<CUstream>(s),
                                      reinterpret_cast<CUdeviceptr>(own + L.ceWordSlot(j, b)), want,
                                      CU_STREAM_WAIT_VALUE_GEQ));
      CUDA_CHECK(cudaMemcpyAsync(p.scratchOf[q] + L.rxOffset(j, u0), p.scratchOf[p.rank] + L.stagingOffset(j, u0),
                                 size_t(L.ceBatchTiles(b)) * size_t(L.tileBytes()), cudaMemcpyDeviceToDevice, s));
      // q's flag of this batch, in its scratch (Layout::ceRxFlagsOffset), after the copy.
      uint64_t* flags = reinterpret_cast<uint64_t*>(p.scratchOf[q] + L.ceRxFlagsOffset());
      CUstreamBatchMemOpParams op = ceWrite64(flags + L.rxSlot(j, u0), want);
      CU_CHECK(cu().streamBatchMemOp(reinterpret_cast<CUstream>(s), 1, &op, 0));
    }
    for (int k = 0; k < per; ++k) {
      CUDA_CHECK(cudaEventRecord(ce.join[j * per + k], ce.stream[j * per + k]));
      CUDA_CHECK(cudaStreamWaitEvent(stream, ce.join[j * per + k], 0));
    }
  }
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
