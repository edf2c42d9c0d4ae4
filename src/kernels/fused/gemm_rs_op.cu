// mkccl::gemmReduceScatterOp, and the driver it shares with gemmAllReduceOp (gemm_ar_op.cu):
// world size 1 is a plain GEMM; otherwise the fused ring kernel or, where the model says fusion
// cannot win (or MKCCL_GEMM_RS_PLAN / MKCCL_GEMM_AR_PLAN says so), the GEMM engine followed by our
// ReduceScatter / AllReduce. Arguments were checked by the API (api_fused.cc).
#include <mutex>
#include <set>
#include <tuple>
#include "kernels/fused/gemm_rs_host.cuh"
#include "kernels/gemm/gemm_plan.h"
#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/cudriver.h"
#include "runtime/log.h"
#include "runtime/ops.h"
#include "transport/nvlink/symmem.h"

namespace mkccl {
namespace rs {

namespace {

const char* opName(int mode) { return mode == kModeAllReduce ? "mkcclGemmAllReduce" : "mkcclGemmReduceScatter"; }

// The plan is logged at INFO once per (op, shape) in a process, every call at TRACE.
bool firstTimeFor(int mode, int64_t M, int64_t N, int64_t K, int ws, bool fused) {
  static std::mutex mu;
  static std::set<std::tuple<int, int64_t, int64_t, int64_t, int, bool>> seen;
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(std::make_tuple(mode, M, N, K, ws, fused)).second;
}

mkcclResult_t launchFused(OpCtx& ctx, const FusedPlan& plan, const void* A, const void* W, void* C, int64_t M,
                          int64_t N, int64_t K, mkcclDataType_t t) {
  mkcclComm* comm = ctx.comm;
  const Layout& L = plan.L;
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchGemmReduce, size_t(L.scratchBytes()), &region));
  const int ws = L.ws, me = comm->rank;
  const int src = (me + 1) % ws, dst = (me + ws - 1) % ws;
  FusedLaunch f;
  f.A = A;
  f.W = W;
  f.M = M;
  f.N = N;
  f.K = K;
  f.cRows = L.allReduce() ? M : M / ws;
  f.type = t;
  f.ctas = plan.ctas;
  // Intra-CTA waits must outlast any wait on a peer (a consumer may wait that long for a sum).
  f.waitTimeoutNs = ctx.dev.timeoutNs + kGemmWaitTimeoutNs;
  RingParams& p = f.params;
  p.comm = ctx.dev;
  p.L = L;
  p.rank = me;
  p.srcLocal = comm->rankLocal[src];
  p.dstLocal = comm->rankLocal[dst];
  p.scratch = region->peer[comm->localRank];
  p.scratchDst = region->peer[p.dstLocal];
  p.flags = reinterpret_cast<uint64_t*>(comm->ws.peer[comm->localRank]) + kOpFlagSlot;
  p.flagsDst = reinterpret_cast<uint64_t*>(comm->ws.peer[p.dstLocal]) + kOpFlagSlot;
  p.entryPost = reinterpret_cast<uint64_t*>(comm->ws.peer[p.srcLocal]) + kBarrierSlot + comm->localRank;
  p.entryWait = reinterpret_cast<uint64_t*>(comm->ws.peer[comm->localRank]) + kBarrierSlot + p.dstLocal;
  p.C = static_cast<char*>(C);
  if (t == mkcclBfloat16) return ringLaunch<dev::Bf16>(f, ctx.stream);
  return ringLaunch<dev::F16>(f, ctx.stream);
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
  MKCCL_CHECK(planFromEnv(mode == kModeAllReduce ? "MKCCL_GEMM_AR_PLAN" : "MKCCL_GEMM_RS_PLAN", &forced));
  PlanInputs in;
  in.mode = mode;
  in.ws = comm->nranks;
  in.M = int64_t(M);
  in.N = int64_t(N);
  in.K = int64_t(K);
  in.ctaBudget = opMaxCtas(comm);
  MKCCL_CHECK(gemmVariantFromEnv(&in.variant));
  in.flagSlots = int64_t(comm->ws.flagsBytes / 8) - kOpFlagSlot;
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  if (t == mkcclBfloat16) MKCCL_CHECK(ringOccupancy<dev::Bf16>(comm->cudaDev, comm->smCount, &in.occ));
  else MKCCL_CHECK(ringOccupancy<dev::F16>(comm->cudaDev, comm->smCount, &in.occ));

  const FusedPlan plan = planFused(in);
  const double seqUs = estimateSequentialUs(in);
  bool fused = plan.ok && plan.estUs < seqUs;
  if (forced == PlanKind::Fused) fused = plan.ok;
  if (forced == PlanKind::Sequential) fused = false;
  if (forced == PlanKind::Fused && !plan.ok)
    MKCCL_WARN("%s: the fused plan cannot run %zux%zux%zu on %d ranks (flags or scratch would not fit): sequential",
               name, M, N, K, comm->nranks);
  if (firstTimeFor(mode, in.M, in.N, in.K, in.ws, fused)) {
    if (fused)
      MKCCL_INFO("%s %zux%zux%zu, %d ranks: fused ring, tile 128x%d, cluster %d, %d CTAs, %d tiles per chunk, skew %d "
                 "(model: fused %.0f us, sequential %.0f us)%s",
                 name, M, N, K, in.ws, plan.bn, plan.cs, plan.ctas, plan.L.tiles, plan.L.skew, plan.estUs, seqUs,
                 forced == PlanKind::Fused ? ", forced" : "");
    else
      MKCCL_INFO("%s %zux%zux%zu, %d ranks: sequential (GEMM, then %s) (model: fused %s%.0f us, sequential %.0f us)%s",
                 name, M, N, K, in.ws, mode == kModeAllReduce ? "AllReduce" : "ReduceScatter",
                 plan.ok ? "" : "n/a ", plan.estUs, seqUs, forced == PlanKind::Sequential ? ", forced" : "");
  }
  MKCCL_TRACE("%s call #%llu: %s", name, (unsigned long long)ctx.dev.seq, fused ? "fused" : "sequential");
  if (fused) return launchFused(ctx, plan, A, W, C, in.M, in.N, in.K, t);
  return runSequential(ctx, A, W, C, in.M, in.N, in.K, t, mode);
}

}  // namespace rs

mkcclResult_t gemmReduceScatterOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                  mkcclDataType_t t) {
  return rs::gemmReduceOp(ctx, A, W, C, M, N, K, t, rs::kModeReduceScatter);
}

}  // namespace mkccl
