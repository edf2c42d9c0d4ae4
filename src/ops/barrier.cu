// The runtime's own small kernels: the barrier (inside the node, and across nodes through the
// network path). (The simple AllGather that proved the symmetric memory and signalling was replaced
// by the collectives of src/kernels/coll.)
#include "kernels/device/net.cuh"
#include "kernels/device/signal.cuh"
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/ops.h"

namespace mkccl {
namespace {

__global__ void barrierKernel(DevComm c) {
  c.seq = dev::beginCall(c);  // the device's number: a replayed graph's barrier matches its peers'
  dev::barrierLocal(c, 0);
}
// Node barrier, then a signal to and from every rank of the other nodes (flag 0, netBarrier's).
__global__ void netBarrierKernel(DevComm c) { dev::netBarrier(c, 0); }
// Takes the call's ticket for kernels that only peek at the number (dev::peekCallSeq): the fused
// GEMM ops, whose engine has no hook at the very start of every CTA (comm CTAs leave first).
__global__ void seqBumpKernel(DevComm c) { dev::takeCallSeq(c); }

}  // namespace

// The three kernels above (src/ops/preload.cu loads them at init).
void barrierKernels(const void** out) {
  out[0] = reinterpret_cast<const void*>(&barrierKernel);
  out[1] = reinterpret_cast<const void*>(&netBarrierKernel);
  out[2] = reinterpret_cast<const void*>(&seqBumpKernel);
}

mkcclResult_t seqBumpOp(OpCtx& ctx) {
  seqBumpKernel<<<1, 1, 0, ctx.stream>>>(ctx.dev);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t barrierOp(OpCtx& ctx) {
  if (ctx.comm->nNodes > 1) {
    if (ctx.dev.net == nullptr)
      return setError(mkcclInternalError, "barrier across %d nodes: the inter-node transport is not set up",
                      ctx.comm->nNodes);
    netBarrierKernel<<<1, 32, 0, ctx.stream>>>(ctx.dev);
  } else {
    barrierKernel<<<1, 32, 0, ctx.stream>>>(ctx.dev);
  }
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

}  // namespace mkccl
