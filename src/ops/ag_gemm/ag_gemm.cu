// mkccl::allGatherGemmOp (mkcclAllGatherGemm): C[M, N] = AllGather(A) . W^T in one node.
// Arguments are checked by the API (api_fused.cc). Here: the plan (the fused kernel with comm CTAs
// or with side teams, the copy engines beside it, or our AllGather then the GEMM engine: a rule on
// the shape, rule.h, unless the tuner's ag_gemm.* keys force one), cached per communicator and
// shape; the symmetric region that holds the gathered A; the launches.
// docs/AG_GEMM.md describes the design, the plans and their overrides.
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include "kernels/device/wgmma.cuh"
#include "kernels/device/wgmma_fp8.cuh"
#include "ops/ag_gemm/host.h"
#include "ops/ag_gemm/net_split.h"
#include "kernels/ag_gemm/layout.h"
#include "ops/ag_gemm/model.h"
#include "ops/ag_gemm/rule.h"
#include "ops/coll/coll_direct.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_fp8.h"
#include "ops/tuner/op_state.h"
#include "base/check.h"
#include "runtime/cudriver.h"
#include "base/log.h"
#include "runtime/fused_args.h"
#include "runtime/ops.h"
#include "runtime/ops_fp8.h"
#include "runtime/comm.h"
#include "runtime/net_coll_info.h"
#include "runtime/symmem.h"

namespace mkccl {
namespace {

const char* kOp = "mkcclAllGatherGemm";
const char* kOpFp8 = "mkcclAllGatherGemmFp8";

const char* opName(const ag::FusedCall& c) { return c.fp8 ? kOpFp8 : kOp; }

// mkcclGemmFp8's kernels on one GPU (K: e4m3 elements), at the communicator's gemm.variant: the
// world of one, and the sequential plan's GEMM on the gathered region (block scales: on the
// gathered scale rows).
mkcclResult_t fp8Gemm(int dev, const void* A, const void* W, void* C, int64_t M, int64_t N, int64_t K,
                      mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW, mkcclDataType_t outType,
                      GemmVariant v, cudaStream_t stream) {
  return gemmFp8Run(Fp8Problem{A, W, C, M, N, K, kind, scaleA, scaleW, outType}, v, dev, stream);
}

enum class Plan { Auto, Fused, Sequential, Ce };

const char* planName(Plan p) {
  switch (p) {
    case Plan::Fused: return "fused";
    case Plan::Sequential: return "sequential";
    case Plan::Ce: return "ce (fused, copy engines push)";
    default: return "auto";
  }
}

// What the op remembers per shape (the plans: planning walks the schedule, not something to redo on
// every call) in the communicator's plan cache (ops/tuner/op_state.h).
struct ShapeKey {
  int dev = -1, ws = 0, me = 0, type = 0, commCtas = 0, variant = 0, smCount = 0;
  int64_t M = 0, N = 0, K = 0;
  bool gathered = false;
  bool blockScales = false;  // fp8 block scales: other kernels, tiles and layout (a scale area)
  bool operator==(const ShapeKey& o) const {
    return dev == o.dev && ws == o.ws && me == o.me && type == o.type && commCtas == o.commCtas &&
           variant == o.variant && smCount == o.smCount && M == o.M && N == o.N && K == o.K &&
           gathered == o.gathered && blockScales == o.blockScales;
  }
};
struct ShapeState {
  ag::FusedPlan fp;      // the fused kernel as the model configures it (ag_gemm.plan=fused)
  ag::FusedPlan fpAuto;  // the fused kernel the auto plan runs (side teams where the rule says so)
  ag::FusedPlan fpCe;    // the ce plan's kernel: every SM computes, no comm CTA, no side team
  ag::RuleChoice rule;
  double sequentialUs = 0;
  int logged = 0;  // bits: auto, forced fused, forced sequential, forced ce
};
using ShapeCache = PlanCache<ShapeKey, ShapeState>;

ShapeKey keyOf(const ag::FusedCall& c) {
  ShapeKey k;
  k.dev = c.dev;
  k.ws = c.push.L.ws;
  k.me = c.push.L.me;
  k.type = static_cast<int>(c.fp8 ? mkcclFloat8e4m3 : c.type);  // fp8: bf16 bytes, another kernel
  k.M = c.M;
  k.N = c.N;
  k.K = c.K;
  k.gathered = c.push.gathered != nullptr;
  k.blockScales = c.blockScales != 0;
  k.commCtas = c.commCtas;
  k.variant = static_cast<int>(c.variant);
  k.smCount = c.smCount;
  return k;
}

// The plans of a call's shape (made on its first call).
template <class In>
mkcclResult_t makeShapeState(const ag::FusedCall& c, ShapeState* out) {
  ShapeState st;
  const bool gathered = c.push.gathered != nullptr;
  MKCCL_CHECK(ag::fusedPlan<In>(c, &st.fp));
  st.sequentialUs = ag::estimateSequential(c.push.L, st.fp.full, c.N, c.K, gathered);
  ag::RuleInputs ri;
  ri.ws = c.push.L.ws;
  ri.shardBytes = c.push.L.shardBytes();
  ri.tiles = (c.M + ag::kTileRows - 1) / ag::kTileRows * ((c.N + st.fp.full.bn - 1) / st.fp.full.bn);
  ri.ctas = st.fp.full.ctas;
  ri.gemmUs = ag::gemmUs(st.fp.full, c.M, c.N, c.K);
  ri.copyEngines = copyEnginesUsable();
  st.rule = ag::chooseAutoPlan(ri);
  st.fpCe = st.fp;
  st.fpCe.gemm = st.fp.full;
  st.fpCe.commCtas = 0;
  st.fpCe.sideTeams = 0;
  st.fpCe.commFromBudget = false;
  st.fpCe.est = ag::estimateCe(c.push.L, st.fp.full, c.N, c.K, gathered);
  st.fpAuto = st.fp;
  if (st.rule.plan == ag::AutoPlan::Side && c.commCtas < 0) {  // comm CTAs the user asked for stay
    ag::FusedCall side = c;
    side.commCtas = 0;
    MKCCL_CHECK(ag::fusedPlan<In>(side, &st.fpAuto));
  }
  *out = st;
  return mkcclSuccess;
}

// Says which plan a shape got (INFO), once per shape and kind of call (auto or forced).
void logChoice(const OpCtx& ctx, const ag::FusedCall& c, ShapeState& st, Plan plan, bool forced) {
  if (logLevel() < LogLevel::Info) return;
  const int bit = forced ? (plan == Plan::Fused ? 2 : plan == Plan::Ce ? 8 : 4) : 1;
  if (st.logged & bit) return;
  st.logged |= bit;
  const ag::FusedPlan& fp = plan == Plan::Ce ? st.fpCe : forced ? st.fp : st.fpAuto;
  const GemmPlan& g = plan == Plan::Fused ? fp.gemm : fp.full;
  char comm[200];
  if (plan == Plan::Sequential)
    snprintf(comm, sizeof(comm), "AllGather first (%d CTAs)", ag::kGatherCtas);
  else if (plan == Plan::Ce)
    snprintf(comm, sizeof(comm), "the copy engines push (%d streams)", ctx.comm->nranks - 1);
  else
    snprintf(comm, sizeof(comm), "%d comm CTAs%s%s", fp.commCtas, fp.commFromBudget ? " taken from the GEMM" : "",
             fp.sideTeams ? " + the producer warpgroups' idle warps" : "");
  const long long kShown = c.fp8 ? 2 * c.K : c.K;  // fp8: e4m3 elements, not the 16-bit columns
  char why[240];
  if (forced)
    snprintf(why, sizeof(why), "tuning ag_gemm.plan");
  else
    snprintf(why, sizeof(why), "rule: %s; %.1f waves, push/GEMM %.2f", st.rule.why, st.rule.waves, st.rule.pushShare);
  MKCCL_INFO("%s %lldx%lldx%lld on %d ranks (rank %d): %s (%s; model: fused %.0f us = GEMM %.0f us, push %.0f us; "
             "sequential %.0f us); tile 128x%d, cluster %d, %d compute CTAs, %s",
             opName(c), static_cast<long long>(c.M), static_cast<long long>(c.N), kShown,
             ctx.comm->nranks, ctx.comm->rank, forced ? planName(plan) : ag::autoPlanName(st.rule.plan), why,
             fp.est.fusedUs, fp.est.gemmUs, fp.est.commUs, st.sequentialUs, g.bn, g.clusterSize, g.ctas, comm);
}

template <class In>
mkcclResult_t launchPlan(OpCtx& ctx, ag::FusedCall& c, const ag::FusedPlan& fp, Plan plan) {
  const ag::Layout& L = c.push.L;
  MKCCL_CHECK(seqBumpOp(ctx));  // the kernels read the call's number from the device (peekCallSeq)
  if (plan == Plan::Ce) {
    CopyEngines* ce = nullptr;
    c.push.ownToRegion = L.m % ag::kTileRows != 0 || c.fullRegion;
    // One stream per receiver (ring: per forwarded shard), and one for our shard into our region.
    MKCCL_CHECK(copyEnginesGet(ctx.comm, L.ws - 1 + (c.push.ownToRegion ? 1 : 0), &ce));
    c.push.ce = 1;
    c.push.ceGo = reinterpret_cast<uint64_t*>(ctx.dev.peers[L.me]) + kCopyEngineSlot;
    // The streams of the last call were joined into this stream, so none waits on the word now.
    CUDA_CHECK(cudaMemsetAsync(c.push.ceGo, 0, sizeof(uint64_t), ctx.stream));
    CUDA_CHECK(cudaEventRecord(ce->fork, ctx.stream));
    MKCCL_CHECK(ag::fusedLaunch<In>(c, fp, ctx.stream));
    return ag::ceCopies(*ce, c, c.ceGroupBytes, c.ceRing != 0, ctx.stream);
  }
  if (plan == Plan::Sequential) {
    c.push.ownToRegion = 1;  // the GEMM reads every row from the region
    MKCCL_CHECK(ag::gatherLaunch(c.push, c.dev, std::min(c.smCount, ag::kGatherCtas), ctx.stream));
    if (c.fp8) {
      // Block scales: the gather pushed every shard's scale rows (ours too) into our scale area.
      const mkcclFp8ScaleKind_t kind = c.blockScales ? mkcclFp8ScaleBlock : mkcclFp8ScaleTensor;
      const float* sA = c.blockScales ? reinterpret_cast<const float*>(ag::scaleArea(c.push, c.push.lme)) : c.scaleA;
      return fp8Gemm(c.dev, c.push.region[c.push.lme], c.W, c.C, c.M, c.N, 2 * c.K, kind, sA, c.scaleW, c.outType,
                     c.variant, ctx.stream);
    }
    GemmExtras x;
    x.ldw = size_t(c.ldw);
    x.ldc = size_t(c.ldc);
    x.bias = c.bias;
    x.biasType = c.biasType;
    return gemmRunEx(c.push.region[c.push.lme], c.W, c.C, c.M, c.N, c.K, c.type, c.outType, x, c.variant, ctx.stream);
  }
  // Tiles wholly inside the own shard load it from the user's A; a tile that straddles a shard
  // boundary (m not a multiple of 128) reads the own rows from the region. In place the region is
  // the user's gatheredA, which needs the own shard unless A lies in it already.
  c.push.ownToRegion = L.m % ag::kTileRows != 0 || c.fullRegion || c.directOwn;
  return ag::fusedLaunch<In>(c, fp, ctx.stream);
}

// The plan of this call (forced, or the rule's), then its launches. Under the communicator's
// plan lock throughout: launches only enqueue, and no state outlives it.
template <class In>
mkcclResult_t planAndRun(OpCtx& ctx, ag::FusedCall& c, Plan forced) {
  OpState& os = opState(ctx.comm);
  std::lock_guard<std::mutex> lock(os.mu);
  ShapeCache& cache = ShapeCache::of(os, OpKind::AllGatherGemm);
  const ShapeKey key = keyOf(c);
  ShapeState* st = cache.find(key);
  if (st == nullptr) {
    ShapeState made;
    MKCCL_CHECK(makeShapeState<In>(c, &made));
    st = cache.insert(key, made);
  }
  Plan plan = forced;
  if (forced == Plan::Auto)
    plan = st->rule.plan == ag::AutoPlan::Sequential    ? Plan::Sequential
           : st->rule.plan == ag::AutoPlan::CopyEngines ? Plan::Ce
                                                        : Plan::Fused;
  if (plan == Plan::Ce && c.push.direct) {
    // In place the pushes go to addresses the peers post in the kernel (their offsets in the
    // registration); the copy engines would need them on the host: the fused plan runs.
    plan = Plan::Fused;
  }
  if (plan == Plan::Ce && c.push.net.nodes > 1) plan = Plan::Fused;  // the copy engines stay in the node
  if (plan == Plan::Ce && c.packedA) {
    // A strided A was packed into this rank's region slot, which the copy engines would copy onto
    // itself: the fused kernel's pushes (a copy onto itself there is harmless) run instead.
    plan = Plan::Fused;
  }
  if (plan == Plan::Ce && !copyEnginesUsable()) {
    MKCCL_WARN("%s: the ce plan needs the driver's stream memory operations (cuStreamWaitValue64, "
               "cuStreamBatchMemOp), not found: fused",
               opName(c));
    plan = Plan::Fused;
  }
  logChoice(ctx, c, *st, plan, forced != Plan::Auto);
  const ag::FusedPlan& fp = plan == Plan::Ce ? st->fpCe : forced == Plan::Auto ? st->fpAuto : st->fp;
  return launchPlan<In>(ctx, c, fp, plan);
}

// The further weights of a call (mkcclFusedGemmArgs_t.weights[1..]): the GEMM engine on the
// gathered A the first weight's call left contiguous in `full` (the user's gatheredA, or this
// rank's region with the own shard in it), on the same stream.
mkcclResult_t moreWeights(OpCtx& ctx, const FusedArgs& a, const void* full, size_t lda, GemmVariant v) {
  return ag::weightGemms(ctx, a, static_cast<const char*>(full), lda, 0, a.M, 1, v);
}

// The scales of an fp8 call (device pointers; block: scaleA holds this rank's shard's rows).
struct Fp8Scales {
  mkcclFp8ScaleKind_t kind;
  const float* scaleA;
  const float* scaleW;
};

// Both entry points. fp8: `a` describes the bytes (bf16, K halved; allGatherGemmFp8Op).
mkcclResult_t runAgGemm(OpCtx& ctx, const FusedArgs& a, const Fp8Scales* fp8) {
  mkcclComm* comm = ctx.comm;
  const char* op = fp8 ? kOpFp8 : kOp;
  const mkcclDataType_t t = a.inType;
  const void* A = a.A;
  void* gatheredA = a.gatheredA;
  const size_t M = a.M, K = a.K, N = a.w[0].N;
  ARG_CHECK(t == mkcclBfloat16 || t == mkcclFloat16, "%s: datatype must be mkcclBfloat16 or mkcclFloat16", op);
  const size_t es = 2;
  const Tuning& tune = tuningOf(comm);
  const Tuning::AgGemm& over = tune.agGemm;
  const Plan forced = over.plan == Tuning::AgGemm::kFused        ? Plan::Fused
                      : over.plan == Tuning::AgGemm::kSequential ? Plan::Sequential
                      : over.plan == Tuning::AgGemm::kCe         ? Plan::Ce
                                                                 : Plan::Auto;
  // Comm CTAs: the tuner's ag_gemm.comm_ctas, else the communicator's SM split (config.commCtas,
  // MKCCL_COMM_CTAS), else the model's.
  const int commCtas = over.commCtas >= 0 ? over.commCtas : comm->cfg.commCtas;
  const int ws = comm->nranks, me = comm->rank;

  if (ws == 1 && fp8 != nullptr) {  // nothing to gather: mkcclGemmFp8, and the copy
    MKCCL_CHECK(fp8Gemm(comm->cudaDev, A, a.w[0].W, a.w[0].C, static_cast<int64_t>(M), static_cast<int64_t>(N),
                        2 * static_cast<int64_t>(K), fp8->kind, fp8->scaleA, fp8->scaleW, a.outType,
                        tune.gemm.variant, ctx.stream));
    if (gatheredA != nullptr && gatheredA != A)
      CUDA_CHECK(cudaMemcpyAsync(gatheredA, A, M * K * es, cudaMemcpyDeviceToDevice, ctx.stream));
    return mkcclSuccess;
  }
  if (ws == 1) {  // nothing to gather: the GEMM engine per weight, and a copy if the caller wants the "gathered" A
    for (int i = 0; i < a.numWeights; ++i) {
      const mkcclFusedWeight_t& w = a.w[i];
      GemmExtras x;
      x.lda = a.lda;
      x.ldw = w.ldw;
      x.ldc = w.ldc;
      x.bias = w.bias;
      x.biasType = a.biasType;
      MKCCL_CHECK(gemmRunEx(A, w.W, w.C, M, w.N, K, t, a.outType, x, tune.gemm.variant, ctx.stream));
    }
    if (gatheredA != nullptr && gatheredA != A)
      CUDA_CHECK(cudaMemcpy2DAsync(gatheredA, K * es, A, a.lda * es, K * es, M, cudaMemcpyDeviceToDevice, ctx.stream));
    return mkcclSuccess;
  }
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  GemmDeviceInfo info;
  MKCCL_CHECK(gemmDeviceInfo(comm->cudaDev, &info));
  if (info.ccMajor != 9)
    return setError(mkcclInvalidUsage, "%s: needs a Hopper (sm_90) GPU; device %d is sm_%d%d", op, comm->cudaDev,
                    info.ccMajor, info.ccMinor);
  // Across nodes: the split route where it applies (ag_gemm.net; net_split.h), else the fused
  // kernel; fp8 runs on the split route only (the fused kernel's network path moves 16-bit rows
  // without their scales).
  const NetCollInfo* netInfo = comm->nNodes > 1 ? netCollInfo(comm) : nullptr;
  if (comm->nNodes > 1 && netInfo == nullptr)
    return setError(mkcclInternalError, "%s: the communicator spans %d nodes but has no network state", op,
                    comm->nNodes);
  const bool trySplit =
      fp8 != nullptr || over.net == Tuning::AgGemm::kNetSplit ||
      (over.net == Tuning::AgGemm::kNetAuto && netInfo && ag::netAutoSplit(comm->localRanks, netInfo->windowOnHost));
  if (comm->nNodes > 1 && trySplit && (!ctx.capturing || fp8 != nullptr)) {
    if (ctx.capturing)
      return setError(mkcclInvalidUsage,
                      "%s across nodes (this communicator spans %d nodes) cannot be captured into a CUDA graph: its "
                      "network path takes the host's call numbers; call it eagerly (docs/GRAPHS.md)",
                      op, comm->nNodes);
    const NetCollInfo* info = netInfo;
    if (!info->uniform && fp8 != nullptr) return netNotUniform(*info, op);
    bool ran = false;
    if (info->uniform) {
      ag::NetFp8 f8;
      if (fp8 != nullptr) f8 = ag::NetFp8{fp8->kind, fp8->scaleA, fp8->scaleW};
      MKCCL_CHECK(ag::runNetSplit(ctx, a, tune.gemm.variant, over.netPieces, fp8 != nullptr ? &f8 : nullptr, &ran));
    }
    if (ran) {
      MKCCL_TRACE("%s call #%llu: across %d nodes, split", op, (unsigned long long)ctx.dev.seq, comm->nNodes);
      return mkcclSuccess;
    }
    if (fp8 != nullptr)
      return setError(mkcclInvalidUsage,
                      "%s across %d nodes: a rank's shard (%zu bytes) must fit one slot of the network window "
                      "(MKCCL_NET_BUFFER_BYTES / (2 x nodes)); raise MKCCL_NET_BUFFER_BYTES",
                      op, comm->nNodes, a.aRows * a.K * es);
  }
  const int lws = comm->localRanks, lme = comm->localRank;
  if (comm->nNodes == 1 && (ws > kMaxLocalRanks || lws != ws))
    return setError(mkcclInternalError, "%s: %d ranks, %d of them local", op, ws, comm->localRanks);
  for (int q = 0; q < ws && comm->nNodes == 1; ++q)
    if (comm->rankLocal[q] != q)
      return setError(mkcclInternalError, "%s: rank %d is local rank %d in a one-node communicator", op, q,
                      comm->rankLocal[q]);

  ag::FusedCall c;
  memset(&c, 0, sizeof(c));
  ag::Layout& L = c.push.L;
  // Block scales: a scale area after the counters, rows of ceil(K / 128) floats (K: e4m3 bytes, 2 K here).
  const bool block = fp8 != nullptr && fp8->kind == mkcclFp8ScaleBlock;
  const int64_t scaleRowBytes = block ? (2 * static_cast<int64_t>(K) + 127) / 128 * 4 : 0;
  if (!ag::layoutFor(static_cast<int64_t>(M), static_cast<int64_t>(K), es, ws, me, &L, scaleRowBytes))
    return setError(mkcclInvalidUsage, "%s: M=%zu K=%zu on %d ranks: shards of more than 2^30 rows are not supported",
                    op, M, K, ws);
  c.push.lws = lws;
  c.push.lme = lme;
  c.push.net.nodes = 1;
  if (comm->nNodes > 1) MKCCL_CHECK(ag::netPlanFor(comm, L, op, &c.push.net, &c.orderNodeRanks));
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchAllGatherGemm, static_cast<size_t>(L.regionBytes()), &region));
  c.push.dev = ctx.dev;
  c.push.A = static_cast<const char*>(A);
  // gatheredA registered (mkcclCommRegister; coll.direct=off keeps the staged path): the peers
  // push their shards straight into it and the tiles read it; no copy out of the region. Every
  // rank must pass a gatheredA of the same registration (the kernel checks, push.cuh).
  Registration* reg = nullptr;
  if (gatheredA != nullptr && coll::tuningOf(ctx).direct != 2 && comm->nNodes == 1)
    MKCCL_CHECK(coll::findReg(ctx, gatheredA, M * K * es, &reg));
  char* const ownSlot = reg ? static_cast<char*>(gatheredA) + static_cast<int64_t>(me) * L.shardBytes() : nullptr;
  if (reg != nullptr) {
    c.push.direct = 1;
    c.push.regIndex = coll::regIndexOf(comm, reg);
    c.push.regOff = static_cast<uint64_t>(static_cast<char*>(gatheredA) - reg->base);
    for (int q = 0; q < ws; ++q) c.push.regBase[q] = reg->peer[q];
  }
  if (a.lda != K && reg != nullptr) {
    // In place, a strided A is packed straight into its rows of gatheredA (which it needs anyway).
    CUDA_CHECK(cudaMemcpy2DAsync(ownSlot, K * es, A, a.lda * es, K * es, size_t(L.m), cudaMemcpyDeviceToDevice,
                                 ctx.stream));
    c.push.A = ownSlot;
    A = ownSlot;
    c.packedA = 1;
  } else if (a.lda != K) {
    // A strided A: copied (one 2-D copy, a graph node like any other) into this rank's slot of its
    // own region, which nothing else writes and only this rank reads; the pushes and the own tiles'
    // loads then read the contiguous copy.
    char* slot = region->peer[lme] + static_cast<int64_t>(me) * L.shardBytes();
    CUDA_CHECK(cudaMemcpy2DAsync(slot, K * es, A, a.lda * es, K * es, size_t(L.m), cudaMemcpyDeviceToDevice,
                                 ctx.stream));
    c.push.A = slot;
    A = slot;
    c.packedA = 1;
  }
  for (int q = 0; q < lws; ++q) {  // by local rank (one node: rank)
    c.push.region[q] = region->peer[q];
    c.push.counters[q] = reinterpret_cast<uint64_t*>(region->peer[q] + L.countersOffset());
    c.push.flags[q] = reinterpret_cast<uint64_t*>(ctx.dev.peers[q]);
  }
  c.push.seqCtr = c.push.flags[lme] + kSeqSlot;
  c.push.gathered = static_cast<char*>(gatheredA);
  c.push.gatheredOwn = gatheredA != nullptr && static_cast<const char*>(A) != c.push.gathered + me * L.shardBytes();
  if (reg != nullptr) {
    // This rank's "region" is its gatheredA: the own shard goes there as to a region (ownToRegion)
    // unless A lies in it already.
    c.push.region[lme] = static_cast<char*>(gatheredA);
    c.directOwn = c.push.gatheredOwn;
    c.push.gatheredOwn = 0;
  }
  c.A = A;
  c.W = a.w[0].W;
  c.C = a.w[0].C;
  c.M = static_cast<int64_t>(M);
  c.N = static_cast<int64_t>(N);
  c.K = static_cast<int64_t>(K);
  c.type = t;
  c.dev = comm->cudaDev;
  c.smCount = opMaxCtas(comm);
  c.commCtas = commCtas;
  c.variant = tune.gemm.variant;
  c.timeoutNs = ctx.dev.timeoutNs;
  c.ceGroupBytes = over.ceGroupBytes;
  c.ceRing = over.ceRing;
  c.outType = a.outType;
  c.ldw = static_cast<int64_t>(a.w[0].ldw);
  c.ldc = static_cast<int64_t>(a.w[0].ldc);
  c.bias = a.w[0].bias;
  c.biasType = a.biasType;
  // Further weights read the gathered A from the user's gatheredA, else from our region (whole).
  c.fullRegion = a.numWeights > 1 && gatheredA == nullptr;
  if (fp8 != nullptr) {
    c.fp8 = 1;
    c.scaleA = fp8->scaleA;
    c.scaleW = fp8->scaleW;
    if (block) {
      c.blockScales = 1;
      c.push.aScales = fp8->scaleA;
      return planAndRun<ag::Fp8Block>(ctx, c, forced);
    }
    return planAndRun<dev::E4m3>(ctx, c, forced);  // one weight
  }
  if (t == mkcclBfloat16) MKCCL_CHECK(planAndRun<dev::Bf16>(ctx, c, forced));
  else MKCCL_CHECK(planAndRun<dev::F16>(ctx, c, forced));
  if (a.numWeights == 1) return mkcclSuccess;
  return moreWeights(ctx, a, gatheredA ? gatheredA : static_cast<const void*>(region->peer[lme]), K, tune.gemm.variant);
}

}  // namespace

mkcclResult_t allGatherGemmOp(OpCtx& ctx, const FusedArgs& a) { return runAgGemm(ctx, a, nullptr); }

// e4m3 rows are moved as bf16 rows of K / 2 elements (the gather and the GEMM's tensor maps copy
// bytes; kernels/ag_gemm/op_fp8.cuh). Arguments checked by mkcclAllGatherGemmFp8 (api_ag_fp8.cc).
mkcclResult_t allGatherGemmFp8Op(OpCtx& ctx, const void* A, const void* W, void* C, void* gatheredA, size_t M,
                                 size_t N, size_t K, mkcclFp8ScaleKind_t kind, const float* scaleA,
                                 const float* scaleW, mkcclDataType_t outType) {
  FusedArgs a;
  a.A = A;
  a.M = M;
  a.K = K / 2;
  a.lda = K / 2;
  a.aRows = M / static_cast<size_t>(ctx.comm->nranks);
  a.cRows = M;
  a.inType = mkcclBfloat16;
  a.outType = outType;
  a.biasType = outType;
  a.gatheredA = gatheredA;
  a.numWeights = 1;
  a.w[0] = mkcclFusedWeight_t{W, C, nullptr, N, K / 2, N};
  const Fp8Scales s{kind, scaleA, scaleW};
  return runAgGemm(ctx, a, &s);
}

}  // namespace mkccl
