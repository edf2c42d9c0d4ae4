// mkcclMoeDispatchGemm's enqueue: the dispatch kernel (moe_dispatch.cu, fused mode) on the communicator's
// second stream and the first expert GEMM (kernels/moe/dispatch_gemm_op.cuh) on the caller's, at
// the same time, the GEMM starting on each 128-row block of recvX as its rows land.
//
//   caller's stream:  memset(arrivals) -- fork --------------- GEMM (total - dC CTAs) -- join --
//   second stream:                         \-- dispatch (dC CTAs) --------------------------/
//
// Both grids fit on the GPU together (total <= the SMs the communicator may use; one GEMM CTA per
// SM), so each grid's CTAs are co-resident whatever order the two launches start in: the dispatch
// syncs its grid, and the GEMM's CTAs wait for rows the dispatch (here and at the peers) sends.
// The arrival words are zeroed on the stream before the fork: nothing of an earlier call is left
// (its dispatch waited for every peer's rows, and its GEMM finished before this call's memset).
// Fork, join and memset are stream operations: a CUDA graph captures the call like any other.
#include <string.h>
#include <algorithm>
#include "kernels/device/wgmma.cuh"
#include "kernels/moe/dispatch_gemm_op.cuh"
#include "ops/gemm/gemm_launch.cuh"
#include "ops/gemm/gemm_plan.h"
#include "ops/moe/moe_handle.h"
#include "ops/moe/moe_kernels.h"
#include "ops/tuner/op_state.h"
#include "base/check.h"
#include "base/log.h"
#include "runtime/comm.h"
#include "runtime/cudriver.h"

namespace mkccl {
namespace moe {

namespace {

template <class In, int kBN, class Op>
using FusedLauncher = GemmLauncher<GemmCfg<In, kBN, EpilogueTmaStore>, Op>;

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The GEMM on recvX: act[rows, N] = (SwiGLU ? silu(x gate^T) * (x up^T) : x W1^T) per local expert;
// mode is the public MKCCL_MOE_GEMM_* (W1's layout with SwiGLU).
template <class In>
mkcclResult_t launchGemm(const OpCtx& ctx, const mkcclMoe* h, const void* W1, void* act, int64_t N, int mode,
                         int ctas, cudaStream_t stream) {
  const bool swiglu = mode != MKCCL_MOE_GEMM_PLAIN, gateUp = mode == MKCCL_MOE_GEMM_SWIGLU_GATE_UP;
  const Dims& d = h->dims;
  const int El = d.localExperts();
  const int64_t rows = (int64_t)d.rows, K = (int64_t)d.hidden;
  const mkcclDataType_t t = h->dtype;
  const int dev = ctx.comm->cudaDev, sms = ctx.comm->smCount;
  const int bn = swiglu || N > 128 ? 256 : 128;
  const int64_t wRows = gateUp ? 2 * N : swiglu ? 2 * roundUp(N, 128) : N;  // rows of one expert's W1
  int unused = 0;
  if (gateUp) MKCCL_CHECK((FusedLauncher<In, 256, MoeDispatchSwigluGateUpOp>::prepare(dev, sms, 1, &unused)));
  else if (swiglu) MKCCL_CHECK((FusedLauncher<In, 256, MoeDispatchSwigluOp>::prepare(dev, sms, 1, &unused)));
  else if (bn == 256) MKCCL_CHECK((FusedLauncher<In, 256, MoeDispatchGemmOp>::prepare(dev, sms, 1, &unused)));
  else MKCCL_CHECK((FusedLauncher<In, 128, MoeDispatchGemmOp>::prepare(dev, sms, 1, &unused)));

  // The pipeline's waits bounded longer than any of the op's waits on the dispatch (the
  // communicator's timeout).
  GemmArgs g;
  MKCCL_CHECK(groupedGemmArgs(rows, N, K, t, act, ctx.dev.timeoutNs + kGemmWaitTimeoutNs, &g));

  MoeDispatchGemmOp::Params p;
  memset(&p, 0, sizeof(p));
  p.grouped.rowOffsets = h->local.expertOffsets;
  p.grouped.groups = El;
  p.grouped.bn = bn;
  p.grouped.nBlocks = static_cast<int>(swiglu ? roundUp(N, 128) / 128 : (N + bn - 1) / bn);
  p.grouped.band = 8;
  p.grouped.N = wRows;
  p.grouped.maxRows = roundUp(rows, 128);
  p.moe.comm = ctx.dev;
  p.moe.arrivals = reinterpret_cast<const uint64_t*>(h->region.peer[ctx.comm->localRank] + h->reg.arrivals);
  p.moe.counts = h->local.expertCounts;
  p.moe.site = kSiteMoeDispatch;

  const void* recvX = h->region.peer[ctx.comm->localRank] + h->reg.recvX;
  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, recvX, t, rows, K, d.pitch(), 128));
  // Gate-up: two 128-row boxes per stage (GateUpLoads).
  MKCCL_CHECK(encodeTileMap(&mapB, W1, t, uint64_t(El) * wRows, K, K, gateUp ? 128u : uint32_t(bn)));
  MKCCL_CHECK(encodeTileMap(&mapC, act, t, rows, N, N, 64));
  MKCCL_TRACE("mkcclMoeDispatchGemm GEMM: %d experts, up to %lld rows, N %lld, K %lld, %s, tile 128x%d, %d CTAs", El,
              (long long)rows, (long long)N, (long long)K, gateUp ? "SwiGLU (W1 gate-up)" : swiglu ? "SwiGLU" : "plain", bn,
              ctas);
  if (gateUp)
    return FusedLauncher<In, 256, MoeDispatchSwigluGateUpOp>::launch(mapA, mapB, mapC, g, p, ctas, stream);
  if (swiglu) return FusedLauncher<In, 256, MoeDispatchSwigluOp>::launch(mapA, mapB, mapC, g, p, ctas, stream);
  if (bn == 256) return FusedLauncher<In, 256, MoeDispatchGemmOp>::launch(mapA, mapB, mapC, g, p, ctas, stream);
  return FusedLauncher<In, 128, MoeDispatchGemmOp>::launch(mapA, mapB, mapC, g, p, ctas, stream);
}

}  // namespace

template <class In>
mkcclResult_t dispatchGemmPreloadAs(int dev, int sms) {
  int unused = 0;
  MKCCL_CHECK((FusedLauncher<In, 256, MoeDispatchSwigluOp>::prepare(dev, sms, 1, &unused)));
  MKCCL_CHECK((FusedLauncher<In, 256, MoeDispatchSwigluGateUpOp>::prepare(dev, sms, 1, &unused)));
  MKCCL_CHECK((FusedLauncher<In, 256, MoeDispatchGemmOp>::prepare(dev, sms, 1, &unused)));
  return FusedLauncher<In, 128, MoeDispatchGemmOp>::prepare(dev, sms, 1, &unused);
}

mkcclResult_t dispatchGemmPreload(mkcclDataType_t t, int dev, int sms) {
  return t == mkcclFloat16 ? dispatchGemmPreloadAs<dev::F16>(dev, sms) : dispatchGemmPreloadAs<dev::Bf16>(dev, sms);
}

// A few CTAs push the rows (a CTA's stores to a peer move ~46 GB/s: 8 of them fill one H100's
// NVLink to a peer), the rest compute. At least one of each.
int fusedDispatchCtas(int total) { return std::max(1, std::min(16, total / 8)); }

namespace {

// moe.fused_route=sequential (and auto, its default): the dispatch on all the handle's CTAs, then
// the grouped GEMM on the received rows, one after the other on the caller's stream (the composed
// calls in one): each (token, rank) row travels once, and no tile waits for rows. The only route
// across nodes (moe_api.cc refuses overlap there): dispatchOp takes the network path, and the GEMM
// reads the same layout either way.
mkcclResult_t sequentialDispatchGemm(OpCtx& ctx, mkcclMoe* h, const void* X, const int32_t* topkIdx,
                                     const float* topkW, size_t T, const void* W1, void* act, size_t N, int mode) {
  MKCCL_CHECK(netCaptureCheck(ctx, "mkcclMoeDispatchGemm"));
  MKCCL_CHECK(dispatchOp(ctx, h, X, topkIdx, topkW, T));
  const Dims& d = h->dims;
  const void* recvX = h->region.peer[ctx.comm->localRank] + h->reg.recvX;
  if (mode == MKCCL_MOE_GEMM_PLAIN)
    return mkcclGroupedGemm(recvX, W1, act, h->local.expertOffsets, d.localExperts(), d.rows, N, d.hidden, h->dtype,
                            h->dtype, ctx.stream);
  return mkcclGroupedGemmSwigluEx(recvX, W1, mode == MKCCL_MOE_GEMM_SWIGLU_GATE_UP ? mkcclSwigluGateUp : mkcclSwigluBlocked,
                                  act, h->local.expertOffsets, d.localExperts(), d.rows, N, d.hidden, h->dtype,
                                  h->dtype, ctx.stream);
}

}  // namespace

mkcclResult_t dispatchGemmOp(OpCtx& ctx, mkcclMoe* h, const void* X, const int32_t* topkIdx, const float* topkW,
                             size_t T, const void* W1, void* act, size_t N, int mode) {
  if (tuningOf(ctx.comm).moe.fusedRoute != Tuning::Moe::kRouteOverlap)
    return sequentialDispatchGemm(ctx, h, X, topkIdx, topkW, T, W1, act, N, mode);
  // The overlapped route: one node only (refused across nodes by moe_api.cc).
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());  // an earlier GEMM-family kernel's internal fault, reported once
  const int total = std::min(h->ctas, ctx.comm->smCount);
  const int asked = tuningOf(ctx.comm).moe.dispatchCtas;  // the tuner's moe.dispatch_ctas (0: the rule)
  const int dC = asked > 0 ? std::min(asked, total - 1) : fusedDispatchCtas(total), gC = total - dC;
  if (gC < 1)
    return setError(mkcclInvalidUsage,
                    "mkcclMoeDispatchGemm: the handle may use %d CTA(s); the fused call needs at least 2 (maxCtas)",
                    total);
  Args a = argsFor(ctx, h, T);
  a.ctas = dC;
  a.x = static_cast<const char*>(X);
  a.topkIdx = topkIdx;
  a.topkW = topkW;
  a.xVec = ((uintptr_t)X & 15) == 0 && (h->dims.hidden * h->dims.esize) % 16 == 0;
  a.fused = true;

  char* own = h->region.peer[ctx.comm->localRank];
  SideStream side;
  MKCCL_CHECK(sideStreamOf(ctx.comm, &side));
  CUDA_CHECK(cudaMemsetAsync(own + h->reg.arrivals, 0, (1 + arrivalBlocks(h->dims)) * 8, ctx.stream));
  CUDA_CHECK(cudaEventRecord(side.fork, ctx.stream));
  CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.fork, 0));
  MKCCL_CHECK(launchMoeKernel(dispatchKernelFn(), a, h->smemBytes, side.stream, "mkcclMoeDispatchGemm dispatch"));
  const mkcclResult_t r = h->dtype == mkcclFloat16
                              ? launchGemm<dev::F16>(ctx, h, W1, act, (int64_t)N, mode, gC, ctx.stream)
                              : launchGemm<dev::Bf16>(ctx, h, W1, act, (int64_t)N, mode, gC, ctx.stream);
  // Join even when the GEMM's launch failed: the side stream must not stay forked from a capture.
  CUDA_CHECK(cudaEventRecord(side.join, side.stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, side.join, 0));
  MKCCL_CHECK(r);
  h->dispatched = true;
  h->lastT = T;
  return mkcclSuccess;
}

}  // namespace moe
}  // namespace mkccl
