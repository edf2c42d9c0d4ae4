// Dispatch and combine enqueues: the kernels' arguments from the handle, one launch each.
#include <stdint.h>
#include "ops/moe/moe_kernels.h"
#include "ops/moe/moe_handle.h"
#include "base/check.h"
#include "runtime/comm.h"

namespace mkccl {
namespace moe {

Args argsFor(const OpCtx& ctx, const mkcclMoe* h, size_t T) {
  Args a{};
  a.dev = ctx.dev;
  a.dims = h->dims;
  a.reg = h->reg;
  const mkcclComm* comm = h->comm;
  for (int q = 0; q < comm->localRanks; ++q) a.region[q] = h->region.peer[q];
  for (int q = 0; q < comm->nranks && q < kMaxRanks; ++q) {
    a.lidx[q] = (int8_t)(comm->rankNode[q] == comm->node ? comm->rankLocal[q] : -1);
    a.node[q] = (uint8_t)comm->rankNode[q];
  }
  a.net = comm->nNodes > 1;
  a.local = h->local;
  a.T = (int)T;
  a.ctas = h->ctas;
  return a;
}

mkcclResult_t launchMoeKernel(const void* fn, const Args& a, size_t smem, cudaStream_t stream, const char* what) {
  MKCCL_TRACE("%s: T %d, %d CTAs, host seq %llu", what, a.T, a.ctas, (unsigned long long)a.dev.seq);
  void* params[] = {const_cast<Args*>(&a)};
  CUDA_CHECK(cudaLaunchKernel(fn, dim3(a.ctas), dim3(kThreads), params, smem, stream));
  return mkcclSuccess;
}

mkcclResult_t netCaptureCheck(const OpCtx& ctx, const char* what) {
  if (ctx.comm->nNodes == 1 || !ctx.capturing) return mkcclSuccess;
  return setError(mkcclInvalidUsage,
                  "%s across nodes (this communicator spans %d nodes) cannot be captured into a CUDA graph yet; "
                  "call it eagerly (docs/GRAPHS.md)",
                  what, ctx.comm->nNodes);
}

namespace {

bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// Across nodes: refused while capturing (as the other calls that go through the network:
// docs/GRAPHS.md), then the pieces' counters are cleared on the stream before the kernel.
mkcclResult_t netPrepare(const OpCtx& ctx, const mkcclMoe* h, const char* what) {
  if (ctx.comm->nNodes == 1) return mkcclSuccess;
  MKCCL_CHECK(netCaptureCheck(ctx, what));
  CUDA_CHECK(cudaMemsetAsync(h->local.netCount, 0, (size_t)kMaxRanks * kNetMaxPieces * 4, ctx.stream));
  return mkcclSuccess;
}

mkcclResult_t launch(const OpCtx& ctx, const void* fn, const Args& a, size_t smem, const char* what) {
  return launchMoeKernel(fn, a, smem, ctx.stream, what);
}

}  // namespace

mkcclResult_t dispatchOp(OpCtx& ctx, mkcclMoe* h, const void* X, const int32_t* topkIdx, const float* topkW, size_t T) {
  Args a = argsFor(ctx, h, T);
  a.x = static_cast<const char*>(X);
  a.topkIdx = topkIdx;
  a.topkW = topkW;
  a.xVec = aligned16(X) && (h->dims.hidden * h->dims.esize) % 16 == 0;
  MKCCL_CHECK(netPrepare(ctx, h, "mkcclMoeDispatch"));
  MKCCL_CHECK(launch(ctx, dispatchKernelFn(), a, h->smemBytes, "mkcclMoeDispatch"));
  h->dispatched = true;
  h->lastT = T;
  return mkcclSuccess;
}

mkcclResult_t combineOp(OpCtx& ctx, mkcclMoe* h, const void* Y, void* out, size_t T) {
  Args a = argsFor(ctx, h, T);
  a.y = static_cast<const char*>(Y);
  a.out = static_cast<char*>(out);
  a.outVec = aligned16(out) && (h->dims.hidden * h->dims.esize) % 16 == 0;
  MKCCL_CHECK(netPrepare(ctx, h, "mkcclMoeCombine"));
  return launch(ctx, combineKernelFn(h->dtype == mkcclFloat16, a.net), a, 0, "mkcclMoeCombine");
}

}  // namespace moe
}  // namespace mkccl
