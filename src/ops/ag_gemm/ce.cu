// AllGather+GEMM's ce plan: the fused kernel runs on every SM (no comm CTAs, no side teams) while
// the GPU's copy engines push this rank's shard to every receiver. Per receiver, one stream:
//   wait for the caller's stream up to the kernel (the fork event: A is ready), wait for the go
//   word the kernel posts once every rank has entered the call (their counters are reset and
//   their earlier kernels are done with their regions), then, group of chunks by group, front to
//   back (the kernel's tile order expects chunk c of every peer at about the same time): one copy
//   of the group's rows into the receiver's region, one batch of 64-bit writes that completes the
//   group's chunk counters (each write fenced after the copy: the receiver's producer waits on them
//   exactly as for pushed slices). The caller's stream then joins every copy stream, and copies the
//   gathered A out when the user asked for it.
// ag_gemm.ce=ring: every rank's engines copy only to the next rank, its own shard and, group
// by group as each lands here (a stream wait on our counters, which the previous rank's engines
// write), the shards of the ranks before it: the same bytes leave each GPU, but to one neighbour,
// which the copy engines carry at ~345 GB/s out of a GPU where copies to 3 peers at once move ~185
// (4xH200, tools/probes/ce_overlap.cu ring mode). Rank me-i's shard arrives i-1 groups behind.
// The forwarding streams' waits are released by the caller's stream after the kernel (below).
// Why copy engines: on 2xH200 a 64 MiB copy to the peer ran at 362-367 GB/s while cuBLAS kept its
// speed beside it (8192x2048x8192: GEMM 324-340 us alone, 330-356 us with the copy running), where
// SM pushes cost the GEMM its SMs or slowed it (tools and numbers: docs/AG_GEMM.md).
// The streams' waits have no timeout of their own: the kernel always posts the go word (after a
// failed, bounded wait too), and the counters it waits on are bounded waits.
// fp8 block scales (L.scaleRowBytes > 0): each group's scale rows are a second copy into the
// receiver's scale area, between the group's row copy and its counter writes, so the counters
// cover them as the pushes' do (layout.h).
#include <algorithm>
#include "kernels/device/signal.cuh"
#include "ops/ag_gemm/host.h"
#include "base/check.h"
#include "runtime/cudriver.h"

namespace mkccl {
namespace ag {


namespace {

// One group's 64-bit operations on chunks [c0, c1) of sender `origin`: counter writes into rank
// q's counters (each fenced after the stream's earlier copy), or waits for our own counters to
// reach the same values (the ring: the group landed here).
mkcclResult_t groupOps(const PushArgs& p, int q, int origin, int c0, int c1, uint64_t F, bool wait,
                       cudaStream_t s) {
  const Layout& L = p.L;
  CUstreamBatchMemOpParams ops[kMaxGroupChunks];
  for (int k = c0; k < c1; ++k) {
    uint64_t* at = p.counters[q] + L.chunkSlot(origin, k);
    const uint64_t v = F + static_cast<uint64_t>(L.slicesOfChunk(k));
    ops[k - c0] = wait ? ceWaitGeq64(at, v) : ceWrite64(at, v);  // a write: fenced after the copy
  }
  CU_CHECK(cu().streamBatchMemOp(reinterpret_cast<CUstream>(s), static_cast<unsigned>(c1 - c0), ops, 0));
  return mkcclSuccess;
}

// Ring: the rank whose shard our stream i carries to the next rank (i = 0: ours).
int ringOrigin(const Layout& L, int i) { return (L.me - i + L.ws) % L.ws; }

}  // namespace

mkcclResult_t ceCopies(const CopyEngines& ce, const FusedCall& c, int64_t groupBytes, bool ring, cudaStream_t stream) {
  const PushArgs& p = c.push;
  const Layout& L = p.L;
  // Constants only, so that a graph replays the same operations correctly: the counters start
  // from 0 under this plan (PushArgs::counterBase) and the go word is cleared before the kernel.
  const uint64_t F = 0, go = kCeGoValue;
  const int group = ceGroupChunks(L, groupBytes);
  // Stream i carries: direct, our shard to receiver i (receiverAt); ring, i < ws-1, the shard of
  // rank me-i to rank me+1 (i = 0: ours, from A; i > 0: forwarded from our region, group by group
  // as it lands); and the last stream our shard into our own region when ownToRegion.
  const int sends = L.ws - 1, streams = sends + (p.ownToRegion ? 1 : 0);
  for (int i = 0; i < streams; ++i) {
    const bool own = i == sends;  // our shard into our region
    const int q = ring && !own ? (L.me + 1) % L.ws : receiverAt(L, i);
    const int origin = ring && !own ? ringOrigin(L, i) : L.me;
    const bool forward = origin != L.me;
    const char* src = forward ? p.region[L.me] + static_cast<int64_t>(origin) * L.shardBytes() : p.A;
    const int64_t at = static_cast<int64_t>(origin) * L.shardBytes();
    const int64_t sAt = static_cast<int64_t>(origin) * L.m * L.scaleRowBytes;  // the shard's scale rows
    const char* sSrc = forward ? scaleArea(p, L.me) + sAt : reinterpret_cast<const char*>(p.aScales);
    cudaStream_t s = ce.stream[i];
    CUDA_CHECK(cudaStreamWaitEvent(s, ce.fork, 0));
    CU_CHECK(cu().streamWaitValue64(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(p.ceGo), go,
                                    CU_STREAM_WAIT_VALUE_GEQ));
    for (int c0 = 0; c0 < L.nChunks; c0 += group) {
      const int c1 = std::min(c0 + group, L.nChunks);
      const int64_t r0 = static_cast<int64_t>(c0) << L.chunkLog2;
      const int64_t r1 = std::min(static_cast<int64_t>(c1) << L.chunkLog2, static_cast<int64_t>(L.m));
      if (forward) MKCCL_CHECK(groupOps(p, L.me, origin, c0, c1, F, /*wait=*/true, s));
      CUDA_CHECK(cudaMemcpyAsync(p.region[q] + at + r0 * L.rowBytes, src + r0 * L.rowBytes, (r1 - r0) * L.rowBytes,
                                 cudaMemcpyDeviceToDevice, s));
      if (L.scaleRowBytes > 0)
        CUDA_CHECK(cudaMemcpyAsync(scaleArea(p, q) + sAt + r0 * L.scaleRowBytes, sSrc + r0 * L.scaleRowBytes,
                                   (r1 - r0) * L.scaleRowBytes, cudaMemcpyDeviceToDevice, s));
      MKCCL_CHECK(groupOps(p, q, origin, c0, c1, F, /*wait=*/false, s));
    }
    CUDA_CHECK(cudaEventRecord(ce.join[i], s));
  }
  // Ring: a forwarding stream waits for counters that only the previous rank's engines raise, so
  // after a failed call (that rank never sent) it would wait for ever. Once our kernel has ended,
  // the caller's stream sets every forwarded chunk's counter to its complete value: after a good
  // call they are there already (the kernel waited for each), after a failed one (its error
  // recorded) this releases the streams, which then copy whatever landed. Before the joins.
  if (ring)
    for (int i = 1; i < sends; ++i)
      for (int c0 = 0; c0 < L.nChunks; c0 += group)
        MKCCL_CHECK(groupOps(p, L.me, ringOrigin(L, i), c0, std::min(c0 + group, L.nChunks), F, /*wait=*/false,
                             stream));
  for (int i = 0; i < streams; ++i) CUDA_CHECK(cudaStreamWaitEvent(stream, ce.join[i], 0));
  // The gathered A: the kernel has waited for every peer's rows in the region.
  if (p.gathered != nullptr) {
    for (int q = 0; q < L.ws; ++q) {
      if (q == L.me) continue;
      const int64_t off = static_cast<int64_t>(q) * L.shardBytes();
      CUDA_CHECK(cudaMemcpyAsync(p.gathered + off, p.region[L.me] + off, L.shardBytes(), cudaMemcpyDeviceToDevice,
                                 stream));
    }
    if (p.gatheredOwn)
      CUDA_CHECK(cudaMemcpyAsync(p.gathered + static_cast<int64_t>(L.me) * L.shardBytes(), p.A, L.shardBytes(),
                                 cudaMemcpyDeviceToDevice, stream));
  }
  return mkcclSuccess;
}

}  // namespace ag
}  // namespace mkccl
