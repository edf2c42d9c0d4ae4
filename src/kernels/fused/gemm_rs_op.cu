// mkccl::gemmReduceScatterOp, and the driver it shares with gemmAllReduceOp (gemm_ar_op.cu):
// world size 1 is a plain GEMM; otherwise the fused kernel (gemm_rs_kernel.cuh) or the GEMM engine
// followed by our ReduceScatter / AllReduce, or (AllReduce) the fused ReduceScatter kernel followed
// by our AllGather, as MKCCL_GEMM_RS_PLAN / MKCCL_GEMM_AR_PLAN says, else as the rule decides from
// the shape (gemm_rs_rule.h): the same plan on every rank, no host wait.
// Arguments were checked by the API (api_fused.cc).
#include <string.h>
#include <mutex>
#include <set>
#include <tuple>
#include "kernels/fused/gemm_rs_host.cuh"
#include "kernels/gemm/gemm_plan.h"
#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/copy_engines.h"
#include "runtime/cudriver.h"
#include "runtime/log.h"
#include "runtime/ops.h"
#include "transport/nvlink/symmem.h"

namespace mkccl {
namespace rs {

namespace {

const char* opName(int mode) { return mode == kModeAllReduce ? "mkcclGemmAllReduce" : "mkcclGemmReduceScatter"; }

// The plan is logged at INFO once per (op, shape, route) in a process, every call at TRACE.
bool firstTimeFor(int mode, int64_t M, int64_t N, int64_t K, int ws, Route route) {
  static std::mutex mu;
  static std::set<std::tuple<int, int64_t, int64_t, int64_t, int, int>> seen;
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(std::make_tuple(mode, M, N, K, ws, int(route))).second;
}

const char* routeName(Route r) {
  switch (r) {
    case Route::Fused: return "fused";
    case Route::RsThenAg: return "fused ReduceScatter, then AllGather";
    default: return "sequential";
  }
}

mkcclResult_t launchFused(OpCtx& ctx, const FusedPlan& plan, const void* A, const void* W, void* C, int64_t M,
                          int64_t N, int64_t K, mkcclDataType_t t) {
  mkcclComm* comm = ctx.comm;
  Layout L = plan.L;
  PushChoice pc;
  MKCCL_CHECK(pushFromEnv(L.mode, L.ws, &pc));
  PushMode push = pc.mode;
  CopyEngines* ce = nullptr;
  if (push == PushMode::Ce) {
    // Where the copy engines cannot run: an error if the user asked for them, else the push team
    // (every rank reaches the same verdict: the order, the flag area and the driver agree).
    // A batch's word waits for all its tiles, some of which the spread order sends after a final
    // tile that waits for another rank's batch: a cycle between ranks.
    L.setCeBatch(pc.ceBatch, pc.ceSlots);
    const int64_t slots = int64_t(comm->ws.flagsBytes / 8) - kOpFlagSlot;
    const char* why = L.order == kOrderSpread        ? "cannot run with MKCCL_GEMM_RS_ORDER=spread"
                      : L.flagSlots() > slots        ? "its batch flags do not fit the flag area"
                      : !copyEnginesUsable()         ? "needs the driver's stream memory operations"
                                                     : nullptr;
    if (why && pc.forced) return setError(mkcclInvalidUsage, "%s: MKCCL_GEMM_RS_PUSH=ce %s", opName(L.mode), why);
    if (why) {
      MKCCL_TRACE("%s: copy engines: %s; the push team sends", opName(L.mode), why);
      push = PushMode::Team;
      L.setCeBatch(0, 0);
    } else {
      MKCCL_CHECK(copyEnginesGet(comm, ceStreamCount(L, pc.ceStreams), &ce));
    }
  }
  int early = 0;
  MKCCL_CHECK(publishFromEnv(L.order, push, &early));

  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchGemmReduce, size_t(L.scratchBytes()), &region));
  const int ws = L.ws;
  if (ws > kMaxLocalRanks)
    return setError(mkcclInternalError, "%s: %d ranks in one node (at most %d)", opName(L.mode), ws, kMaxLocalRanks);
  FusedLaunch f;
  f.A = A;
  f.W = W;
  f.M = M;
  f.N = N;
  f.K = K;
  f.cRows = L.allReduce() ? M : M / ws;
  f.type = t;
  f.ctas = plan.ctas;
  // Intra-CTA waits must outlast any wait on a peer (a consumer may wait that long for a partial).
  f.waitTimeoutNs = ctx.dev.timeoutNs + kGemmWaitTimeoutNs;
  ReduceParams& p = f.params;
  memset(&p, 0, sizeof(p));
  p.comm = ctx.dev;
  p.L = L;
  p.rank = comm->rank;
  for (int q = 0; q < ws; ++q) {
    const int local = comm->rankLocal[q];
    p.localOf[q] = local;
    p.scratchOf[q] = region->peer[local];
    p.wsOf[q] = reinterpret_cast<uint64_t*>(comm->ws.peer[local]);
  }
  p.C = static_cast<char*>(C);
  p.pushBulk = push == PushMode::Bulk ? 1 : 0;
  p.pushCe = push == PushMode::Ce ? 1 : 0;
  p.earlyPublish = early;
  MKCCL_TRACE("%s: partials sent by %s", opName(L.mode),
              push == PushMode::Bulk ? "bulk stores" : push == PushMode::Ce ? "copy engines" : "the push team");
  if (ce) {
    // The batch counts, words and CTA count start from zero (the kernel counts up from there).
    uint64_t* own = p.wsOf[p.rank] + kOpFlagSlot;
    CUDA_CHECK(cudaMemsetAsync(own + L.baseFlagSlots(), 0, size_t(L.flagSlots() - L.baseFlagSlots()) * 8,
                               ctx.stream));
    CUDA_CHECK(cudaEventRecord(ce->fork, ctx.stream));
  }
  if (t == mkcclBfloat16) MKCCL_CHECK(reduceLaunch<dev::Bf16>(f, ctx.stream));
  else MKCCL_CHECK(reduceLaunch<dev::F16>(f, ctx.stream));
  return ce ? ceCopies(*ce, p, pc.ceStreams, ctx.stream) : mkcclSuccess;
}

mkcclResult_t runSequential(OpCtx& ctx, const void* A, const void* W, void* C, int64_t M, int64_t N, int64_t K,
                            mkcclDataType_t t, int mode) {
  mkcclComm* comm = ctx.comm;
  const size_t es = typeSize(t);
  if (mode == kModeAllReduce) {
    MKCCL_CHECK(gemmOp(A, W, C, M, N, K, t, t, ctx.stream));
    return allReduceOp(ctx, C, C, size_t(M) * N, t, mkcclSum);
  }
  // The full partial product needs a buffer of its own: the symmetric scratch, used locally.
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchGemmReduce, size_t(M) * N * es, &region));
  void* partial = region->peer[comm->localRank];
  MKCCL_CHECK(gemmOp(A, W, partial, M, N, K, t, t, ctx.stream));
  return reduceScatterOp(ctx, partial, C, size_t(M / comm->nranks) * N, t, mkcclSum);
}

// AllReduce as the fused ReduceScatter kernel (plan: a ReduceScatter configuration) into this
// rank's rows of C, then our AllGather of those rows into C, in place. The AllGather is a kernel
// with a protocol of its own: it takes the next sequence number.
mkcclResult_t runRsThenAg(OpCtx& ctx, const FusedPlan& plan, const void* A, const void* W, void* C, int64_t M,
                          int64_t N, int64_t K, mkcclDataType_t t) {
  const int ws = ctx.comm->nranks;
  const size_t rows = size_t(M / ws), es = typeSize(t);
  char* mine = static_cast<char*>(C) + size_t(ctx.comm->rank) * rows * size_t(N) * es;
  MKCCL_CHECK(launchFused(ctx, plan, A, W, mine, M, N, K, t));
  opNextKernel(ctx);
  return allGatherOp(ctx, mine, C, rows * size_t(N), t);
}

}  // namespace

mkcclResult_t gemmReduceOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                           mkcclDataType_t t, int mode) {
  mkcclComm* comm = ctx.comm;
  const char* name = opName(mode);
  if (comm->nNodes > 1)
    return setError(mkcclInvalidUsage, "%s: not implemented across nodes yet (this communicator spans %d nodes)", name,
                    comm->nNodes);
  if (comm->ccMajor != 9)
    return setError(mkcclInvalidUsage, "%s: needs Hopper (sm_90) GPUs; device %d is sm_%d%d", name, comm->cudaDev,
                    comm->ccMajor, comm->ccMinor);
  if (comm->nranks == 1) return gemmOp(A, W, C, M, N, K, t, t, ctx.stream);

  PlanKind forced;
  MKCCL_CHECK(planFromEnv(mode, &forced));
  PlanInputs in;
  in.mode = mode;
  in.ws = comm->nranks;
  in.M = int64_t(M);
  in.N = int64_t(N);
  in.K = int64_t(K);
  in.ctaBudget = opMaxCtas(comm);
  in.flagSlots = int64_t(comm->ws.flagsBytes / 8) - kOpFlagSlot;
  MKCCL_CHECK(gemmVariantFromEnv(&in.variant));
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  if (t == mkcclBfloat16) MKCCL_CHECK(reduceOccupancy<dev::Bf16>(comm->cudaDev, comm->smCount, &in.occ));
  else MKCCL_CHECK(reduceOccupancy<dev::F16>(comm->cudaDev, comm->smCount, &in.occ));

  const PlanChoice rule = choosePlan(in);
  Route route = rule.route;
  if (forced == PlanKind::Fused) route = Route::Fused;
  else if (forced == PlanKind::Sequential) route = Route::Sequential;
  else if (forced == PlanKind::RsThenAg) route = Route::RsThenAg;
  FusedPlan plan;
  if (route == Route::RsThenAg && in.M % in.ws != 0) {
    MKCCL_WARN("%s: MKCCL_GEMM_AR_PLAN=rs_ag needs M (%zu) divisible by the %d ranks: sequential", name, M, in.ws);
    route = Route::Sequential;
  }
  if (route != Route::Sequential) {
    PlanInputs pin = in;
    if (route == Route::RsThenAg) pin.mode = kModeReduceScatter;
    plan = planFused(pin);
    MKCCL_CHECK(orderFromEnv(in.ws, plan.cs > 0 ? plan.ctas / plan.cs : 1, &plan.L));
    if (!plan.ok) {
      MKCCL_WARN("%s: the fused kernel (tiles: %s) cannot run %zux%zux%zu on %d ranks (flags or scratch would not "
                 "fit): sequential",
                 name, gemmVariantName(in.variant), M, N, K, comm->nranks);
      route = Route::Sequential;
    }
  }
  const char* how = forced == PlanKind::Auto ? ruleReasonName(rule.why) : "forced";
  if (firstTimeFor(mode, in.M, in.N, in.K, in.ws, route)) {
    if (route != Route::Sequential)
      MKCCL_INFO("%s %zux%zux%zu, %d ranks: %s, tile 128x%d, cluster %d, %d CTAs, %d tiles per chunk (%s; model: "
                 "fused %s%.0f us, rs+ag %s%.0f us, sequential %.0f us)",
                 name, M, N, K, in.ws, routeName(route), plan.bn, plan.cs, plan.ctas, plan.L.tiles, how,
                 rule.plan.ok ? "" : "n/a ", rule.plan.estUs, rule.rsPlan.ok ? "" : "n/a ", rule.rsAgUs, rule.seqUs);
    else
      MKCCL_INFO("%s %zux%zux%zu, %d ranks: sequential (GEMM, then %s) (%s; model: fused %s%.0f us, rs+ag %s%.0f us, "
                 "sequential %.0f us)",
                 name, M, N, K, in.ws, mode == kModeAllReduce ? "AllReduce" : "ReduceScatter", how,
                 rule.plan.ok ? "" : "n/a ", rule.plan.estUs, rule.rsPlan.ok ? "" : "n/a ", rule.rsAgUs, rule.seqUs);
  }
  MKCCL_TRACE("%s call #%llu: %s", name, (unsigned long long)ctx.dev.seq, routeName(route));
  switch (route) {
    case Route::Fused: return launchFused(ctx, plan, A, W, C, in.M, in.N, in.K, t);
    case Route::RsThenAg: return runRsThenAg(ctx, plan, A, W, C, in.M, in.N, in.K, t);
    default: return runSequential(ctx, A, W, C, in.M, in.N, in.K, t, mode);
  }
}

}  // namespace rs

mkcclResult_t gemmReduceScatterOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                  mkcclDataType_t t) {
  return rs::gemmReduceOp(ctx, A, W, C, M, N, K, t, rs::kModeReduceScatter);
}

}  // namespace mkccl
