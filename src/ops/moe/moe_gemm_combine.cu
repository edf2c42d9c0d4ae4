// mkcclMoeGemmCombine's enqueue: the second expert GEMM (kernels/moe/gemm_combine_op.cuh) on the
// caller's stream and the combine kernel (moe_combine.cu, Args::yDone) on the communicator's
// second stream, at the same time, the combine returning each 128-row block of Y as soon as it is stored.
//
//   caller's stream:  memset(done words) -- fork ------------- GEMM (total - cC CTAs) -- join --
//   second stream:                            \-- combine (cC CTAs) -------------------------/
//
// Both grids fit on the GPU together (total <= the SMs the communicator may use), so each grid's
// CTAs are co-resident whatever order the launches start in: the combine syncs its grid and waits
// for the GEMM's tiles; the GEMM waits for nothing.
// moe.combine_split=on (the default; faster at 2 ranks, docs/MOE.md): the combine beside the GEMM only
// returns rows (step 1, kCombineReturn); after the join a second launch on the caller's stream
// reduces (step 2, kCombineReduce) on all `total` CTAs, Y complete by then, instead of on the cC
// CTAs while the GEMM's SMs idle. The done words are the handle's arrival
// words (Region::arrivals, which only the fused dispatch otherwise uses): zeroed on the stream
// before the fork, nothing of an earlier call is left in them (an earlier fused dispatch's GEMM
// waited for every add a peer made there, and a peer adds there again only after this rank has
// entered its next dispatch). Fork, join and memset are stream operations: capturable.
#include <string.h>
#include <algorithm>
#include "kernels/device/wgmma.cuh"
#include "kernels/moe/gemm_combine_op.cuh"
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

template <class In, int kBN>
using Launcher = GemmLauncher<GemmCfg<In, kBN, EpilogueTmaStore>, MoeGemmCombineOp>;

// The N-blocks of Y's GEMM (a block of Y is complete at 2 stores per N-block) and its tile width.
int gemm2Bn(size_t H) { return H > 128 ? 256 : 128; }

// Y[rows, H] = act[rows, I] . W2_e^T per local expert, raising done[1 + b] per stored half tile.
template <class In>
mkcclResult_t launchGemm2(const OpCtx& ctx, const mkcclMoe* h, const void* act, const void* W2, void* Y, int64_t I,
                          uint64_t* done, int ctas, cudaStream_t stream) {
  const Dims& d = h->dims;
  const int El = d.localExperts();
  const int64_t rows = (int64_t)d.rows, H = (int64_t)d.hidden;
  const mkcclDataType_t t = h->dtype;
  const int bn = gemm2Bn(d.hidden);
  int unused = 0;
  if (bn == 256) MKCCL_CHECK((Launcher<In, 256>::prepare(ctx.comm->cudaDev, ctx.comm->smCount, 1, &unused)));
  else MKCCL_CHECK((Launcher<In, 128>::prepare(ctx.comm->cudaDev, ctx.comm->smCount, 1, &unused)));

  GemmArgs g;
  MKCCL_CHECK(groupedGemmArgs(rows, H, I, t, Y, kGemmWaitTimeoutNs, &g));

  MoeGemmCombineOp::Params p;
  memset(&p, 0, sizeof(p));
  p.grouped.rowOffsets = h->local.expertOffsets;
  p.grouped.groups = El;
  p.grouped.bn = bn;
  p.grouped.nBlocks = static_cast<int>((H + bn - 1) / bn);
  p.grouped.band = 8;
  p.grouped.N = H;
  p.grouped.maxRows = (rows + 127) / 128 * 128;
  p.done = done;

  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, act, t, rows, I, I, 128));
  MKCCL_CHECK(encodeTileMap(&mapB, W2, t, uint64_t(El) * H, I, I, uint32_t(bn)));
  MKCCL_CHECK(encodeTileMap(&mapC, Y, t, rows, H, H, 64));
  MKCCL_TRACE("mkcclMoeGemmCombine GEMM: %d experts, up to %lld rows, N %lld, K %lld, tile 128x%d, %d CTAs", El,
              (long long)rows, (long long)H, (long long)I, bn, ctas);
  if (bn == 256) return Launcher<In, 256>::launch(mapA, mapB, mapC, g, p, ctas, stream);
  return Launcher<In, 128>::launch(mapA, mapB, mapC, g, p, ctas, stream);
}

template <class In>
mkcclResult_t gemmCombinePreloadAs(int dev, int sms) {
  int unused = 0;
  MKCCL_CHECK((Launcher<In, 256>::prepare(dev, sms, 1, &unused)));
  return Launcher<In, 128>::prepare(dev, sms, 1, &unused);
}

}  // namespace

mkcclResult_t gemmCombinePreload(mkcclDataType_t t, int dev, int sms) {
  return t == mkcclFloat16 ? gemmCombinePreloadAs<dev::F16>(dev, sms) : gemmCombinePreloadAs<dev::Bf16>(dev, sms);
}

mkcclResult_t gemmCombineOp(OpCtx& ctx, mkcclMoe* h, const void* act, const void* W2, void* Y, void* out, size_t I,
                            size_t T) {
  // moe.fused_route=sequential (and auto, its default): the grouped GEMM on all the CTAs, then the
  // combine (the composed calls in one; across nodes the only route, combineOp's network path).
  // A capture across nodes is refused before the GEMM, so that nothing of the call is captured.
  if (tuningOf(ctx.comm).moe.fusedRoute != Tuning::Moe::kRouteOverlap) {
    MKCCL_CHECK(netCaptureCheck(ctx, "mkcclMoeGemmCombine"));
    const Dims& d = h->dims;
    MKCCL_CHECK(mkcclGroupedGemm(act, W2, Y, h->local.expertOffsets, d.localExperts(), d.rows, d.hidden, I, h->dtype,
                                 h->dtype, ctx.stream));
    return combineOp(ctx, h, Y, out, T);
  }
  // The overlapped route: one node only (refused across nodes by moe_api.cc).
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());  // an earlier GEMM-family kernel's internal fault, reported once
  const int total = std::min(h->ctas, ctx.comm->smCount);
  // The combine's share: the same rule as the fused dispatch's (a few CTAs fill a link), or the
  // tuner's moe.combine_ctas (0: the rule); the GEMM keeps at least one CTA.
  const int asked = tuningOf(ctx.comm).moe.combineCtas;
  const int cC = std::min(asked > 0 ? asked : fusedDispatchCtas(total), total - 1), gC = total - cC;
  if (cC < 1 || gC < 1)
    return setError(mkcclInvalidUsage,
                    "mkcclMoeGemmCombine: the handle may use %d CTA(s); the fused call needs at least 2 (maxCtas)",
                    total);
  char* own = h->region.peer[ctx.comm->localRank];
  uint64_t* done = reinterpret_cast<uint64_t*>(own + h->reg.arrivals);
  Args a = argsFor(ctx, h, T);
  a.ctas = cC;
  a.y = static_cast<const char*>(Y);
  a.out = static_cast<char*>(out);
  a.outVec = ((uintptr_t)out & 15) == 0 && (h->dims.hidden * h->dims.esize) % 16 == 0;
  a.yDone = done;
  a.yWant = 2 * (uint64_t)((h->dims.hidden + gemm2Bn(h->dims.hidden) - 1) / gemm2Bn(h->dims.hidden));
  a.part = tuningOf(ctx.comm).moe.combineSplit ? kCombineReturn : kCombineWhole;

  SideStream side;
  MKCCL_CHECK(sideStreamOf(ctx.comm, &side));
  CUDA_CHECK(cudaMemsetAsync(done, 0, (1 + arrivalBlocks(h->dims)) * 8, ctx.stream));
  CUDA_CHECK(cudaEventRecord(side.fork, ctx.stream));
  CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.fork, 0));
  // The GEMM (which waits for nothing) is launched before the combine (which waits for it): two
  // streams may share one hardware queue, and a kernel queued there behind the one it waits for
  // runs after it; the other order would hang until the timeout. (The fused dispatch launches its
  // dispatch, the kernel the GEMM waits for, first, for the same reason.)
  const mkcclResult_t r = h->dtype == mkcclFloat16
                              ? launchGemm2<dev::F16>(ctx, h, act, W2, Y, (int64_t)I, done, gC, ctx.stream)
                              : launchGemm2<dev::Bf16>(ctx, h, act, W2, Y, (int64_t)I, done, gC, ctx.stream);
  const mkcclResult_t rc =
      r == mkcclSuccess
          ? launchMoeKernel(combineKernelFn(h->dtype == mkcclFloat16), a, 0, side.stream, "mkcclMoeGemmCombine combine")
          : r;
  // Join even when a launch failed: the side stream must not stay forked from a capture.
  CUDA_CHECK(cudaEventRecord(side.join, side.stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, side.join, 0));
  if (rc != mkcclSuccess || a.part != kCombineReturn) return rc;
  Args red = a;  // the reduce on every CTA: Y is complete, nothing to wait for but the peers' flags
  red.part = kCombineReduce;
  red.ctas = total;
  red.yDone = nullptr;
  return launchMoeKernel(combineKernelFn(h->dtype == mkcclFloat16), red, 0, ctx.stream,
                         "mkcclMoeGemmCombine reduce");
}

}  // namespace moe
}  // namespace mkccl
