// GEMM+RS/AR with MKCCL_GEMM_RS_PUSH=ce: the fused kernel's consumers stage each partial locally
// (fragment order, the team path's staging slots) and raise a "staged" flag per half; the GPU's
// copy engines send them, so no SM spends time on NVLink stores. Per owner, one stream of the
// communicator (src/runtime/copy_engines.h):
//   wait for the caller's stream up to the kernel (fork event), wait for the go word the kernel
//   posts once every rank has entered the call; then, run by run of staging slots (slots are in
//   production order, gemm_rs_layout.cuh): one batch of waits for the run's staged flags, one
//   copy of the run into the owner's rx slots, one batch of writes of the owner's flags (each
//   fenced after the copy). The owner's final epilogues wait for those flags as for any push.
// The streams' waits have no timeout of their own: the kernel posts the go word after a failed
// entry wait too, and raises every staged flag if its GEMM pipeline fails, so they always end.
#include <string.h>
#include <algorithm>
#include "kernels/device/signal.cuh"
#include "kernels/fused/gemm_rs_host.cuh"
#include "runtime/check.h"
#include "runtime/cudriver.h"

namespace mkccl {
namespace rs {

namespace {
// Tiles per copy: 2 waits each in one batch (a batch holds fewer than 256 operations); 64 tiles of
// 128 x 256 bf16 are 4 MiB.
constexpr int kRunTiles = 64;
}  // namespace

mkcclResult_t ceSend(const CopyEngines& ce, const ReduceParams& p, uint64_t seq, cudaStream_t stream) {
  const Layout& L = p.L;
  const uint64_t want = dev::flagValue(seq), go = dev::flagValue(seq, 1);
  const int me = p.rank;
  uint64_t* myFlags = p.wsOf[me] + kOpFlagSlot;
  CUstreamBatchMemOpParams ops[2 * kRunTiles];
  for (int j = 0; j < L.ws - 1; ++j) {
    const int dst = L.chunkAt(me, j);
    uint64_t* dstFlags = p.wsOf[dst] + kOpFlagSlot;
    cudaStream_t s = ce.stream[j];
    CUstream cs = reinterpret_cast<CUstream>(s);
    CUDA_CHECK(cudaStreamWaitEvent(s, ce.fork, 0));
    CU_CHECK(cu().streamWaitValue64(cs, reinterpret_cast<CUdeviceptr>(p.ceGo), go, CU_STREAM_WAIT_VALUE_GEQ));
    for (int u0 = 0; u0 < L.tiles; u0 += kRunTiles) {
      const int u1 = std::min(u0 + kRunTiles, L.tiles);
      memset(ops, 0, sizeof(ops));
      int n = 0;
      for (int u = u0; u < u1; ++u)
        for (int h = 0; h < 2; ++h) {
          CUstreamBatchMemOpParams& op = ops[n++];
          op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
          op.waitValue.address = reinterpret_cast<CUdeviceptr>(myFlags + L.ceSlot(j, u, h));
          op.waitValue.value64 = want;
          op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        }
      CU_CHECK(cu().streamBatchMemOp(cs, static_cast<unsigned>(n), ops, 0));
      CUDA_CHECK(cudaMemcpyAsync(p.scratchOf[dst] + L.rxOffset(j, u0), p.scratchOf[me] + L.stagingOffset(j, u0),
                                 size_t(u1 - u0) * size_t(L.tileBytes()), cudaMemcpyDeviceToDevice, s));
      memset(ops, 0, sizeof(ops));
      n = 0;
      for (int u = u0; u < u1; ++u) {
        CUstreamBatchMemOpParams& op = ops[n++];
        op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        op.writeValue.address = reinterpret_cast<CUdeviceptr>(dstFlags + L.rxSlot(j, u));
        op.writeValue.value64 = want;
        op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;  // fenced after the copy
      }
      CU_CHECK(cu().streamBatchMemOp(cs, static_cast<unsigned>(n), ops, 0));
    }
    CUDA_CHECK(cudaEventRecord(ce.join[j], s));
    CUDA_CHECK(cudaStreamWaitEvent(stream, ce.join[j], 0));
  }
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
