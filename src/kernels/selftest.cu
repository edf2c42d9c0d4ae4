// The runtime's own small kernels: the node barrier. (The simple AllGather that proved the
// symmetric memory and signalling was replaced by the collectives of src/kernels/coll.)
#include "kernels/device/signal.cuh"
#include "runtime/check.h"
#include "runtime/ops.h"

namespace mkccl {
namespace {

__global__ void barrierKernel(DevComm c) { dev::barrierLocal(c, 0); }

}  // namespace

mkcclResult_t barrierOp(OpCtx& ctx) {
  if (ctx.comm->nNodes > 1)
    return setError(mkcclInvalidUsage, "barrier across %d nodes needs the inter-node transport", ctx.comm->nNodes);
  barrierKernel<<<1, 32, 0, ctx.stream>>>(ctx.dev);
  return mkcclSuccess;
}

}  // namespace mkccl
