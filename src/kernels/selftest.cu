// The runtime's own small kernels: the node barrier, and the simple AllGather that proved the
// symmetric memory and signalling before the tuned collectives (src/kernels/coll) existed.
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

// ---- simple AllGather (single node) ----
namespace mkccl {
namespace {

__device__ void copyBytes(char* dst, const char* src, size_t n) {
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nth = (size_t)gridDim.x * blockDim.x;
  if ((((uintptr_t)dst | (uintptr_t)src | n) & 15) == 0) {
    uint4* d = reinterpret_cast<uint4*>(dst);
    const uint4* s = reinterpret_cast<const uint4*>(src);
    for (size_t i = tid; i < n / 16; i += nth) d[i] = s[i];
  } else {
    for (size_t i = tid; i < n; i += nth) dst[i] = src[i];
  }
}

// Round i moves up to `chunk` bytes of every rank's block: each rank pushes its piece into every
// local peer's data region (slot = its local rank), a node barrier, each rank copies the slots to
// recv, and a second barrier keeps the next round from overwriting slots still being read.
__global__ void simpleAllGatherKernel(DevComm c, const char* send, char* recv, size_t bytes, size_t chunk) {
  uint64_t gphase = 0, bphase = 0;
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = bytes - off < chunk ? bytes - off : chunk;
    for (int q = 0; q < c.localRanks; ++q) copyBytes(dev::dataOf(c, q) + (size_t)c.localRank * chunk, send + off, n);
    for (int step = 0; step < 2; ++step) {
      if (!dev::gridSync(c, 0, ++gphase)) return;
      ++bphase;
      if (blockIdx.x == 0) dev::barrierLocal(c, bphase);  // a failure is recorded: every block sees it below
      if (!dev::gridSync(c, 0, ++gphase) || dev::aborted(c)) return;
      if (step == 0)
        for (int q = 0; q < c.localRanks; ++q)
          copyBytes(recv + (size_t)q * bytes + off, dev::dataOf(c, c.localRank) + (size_t)q * chunk, n);
    }
  }
}

}  // namespace

mkcclResult_t allGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t) {
  if (ctx.comm->nNodes > 1)
    return setError(mkcclInvalidUsage, "mkcclAllGather across %d nodes needs the inter-node transport",
                    ctx.comm->nNodes);
  const size_t bytes = sendcount * typeSize(t);
  const size_t chunk = (ctx.dev.dataBytes / ctx.dev.localRanks) & ~(size_t)15;
  int blocks = opMaxCtas(ctx.comm);
  if (blocks > 32) blocks = 32;
  void* args[] = {&ctx.dev, &send, &recv, (void*)&bytes, (void*)&chunk};
  CUDA_CHECK(cudaLaunchCooperativeKernel((const void*)simpleAllGatherKernel, dim3(blocks), dim3(512), args, 0,
                                         ctx.stream));
  return mkcclSuccess;
}

}  // namespace mkccl
