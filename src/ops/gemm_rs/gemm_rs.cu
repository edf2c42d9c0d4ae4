// mkccl::gemmReduceScatterOp, and the driver it shares with gemmAllReduceOp (gemm_ar.cu): world
// size 1 is a plain GEMM; otherwise the fused kernel (kernels/gemm_rs/op.cuh) or the GEMM engine
// followed by our ReduceScatter / AllReduce, or (AllReduce) the fused ReduceScatter kernel followed
// by our AllGather: as the tuner's gemm_rs.plan / gemm_ar.plan says, else as the rule decides from
// the shape (rule.h): the same plan on every rank, no host wait. Plans are made on a shape's first
// call and cached per communicator (ops/tuner/op_state.h).
// Arguments were checked by the API (api_fused.cc).
#include <string.h>
#include <mutex>
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_fp8.h"
#include "ops/gemm/gemm_plan.h"
#include "ops/coll/coll_direct.h"
#include "ops/gemm_rs/fp8.h"
#include "ops/gemm_rs/host.h"
#include "ops/gemm_rs/net_route.h"
#include "ops/gemm_rs/net_fused.h"
#include "ops/gemm_rs/net_split.h"
#include "ops/tuner/op_state.h"
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/copy_engines.h"
#include "runtime/cudriver.h"
#include "base/log.h"
#include "runtime/net_coll_info.h"
#include "runtime/ops.h"
#include "runtime/symmem.h"

namespace mkccl {
namespace rs {

namespace {

const char* opName(int mode) { return mode == kModeAllReduce ? "mkcclGemmAllReduce" : "mkcclGemmReduceScatter"; }
const char* opName(int mode, const Fp8Call* fp8) {
  if (fp8 == nullptr) return opName(mode);
  return mode == kModeAllReduce ? "mkcclGemmAllReduceFp8" : "mkcclGemmReduceScatterFp8";
}
const char* tuningPrefix(int mode) { return mode == kModeAllReduce ? "gemm_ar" : "gemm_rs"; }

// fp8 (fp8.h): mkcclGemmFp8's kernels at the communicator's gemm.variant; K in 16-bit columns
// (the bytes), C of outType with rows of N.
mkcclResult_t fp8Gemm(int dev, const void* A, const void* W, void* C, int64_t M, int64_t N, int64_t K,
                      const Fp8Call& s, mkcclDataType_t outType, GemmVariant v, cudaStream_t stream) {
  return gemmFp8Run(Fp8Problem{A, W, C, M, N, 2 * K, s.kind, s.scaleA, s.scaleW, outType}, v, dev, stream);
}

bool blockScales(const Fp8Call* fp8) { return fp8 != nullptr && fp8->kind == mkcclFp8ScaleBlock; }

const char* routeName(Route r) {
  switch (r) {
    case Route::Fused: return "fused";
    case Route::RsThenAg: return "fused ReduceScatter, then AllGather";
    default: return "sequential";
  }
}

const char* pushName(PushMode p) {
  return p == PushMode::Bulk ? "bulk stores" : p == PushMode::Ce ? "copy engines" : "the push team";
}

// A shape's plan, made on its first call.
struct ShapeKey {
  int mode = 0, ws = 0, type = 0, budget = 0, variant = 0;
  int64_t M = 0, N = 0, K = 0;
  bool operator==(const ShapeKey& o) const {
    return mode == o.mode && ws == o.ws && type == o.type && budget == o.budget && variant == o.variant &&
           M == o.M && N == o.N && K == o.K;
  }
};
struct ShapePlan {
  Route route = Route::Sequential;
  FusedPlan plan;    // the fused kernel's configuration and layout (RsThenAg: of the ReduceScatter)
  FusedChoices ch;   // its push (the copy engines demoted to the team where they cannot run), order
};
using ShapeCache = PlanCache<ShapeKey, ShapePlan>;

mkcclResult_t launchFused(OpCtx& ctx, const ShapePlan& sp, const void* A, const void* W, void* C, int64_t M,
                          int64_t N, int64_t K, mkcclDataType_t t, int64_t lda, int64_t ldw, const Fp8Call* fp8) {
  mkcclComm* comm = ctx.comm;
  const FusedPlan& plan = sp.plan;
  const PushMode push = sp.ch.push;
  const Layout& L = plan.L;
  CopyEngines* ce = nullptr;
  if (push == PushMode::Ce) MKCCL_CHECK(copyEnginesGet(comm, ceStreamCount(L, sp.ch.ceStreams), &ce));

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
  f.lda = lda;
  f.ldw = ldw;
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
  p.seqCtr = p.wsOf[p.rank] + kSeqSlot;
  p.C = static_cast<char*>(C);
  if (L.allReduce() && coll::tuningOf(ctx).direct != 2) {
    // C registered (mkcclCommRegister; coll.direct=off keeps the ag slots): finished tiles go
    // straight into every other rank's C, no copy out of the ag slots. Every rank must pass a C of
    // the same registration; the kernel checks (push.cuh, checkPeersInPlace).
    Registration* reg = nullptr;
    MKCCL_CHECK(coll::findReg(ctx, C, size_t(M) * size_t(N) * 2, &reg));
    if (reg != nullptr) {
      p.direct = 1;
      p.regIndex = coll::regIndexOf(comm, reg);
      p.regOff = uint64_t(static_cast<char*>(C) - reg->base);
      for (int q = 0; q < ws; ++q) p.regBase[q] = reg->peer[comm->rankLocal[q]];
    }
  }
  p.pushBulk = push == PushMode::Bulk ? 1 : 0;
  p.pushCe = push == PushMode::Ce ? 1 : 0;
  p.rxFlags = ce ? reinterpret_cast<const uint64_t*>(p.scratchOf[p.rank] + L.ceRxFlagsOffset())
                 : p.wsOf[p.rank] + kOpFlagSlot;
  p.earlyPublish = sp.ch.earlyPublish;
  if (ce) {
    // The batch counts, words and CTA count start from zero (the kernel counts up from there), and
    // so do our rx flags, which the peers' engines raise to a constant: cleared before our kernel
    // posts its entry, so no peer writes them yet, and after our last call, which waited for each.
    uint64_t* own = p.wsOf[p.rank] + kOpFlagSlot;
    CUDA_CHECK(cudaMemsetAsync(own + L.baseFlagSlots(), 0, size_t(L.flagSlots() - L.baseFlagSlots()) * 8,
                               ctx.stream));
    CUDA_CHECK(cudaMemsetAsync(p.scratchOf[p.rank] + L.ceRxFlagsOffset(), 0,
                               size_t(L.scratchBytes() - L.ceRxFlagsOffset()), ctx.stream));
    CUDA_CHECK(cudaEventRecord(ce->fork, ctx.stream));
  }
  MKCCL_CHECK(seqBumpOp(ctx));  // the kernel reads the call's number from the device (peekCallSeq)
  if (blockScales(fp8) && t == mkcclBfloat16) MKCCL_CHECK(reduceLaunchFp8Block<dev::Bf16>(f, *fp8, ctx.stream));
  else if (blockScales(fp8)) MKCCL_CHECK(reduceLaunchFp8Block<dev::F16>(f, *fp8, ctx.stream));
  else if (fp8 != nullptr && t == mkcclBfloat16) MKCCL_CHECK(reduceLaunchFp8<dev::Bf16>(f, *fp8, ctx.stream));
  else if (fp8 != nullptr) MKCCL_CHECK(reduceLaunchFp8<dev::F16>(f, *fp8, ctx.stream));
  else if (t == mkcclBfloat16) MKCCL_CHECK(reduceLaunch<dev::Bf16>(f, ctx.stream));
  else MKCCL_CHECK(reduceLaunch<dev::F16>(f, ctx.stream));
  return ce ? ceCopies(*ce, p, sp.ch.ceStreams, ctx.stream) : mkcclSuccess;
}

mkcclResult_t runSequential(OpCtx& ctx, const void* A, const void* W, void* C, int64_t M, int64_t N, int64_t K,
                            mkcclDataType_t t, int mode, GemmVariant v, int64_t lda, int64_t ldw,
                            const Fp8Call* fp8 = nullptr) {
  mkcclComm* comm = ctx.comm;
  const size_t es = typeSize(t);
  GemmExtras x;
  x.lda = size_t(lda);
  x.ldw = size_t(ldw);
  if (mode == kModeAllReduce) {
    if (fp8 != nullptr) MKCCL_CHECK(fp8Gemm(comm->cudaDev, A, W, C, M, N, K, *fp8, t, v, ctx.stream));
    else MKCCL_CHECK(gemmRunEx(A, W, C, M, N, K, t, t, x, v, ctx.stream));
    return allReduceOp(ctx, C, C, size_t(M) * N, t, mkcclSum);
  }
  // The full partial product needs a buffer of its own: the symmetric scratch, used locally.
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchGemmReduce, size_t(M) * N * es, &region));
  void* partial = region->peer[comm->localRank];
  if (fp8 != nullptr) MKCCL_CHECK(fp8Gemm(comm->cudaDev, A, W, partial, M, N, K, *fp8, t, v, ctx.stream));
  else MKCCL_CHECK(gemmRunEx(A, W, partial, M, N, K, t, t, x, v, ctx.stream));
  return reduceScatterOp(ctx, partial, C, size_t(M / comm->nranks) * N, t, mkcclSum);
}

// The exact route (a bias, an output type other than the input's, or a pitch of C): the GEMM
// engine writes this rank's fp32 partial product into the symmetric scratch, our ReduceScatter /
// AllReduce sums the partials in fp32 there, and one elementwise kernel adds the bias once to the
// sum and rounds once into C. Not fused: the GEMM and the reduction do not overlap.
mkcclResult_t runExact(OpCtx& ctx, const FusedArgs& a, int mode, GemmVariant v) {
  mkcclComm* comm = ctx.comm;
  const mkcclFusedWeight_t& w = a.w[0];
  const size_t M = a.M, N = w.N, rows = mode == kModeAllReduce ? M : M / size_t(comm->nranks);
  const size_t partialBytes = M * N * 4;
  const size_t sumBytes = mode == kModeAllReduce ? 0 : (rows * N * 4 + 255) / 256 * 256;
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchGemmReduce, sumBytes + partialBytes, &region));
  char* base = region->peer[comm->localRank];
  float* sum = reinterpret_cast<float*>(base);                       // RS: this rank's rows
  float* partial = reinterpret_cast<float*>(base + sumBytes);        // AR: also the sum (in place)
  GemmExtras x;
  x.lda = a.lda;
  x.ldw = w.ldw;
  MKCCL_CHECK(gemmRunEx(a.A, w.W, partial, M, N, a.K, a.inType, mkcclFloat32, x, v, ctx.stream));
  if (mode == kModeAllReduce) {
    MKCCL_CHECK(allReduceOp(ctx, partial, partial, M * N, mkcclFloat32, mkcclSum));
    sum = partial;
  } else {
    MKCCL_CHECK(reduceScatterOp(ctx, partial, sum, rows * N, mkcclFloat32, mkcclSum));
  }
  return finishLaunch(sum, int64_t(rows), int64_t(N), w.C, int64_t(w.ldc), a.outType, w.bias, a.biasType,
                      comm->smCount, ctx.stream);
}

// AllReduce as the fused ReduceScatter kernel (plan: a ReduceScatter configuration) into this
// rank's rows of C, then our AllGather of those rows into C, in place. The AllGather is a kernel
// with a protocol of its own: it takes the next sequence number.
mkcclResult_t runRsThenAg(OpCtx& ctx, const ShapePlan& plan, const void* A, const void* W, void* C, int64_t M,
                          int64_t N, int64_t K, mkcclDataType_t t, int64_t lda, int64_t ldw, const Fp8Call* fp8) {
  const int ws = ctx.comm->nranks;
  const size_t rows = size_t(M / ws), es = typeSize(t);
  char* mine = static_cast<char*>(C) + size_t(ctx.comm->rank) * rows * size_t(N) * es;
  MKCCL_CHECK(launchFused(ctx, plan, A, W, mine, M, N, K, t, lda, ldw, fp8));
  opNextKernel(ctx);
  return allGatherOp(ctx, mine, C, rows * size_t(N), t);
}

// The plan of a shape: the tuner's route or the rule's, the fused configuration and its push.
mkcclResult_t makePlan(const mkcclComm* comm, const PlanInputs& in, mkcclDataType_t t, const Tuning::Reduce& over,
                       ShapePlan* out, const Fp8Call* fp8) {
  const int mode = in.mode;
  const char* name = opName(mode, fp8);
  Occupancy occ;
  const int cudaDev = comm->cudaDev, sms = comm->smCount;
  if (blockScales(fp8) && t == mkcclBfloat16) MKCCL_CHECK(reduceOccupancyFp8Block<dev::Bf16>(cudaDev, sms, &occ));
  else if (blockScales(fp8)) MKCCL_CHECK(reduceOccupancyFp8Block<dev::F16>(cudaDev, sms, &occ));
  else if (fp8 != nullptr && t == mkcclBfloat16) MKCCL_CHECK(reduceOccupancyFp8<dev::Bf16>(cudaDev, sms, &occ));
  else if (fp8 != nullptr) MKCCL_CHECK(reduceOccupancyFp8<dev::F16>(cudaDev, sms, &occ));
  else if (t == mkcclBfloat16) MKCCL_CHECK(reduceOccupancy<dev::Bf16>(comm->cudaDev, comm->smCount, &occ));
  else MKCCL_CHECK(reduceOccupancy<dev::F16>(comm->cudaDev, comm->smCount, &occ));
  PlanInputs pin = in;
  pin.occ = occ;
  if (blockScales(fp8)) pin.maxBn = 128;  // the block-scaled fused kernel's one width (launch_fp8_block.cuh)
  const PlanChoice rule = choosePlan(pin);
  ShapePlan sp;
  sp.route = over.plan == Tuning::Reduce::kFused        ? Route::Fused
             : over.plan == Tuning::Reduce::kSequential ? Route::Sequential
             : over.plan == Tuning::Reduce::kRsThenAg   ? Route::RsThenAg
                                                        : rule.route;
  if (sp.route == Route::RsThenAg && in.M % in.ws != 0) {
    MKCCL_WARN("%s: %s.plan=rs_ag needs M (%lld) divisible by the %d ranks: sequential", name, tuningPrefix(mode),
               (long long)in.M, in.ws);
    sp.route = Route::Sequential;
  }
  if (sp.route != Route::Sequential) {
    PlanInputs fin = pin;
    if (sp.route == Route::RsThenAg) fin.mode = kModeReduceScatter;
    sp.plan = planFused(fin);
    if (!sp.plan.ok) {
      MKCCL_WARN("%s: the fused kernel (tiles: %s) cannot run %lldx%lldx%lld on %d ranks (flags or scratch would not "
                 "fit): sequential",
                 name, gemmVariantName(in.variant), (long long)in.M, (long long)in.N, (long long)in.K, in.ws);
      sp.route = Route::Sequential;
    }
  }
  if (sp.route != Route::Sequential) {
    Layout& L = sp.plan.L;
    MKCCL_CHECK(fusedChoices(L.mode, in.ws, over, &L, &sp.ch));
    if (sp.ch.push == PushMode::Ce) {
      // Where the copy engines cannot run: an error if the user asked for them, else the push team
      // (every rank reaches the same verdict: the flag area and the driver agree).
      L.setCeBatch(sp.ch.ceBatch);
      const char* why = L.flagSlots() > in.flagSlots ? "its batch flags do not fit the flag area"
                        : !copyEnginesUsable()        ? "needs the driver's stream memory operations"
                                                      : nullptr;
      if (why && sp.ch.forcedPush)
        return setError(mkcclInvalidUsage, "%s: tuning %s.push=ce %s", name, tuningPrefix(mode), why);
      if (why) {
        MKCCL_INFO("%s: copy engines: %s; the push team sends", name, why);
        sp.ch.push = PushMode::Team;
        L.setCeBatch(0);
      }
    }
  }
  const char* how = over.plan != Tuning::Reduce::kAuto ? "forced" : ruleReasonName(rule.why);
  if (sp.route != Route::Sequential)
    MKCCL_INFO("%s %lldx%lldx%lld, %d ranks: %s, tile 128x%d, cluster %d, %d CTAs, %d tiles per chunk, partials by "
               "%s, %s order%s (%s; model: fused %s%.0f us, rs+ag %s%.0f us, sequential %.0f us)",
               name, (long long)in.M, (long long)in.N, (long long)(fp8 ? 2 * in.K : in.K), in.ws, routeName(sp.route),
               sp.plan.bn, sp.plan.cs, sp.plan.ctas, sp.plan.L.tiles, pushName(sp.ch.push),
               sp.plan.L.order == kOrderInterleaved ? "interleaved" : "phase", sp.plan.L.ring ? ", ring reduction" : "",
               how, rule.plan.ok ? "" : "n/a ", rule.plan.estUs, rule.rsPlan.ok ? "" : "n/a ", rule.rsAgUs, rule.seqUs);
  else
    MKCCL_INFO("%s %lldx%lldx%lld, %d ranks: sequential (GEMM, then %s) (%s; model: fused %s%.0f us, rs+ag %s%.0f us, "
               "sequential %.0f us)",
               name, (long long)in.M, (long long)in.N, (long long)(fp8 ? 2 * in.K : in.K), in.ws,
               mode == kModeAllReduce ? "AllReduce" : "ReduceScatter", how, rule.plan.ok ? "" : "n/a ",
               rule.plan.estUs, rule.rsPlan.ok ? "" : "n/a ", rule.rsAgUs, rule.seqUs);
  *out = sp;
  return mkcclSuccess;
}

// A communicator spanning nodes (net_route.h): the fused kernel across nodes (net_fused.h), the
// split route (net_split.h), or the sequential (or exact) route over the hierarchical collectives,
// as gemm_rs.net / gemm_ar.net say. Refused up front where the collectives
// across nodes would refuse (nodes of different sizes, graph capture), so nothing is enqueued.
// fp8 (the bytes described as 16-bit rows, fp8.h): the split or the sequential route (the fused
// kernel across nodes is 16-bit only).
mkcclResult_t runAcrossNodes(OpCtx& ctx, const FusedArgs& a, int mode, const Tuning::Reduce& over, GemmVariant v,
                             const Fp8Call* fp8) {
  mkcclComm* comm = ctx.comm;
  const char* name = opName(mode, fp8);
  NetCollInfo* info = netCollInfo(comm);
  if (info == nullptr)
    return setError(mkcclInternalError, "%s: the communicator spans %d nodes but has no network state", name,
                    comm->nNodes);
  const NetRoute nr = netRouteFor(over.plan, a.epilogueExtras(0), info->uniform, ctx.capturing);
  if (nr.verdict == NetVerdict::NotUniform) return netNotUniform(*info, name);
  if (nr.verdict == NetVerdict::Capturing)
    return setError(mkcclInvalidUsage,
                    "%s across nodes (this communicator spans %d nodes) cannot be captured into a CUDA graph yet: "
                    "its collectives go through the host proxy; call it eagerly (docs/GRAPHS.md)",
                    name, comm->nNodes);
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  const mkcclFusedWeight_t& w = a.w[0];
  if (nr.exact) {
    MKCCL_TRACE("%s call #%llu: across %d nodes, exact route", name, (unsigned long long)ctx.dev.seq, comm->nNodes);
    return runExact(ctx, a, mode, v);
  }
  // gemm_rs.net / gemm_ar.net: split (net_split.h), fused (net_fused.h), sequential, or auto (net_route.h,
  // netAutoFusedFirst): with one rank per node or over tcp the split route where it applies, else
  // the fused kernel beyond one wave of tiles; with several ranks per node on an RDMA NIC, the fused
  // kernel first (it overlaps the node's NVLink reduction with the GEMM, which the split route runs
  // after each piece's GEMM), then the split route; else (and for `sequential`) the sequential route.
  // fp8 never takes the fused kernel (16-bit only across nodes).
  bool splitRan = false;
  const bool autoRoute = over.net == Tuning::Reduce::kNetAuto;
  const bool fusedFirst = autoRoute && netAutoFusedFirst(info->localRanks, info->windowOnHost) && fp8 == nullptr;
  const auto trySplit = [&]() -> mkcclResult_t {
    const unsigned long long seq = ctx.dev.seq;
    MKCCL_CHECK(runNetSplit(ctx, a, mode, v, over.netPieces, fp8, &splitRan));
    if (splitRan) MKCCL_TRACE("%s call #%llu: across %d nodes, split", name, seq, comm->nNodes);
    return mkcclSuccess;
  };
  if (over.net == Tuning::Reduce::kNetSplit || (autoRoute && !fusedFirst)) MKCCL_CHECK(trySplit());
  if (!splitRan && fp8 == nullptr && (over.net == Tuning::Reduce::kNetFused || autoRoute)) {
    bool ran = false;
    MKCCL_CHECK(runNetFused(ctx, a, mode, v, over, &ran));
    if (ran) return mkcclSuccess;
    if (fusedFirst) MKCCL_CHECK(trySplit());
  }
  {
    // Logged once per shape, like the one-node plans (the cache holds a sequential plan).
    OpState& os = opState(comm);
    std::lock_guard<std::mutex> lock(os.mu);
    ShapeCache& cache =
        ShapeCache::of(os, mode == kModeAllReduce ? OpKind::GemmAllReduce : OpKind::GemmReduceScatter);
    ShapeKey key;
    key.mode = mode;
    key.ws = comm->nranks;
    key.type = fp8 == nullptr ? int(a.inType) : blockScales(fp8) ? 200 + int(a.inType) : 100 + int(a.inType);
    key.budget = -comm->nNodes;  // never a one-node key (those hold budgets >= 1)
    key.variant = int(v);
    key.M = int64_t(a.M);
    key.N = int64_t(w.N);
    key.K = int64_t(a.K);
    if (cache.find(key) == nullptr) {
      if (nr.demoted)
        MKCCL_WARN("%s: %s.plan=%s runs in one node only; across %d nodes the sequential route runs (GEMM, then the "
                   "hierarchical %s)",
                   name, tuningPrefix(mode), over.plan == Tuning::Reduce::kFused ? "fused" : "rs_ag", comm->nNodes,
                   mode == kModeAllReduce ? "AllReduce" : "ReduceScatter");
      MKCCL_INFO("%s %zux%zux%zu, %d ranks on %d nodes: %s (%s; %lld bytes per rank cross the network)", name, a.M,
                 w.N, fp8 != nullptr ? 2 * a.K : a.K, comm->nranks, comm->nNodes, splitRan ? "split" : "sequential",
                 splitRan ? "GEMMs of row pieces, the other nodes' rows first, sent while this node's are computed"
                 : mode == kModeAllReduce ? "GEMM, then the hierarchical AllReduce"
                                          : "GEMM, then the hierarchical ReduceScatter",
                 (long long)(splitRan ? (mode == kModeAllReduce ? 2 : 1) *
                                            netBytesPerRank(kModeReduceScatter, comm->nNodes, info->localRanks,
                                                            int64_t(a.M), int64_t(w.N), int64_t(typeSize(a.inType)))
                                      : netBytesPerRank(mode, comm->nNodes, info->localRanks, int64_t(a.M),
                                                        int64_t(w.N), int64_t(typeSize(a.inType)))));
      cache.insert(key, ShapePlan{});
    }
  }
  if (splitRan) return mkcclSuccess;
  MKCCL_TRACE("%s call #%llu: across %d nodes, sequential", name, (unsigned long long)ctx.dev.seq, comm->nNodes);
  return runSequential(ctx, a.A, w.W, w.C, int64_t(a.M), int64_t(w.N), int64_t(a.K), a.inType, mode, v,
                       int64_t(a.lda), int64_t(w.ldw), fp8);
}

}  // namespace

mkcclResult_t gemmReduceOp(OpCtx& ctx, const FusedArgs& a, int mode) { return gemmReduceOp(ctx, a, mode, nullptr); }

// fp8 != nullptr: `a` describes the bytes (fp8.h; mkcclGemmReduceScatterFp8 / AllReduceFp8).
mkcclResult_t gemmReduceOp(OpCtx& ctx, const FusedArgs& a, int mode, const Fp8Call* fp8) {
  mkcclComm* comm = ctx.comm;
  const void* A = a.A;
  const void* W = a.w[0].W;
  void* C = a.w[0].C;
  const size_t M = a.M, N = a.w[0].N, K = a.K;
  const mkcclDataType_t t = a.inType;
  const int64_t lda = int64_t(a.lda), ldw = int64_t(a.w[0].ldw);
  const char* name = opName(mode, fp8);
  if (comm->ccMajor != 9)
    return setError(mkcclInvalidUsage, "%s: needs Hopper (sm_90) GPUs; device %d is sm_%d%d", name, comm->cudaDev,
                    comm->ccMajor, comm->ccMinor);
  const Tuning& tune = tuningOf(comm);
  const Tuning::Reduce& over = mode == kModeAllReduce ? tune.gemmAr : tune.gemmRs;
  if (comm->nranks == 1 && fp8 != nullptr) {  // mkcclGemmFp8
    MKCCL_CHECK(cuDriverLoad());
    MKCCL_CHECK(gemmCheckFault());
    return fp8Gemm(comm->cudaDev, A, W, C, int64_t(M), int64_t(N), int64_t(K), *fp8, a.outType, tune.gemm.variant,
                   ctx.stream);
  }
  if (fp8 != nullptr && comm->nNodes > 1) return runAcrossNodes(ctx, a, mode, over, tune.gemm.variant, fp8);
  if (comm->nranks == 1) {
    GemmExtras x;
    x.lda = a.lda;
    x.ldw = a.w[0].ldw;
    x.ldc = a.w[0].ldc;
    x.bias = a.w[0].bias;
    x.biasType = a.biasType;
    return gemmRunEx(A, W, C, M, N, K, t, a.outType, x, tune.gemm.variant, ctx.stream);
  }
  if (comm->nNodes > 1) return runAcrossNodes(ctx, a, mode, over, tune.gemm.variant, nullptr);
  if (a.epilogueExtras(0)) {
    MKCCL_CHECK(cuDriverLoad());
    MKCCL_CHECK(gemmCheckFault());
    MKCCL_TRACE("%s call #%llu: exact route (bias, output type or pitch of C)", name,
                (unsigned long long)ctx.dev.seq);
    return runExact(ctx, a, mode, tune.gemm.variant);
  }

  PlanInputs in;
  in.mode = mode;
  in.ws = comm->nranks;
  in.M = int64_t(M);
  in.N = int64_t(N);
  in.K = int64_t(K);
  in.ctaBudget = opMaxCtas(comm);
  in.flagSlots = int64_t(comm->ws.flagsBytes / 8) - kOpFlagSlot;
  in.variant = gemmVariantWide(tune.gemm.variant);  // no 128 x 192 fused kernel
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());

  OpState& os = opState(comm);
  std::unique_lock<std::mutex> lock(os.mu);
  ShapeCache& cache = ShapeCache::of(os, mode == kModeAllReduce ? OpKind::GemmAllReduce : OpKind::GemmReduceScatter);
  ShapeKey key;
  key.mode = mode;
  key.ws = in.ws;
  // fp8: another kernel, another rule input (K halved); block scales: another kernel and tile width.
  key.type = blockScales(fp8) ? 200 + int(t) : fp8 != nullptr ? 100 + int(t) : int(t);
  key.budget = in.ctaBudget;
  key.variant = int(in.variant);
  key.M = in.M;
  key.N = in.N;
  key.K = in.K;
  const ShapePlan* found = cache.find(key);
  if (found == nullptr) {
    ShapePlan made;
    MKCCL_CHECK(makePlan(comm, in, t, over, &made, fp8));
    found = cache.insert(key, made);
  }
  const ShapePlan sp = *found;
  lock.unlock();
  MKCCL_TRACE("%s call #%llu: %s", name, (unsigned long long)ctx.dev.seq, routeName(sp.route));
  switch (sp.route) {
    case Route::Fused: return launchFused(ctx, sp, A, W, C, in.M, in.N, in.K, t, lda, ldw, fp8);
    case Route::RsThenAg: return runRsThenAg(ctx, sp, A, W, C, in.M, in.N, in.K, t, lda, ldw, fp8);
    default: return runSequential(ctx, A, W, C, in.M, in.N, in.K, t, mode, in.variant, lda, ldw, fp8);
  }
}

}  // namespace rs

mkcclResult_t gemmReduceScatterOp(OpCtx& ctx, const FusedArgs& a) {
  return rs::gemmReduceOp(ctx, a, rs::kModeReduceScatter);
}

}  // namespace mkccl
