// mkccl::allGatherGemmOp (mkcclAllGatherGemm): C[M, N] = AllGather(A) . W^T in one node.
// Arguments are checked by the API (api_fused.cc). Here: the plan (the fused kernel with comm CTAs
// or with side teams, or our AllGather then the GEMM engine: a rule on the shape, ag_gemm_rule.h),
// the symmetric region that holds the gathered A, and the launches.
// docs/AG_GEMM.md describes the design, the plans and their overrides.
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include "kernels/device/wgmma.cuh"
#include "kernels/fused/ag_gemm_host.cuh"
#include "kernels/fused/ag_gemm_layout.cuh"
#include "kernels/fused/ag_gemm_model.cuh"
#include "kernels/fused/ag_gemm_rule.h"
#include "runtime/check.h"
#include "runtime/cudriver.h"
#include "runtime/env.h"
#include "runtime/log.h"
#include "runtime/ops.h"
#include "transport/nvlink/symmem.h"

namespace mkccl {
namespace {

const char* kOp = "mkcclAllGatherGemm";

enum class Plan { Auto, Fused, Sequential, Ce };

const char* planName(Plan p) {
  switch (p) {
    case Plan::Fused: return "fused";
    case Plan::Sequential: return "sequential";
    case Plan::Ce: return "ce (fused, copy engines push)";
    default: return "auto";
  }
}

// MKCCL_AG_GEMM_PLAN=auto|fused|fused:<n>|ce|sequential (read on every call, like
// MKCCL_GEMM_VARIANT). fused:<n> also sets the fused kernel's comm CTAs (0: the side teams),
// overriding MKCCL_COMM_CTAS; ce: the fused kernel on every SM, the copy engines push
// (ag_gemm_ce.cu).
mkcclResult_t planFromEnv(Plan* out, int* commCtas) {
  const char* s = getenv("MKCCL_AG_GEMM_PLAN");
  *out = Plan::Auto;
  if (s == nullptr || *s == '\0' || strcmp(s, "auto") == 0) return mkcclSuccess;
  if (strcmp(s, "fused") == 0) {
    *out = Plan::Fused;
  } else if (strcmp(s, "sequential") == 0) {
    *out = Plan::Sequential;
  } else if (strcmp(s, "ce") == 0) {
    *out = Plan::Ce;
  } else if (strncmp(s, "fused:", 6) == 0) {
    char* end = nullptr;
    const long n = strtol(s + 6, &end, 10);
    if (end == s + 6 || *end != '\0' || n < 0 || n > 1024)
      return setError(mkcclInvalidUsage, "MKCCL_AG_GEMM_PLAN=%s: expected fused:<comm CTAs 0..1024>", s);
    *out = Plan::Fused;
    *commCtas = static_cast<int>(n);
  } else {
    return setError(mkcclInvalidUsage, "MKCCL_AG_GEMM_PLAN=%s: expected auto, fused, fused:<n>, ce or sequential", s);
  }
  return mkcclSuccess;
}

// MKCCL_AG_GEMM_PUSH=threads|bulk (read on every call; unset: threads): how dedicated comm CTAs and
// the sequential plan's AllGather move the bytes (ag_gemm_push.cuh). Side teams always use threads.
// The bulk-copy push was 2-4x slower on 4xH200 (2026-11-22: 8192^3 fused 2958 us against 1413 with
// threads), so it is opt-in until it is understood.
mkcclResult_t pushFromEnv(int* bulk) { return envChoice("MKCCL_AG_GEMM_PUSH", {"threads", "bulk"}, 0, bulk); }

// MKCCL_AG_GEMM_CE_GROUP_KIB: the ce plan's bytes per copy (rounded to whole chunks). Unset (0):
// ceCopies picks (ag_gemm_ce.cu). Not envNumber: its K/M/G suffixes on a value already in KiB
// would read as KiB x 2^20 and the like, so a plain number only.
mkcclResult_t ceGroupFromEnv(int64_t* bytes) {
  *bytes = 0;
  const char* s = getenv("MKCCL_AG_GEMM_CE_GROUP_KIB");
  if (s == nullptr || *s == '\0') return mkcclSuccess;
  char* end = nullptr;
  const long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > (int64_t{1} << 30))
    return setError(mkcclInvalidUsage, "MKCCL_AG_GEMM_CE_GROUP_KIB=%s: expected a size in KiB, 1 .. 2^30", s);
  *bytes = static_cast<int64_t>(v) << 10;
  return mkcclSuccess;
}

// MKCCL_AG_GEMM_CE=direct|ring (read on every call; unset: direct): how the ce plan's copy engines
// move the shards (ag_gemm_ce.cu). The same on every rank.
mkcclResult_t ceRingFromEnv(int* ring) { return envChoice("MKCCL_AG_GEMM_CE", {"direct", "ring"}, 0, ring); }

// What the op remembers per communicator and shape: the plans (planning walks the schedule, not
// something to redo on every call) and the auto plan's rule.
struct ShapeState {
  const mkcclComm* comm = nullptr;
  int dev = -1, ws = 0, me = 0, type = 0, commCtas = 0, variant = 0, smCount = 0, bulk = 0;
  int64_t M = 0, N = 0, K = 0;
  bool gathered = false;
  ag::FusedPlan fp;      // the fused kernel as the model configures it (MKCCL_AG_GEMM_PLAN=fused)
  ag::FusedPlan fpAuto;  // the fused kernel the auto plan runs (side teams where the rule says so)
  ag::FusedPlan fpCe;    // the ce plan's kernel: every SM computes, no comm CTA, no side team
  ag::RuleChoice rule;
  double sequentialUs = 0;
  uint64_t lastUse = 0;
  int logged = 0;  // bits: auto, forced fused, forced sequential
};

// Per communicator, not per process: the ranks of one process (mkcclCommInitAll, a thread each)
// plan and launch at once, and a driver call made under a process-wide lock (a lazily loaded kernel
// waits for its device to go idle) would make one rank's launch wait for another rank's kernel.
struct CommShapes {
  std::mutex mu;
  std::vector<ShapeState> shapes;
  uint64_t use = 0;
};
std::mutex gCommsMu;
// Keyed by the comm and its bootstrap token (a later comm may reuse a freed comm's address).
// Never freed: used up to exit; an entry is a few shapes.
auto* gComms = new std::map<std::pair<const mkcclComm*, uint64_t>, std::unique_ptr<CommShapes>>();
constexpr size_t kMaxShapes = 32;

CommShapes& commShapes(const mkcclComm* comm) {
  std::lock_guard<std::mutex> lock(gCommsMu);
  std::unique_ptr<CommShapes>& p = (*gComms)[{comm, comm->bootstrap->token()}];
  if (!p) p.reset(new CommShapes());
  return *p;
}

// The state of a call's shape (created and planned on first use), least recently used evicted.
template <class In>
mkcclResult_t shapeState(const OpCtx& ctx, const ag::FusedCall& c, CommShapes& cs, ShapeState** out) {
  std::vector<ShapeState>& v = cs.shapes;
  const bool gathered = c.push.gathered != nullptr;
  for (ShapeState& st : v)
    if (st.comm == ctx.comm && st.dev == c.dev && st.ws == c.push.L.ws && st.me == c.push.L.me &&
        st.type == static_cast<int>(c.type) && st.M == c.M &&
        st.N == c.N && st.K == c.K && st.gathered == gathered && st.commCtas == c.commCtas &&
        st.variant == static_cast<int>(c.variant) && st.smCount == c.smCount && st.bulk == c.push.bulk) {
      st.lastUse = ++cs.use;
      *out = &st;
      return mkcclSuccess;
    }
  ShapeState st;
  st.comm = ctx.comm;
  st.dev = c.dev;
  st.ws = c.push.L.ws;
  st.me = c.push.L.me;
  st.type = static_cast<int>(c.type);
  st.M = c.M;
  st.N = c.N;
  st.K = c.K;
  st.gathered = gathered;
  st.commCtas = c.commCtas;
  st.variant = static_cast<int>(c.variant);
  st.smCount = c.smCount;
  st.bulk = c.push.bulk;
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
  st.lastUse = ++cs.use;
  if (v.size() >= kMaxShapes) {
    auto lru = std::min_element(v.begin(), v.end(),
                                [](const ShapeState& a, const ShapeState& b) { return a.lastUse < b.lastUse; });
    *lru = st;
    *out = &*lru;
  } else {
    v.push_back(st);
    *out = &v.back();
  }
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
  const char* push = st.bulk ? "bulk" : "threads";
  if (plan == Plan::Sequential)
    snprintf(comm, sizeof(comm), "AllGather first (%d CTAs, %s push)", ag::kGatherCtas, push);
  else if (plan == Plan::Ce)
    snprintf(comm, sizeof(comm), "the copy engines push (%d streams)", ctx.comm->nranks - 1);
  else
    snprintf(comm, sizeof(comm), "%d comm CTAs%s (%s push)%s", fp.commCtas,
             fp.commFromBudget ? " taken from the GEMM" : "", push,
             fp.sideTeams ? " + the producer warpgroups' idle warps (threads)" : "");
  char why[240];
  if (forced)
    snprintf(why, sizeof(why), "MKCCL_AG_GEMM_PLAN");
  else
    snprintf(why, sizeof(why), "rule: %s; %.1f waves, push/GEMM %.2f", st.rule.why, st.rule.waves, st.rule.pushShare);
  MKCCL_INFO("%s %lldx%lldx%lld on %d ranks (rank %d): %s (%s; model: fused %.0f us = GEMM %.0f us, push %.0f us; "
             "sequential %.0f us); tile 128x%d, cluster %d, %d compute CTAs, %s",
             kOp, static_cast<long long>(c.M), static_cast<long long>(c.N), static_cast<long long>(c.K),
             ctx.comm->nranks, ctx.comm->rank, forced ? planName(plan) : ag::autoPlanName(st.rule.plan), why,
             fp.est.fusedUs, fp.est.gemmUs, fp.est.commUs, st.sequentialUs, g.bn, g.clusterSize, g.ctas, comm);
}

template <class In>
mkcclResult_t launchPlan(OpCtx& ctx, ag::FusedCall& c, const ag::FusedPlan& fp, Plan plan) {
  const ag::Layout& L = c.push.L;
  if (plan == Plan::Ce) {
    CopyEngines* ce = nullptr;
    c.push.ownToRegion = L.m % ag::kTileRows != 0;
    // One stream per receiver (ring: per forwarded shard), and one for our shard into our region.
    MKCCL_CHECK(copyEnginesGet(ctx.comm, L.ws - 1 + (c.push.ownToRegion ? 1 : 0), &ce));
    c.push.ce = 1;
    c.push.ceGo = reinterpret_cast<uint64_t*>(ctx.dev.peers[L.me]) + kCopyEngineSlot;
    CUDA_CHECK(cudaEventRecord(ce->fork, ctx.stream));
    MKCCL_CHECK(ag::fusedLaunch<In>(c, fp, ctx.stream));
    return ag::ceCopies(*ce, c, ctx.dev.seq, c.ceGroupBytes, c.ceRing != 0, ctx.stream);
  }
  if (plan == Plan::Sequential) {
    c.push.ownToRegion = 1;  // the GEMM reads every row from the region
    MKCCL_CHECK(ag::gatherLaunch(c.push, c.dev, std::min(c.smCount, ag::kGatherCtas), ctx.stream));
    return gemmOp(c.push.region[L.me], c.W, c.C, c.M, c.N, c.K, c.type, c.type, ctx.stream);
  }
  // Tiles wholly inside the own shard load it from the user's A; a tile that straddles a shard
  // boundary (m not a multiple of 128) reads the own rows from the region.
  c.push.ownToRegion = L.m % ag::kTileRows != 0;
  return ag::fusedLaunch<In>(c, fp, ctx.stream);
}

// The plan of this call (forced, or the rule's), then its launches. Under the communicator's
// shapes lock throughout: launches only enqueue, and no state outlives it.
template <class In>
mkcclResult_t planAndRun(OpCtx& ctx, ag::FusedCall& c, Plan forced) {
  CommShapes& cs = commShapes(ctx.comm);
  std::lock_guard<std::mutex> lock(cs.mu);
  ShapeState* st = nullptr;
  MKCCL_CHECK(shapeState<In>(ctx, c, cs, &st));
  Plan plan = forced;
  if (forced == Plan::Auto)
    plan = st->rule.plan == ag::AutoPlan::Sequential    ? Plan::Sequential
           : st->rule.plan == ag::AutoPlan::CopyEngines ? Plan::Ce
                                                        : Plan::Fused;
  if (plan == Plan::Ce && !copyEnginesUsable()) {
    MKCCL_WARN("%s: the ce plan needs the driver's stream memory operations (cuStreamWaitValue64, "
               "cuStreamBatchMemOp), not found: fused",
               kOp);
    plan = Plan::Fused;
  }
  logChoice(ctx, c, *st, plan, forced != Plan::Auto);
  const ag::FusedPlan& fp = plan == Plan::Ce ? st->fpCe : forced == Plan::Auto ? st->fpAuto : st->fp;
  return launchPlan<In>(ctx, c, fp, plan);
}

}  // namespace

mkcclResult_t allGatherGemmOp(OpCtx& ctx, const void* A, const void* W, void* C, void* gatheredA, size_t M, size_t N,
                              size_t K, mkcclDataType_t t) {
  mkcclComm* comm = ctx.comm;
  if (comm->nNodes > 1)
    return setError(mkcclInvalidUsage,
                    "%s: not implemented across nodes yet (this communicator spans %d nodes); it fuses over NVLink "
                    "inside one node",
                    kOp, comm->nNodes);
  ARG_CHECK(t == mkcclBfloat16 || t == mkcclFloat16, "%s: datatype must be mkcclBfloat16 or mkcclFloat16", kOp);
  const size_t es = 2;
  Plan forced;
  int commCtas = comm->cfg.commCtas;
  MKCCL_CHECK(planFromEnv(&forced, &commCtas));
  GemmVariant variant;
  MKCCL_CHECK(gemmVariantFromEnv(&variant));
  int bulk = 0;
  MKCCL_CHECK(pushFromEnv(&bulk));
  int64_t ceGroup = 0;
  MKCCL_CHECK(ceGroupFromEnv(&ceGroup));
  int ceRing = 0;
  MKCCL_CHECK(ceRingFromEnv(&ceRing));
  const int ws = comm->nranks, me = comm->rank;

  if (ws == 1) {  // nothing to gather: the GEMM engine, and a copy if the caller wants the "gathered" A
    MKCCL_CHECK(gemmOp(A, W, C, M, N, K, t, t, ctx.stream));
    if (gatheredA != nullptr && gatheredA != A)
      CUDA_CHECK(cudaMemcpyAsync(gatheredA, A, M * K * es, cudaMemcpyDeviceToDevice, ctx.stream));
    return mkcclSuccess;
  }

  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  GemmDeviceInfo info;
  MKCCL_CHECK(gemmDeviceInfo(comm->cudaDev, &info));
  if (info.ccMajor != 9)
    return setError(mkcclInvalidUsage, "%s: needs a Hopper (sm_90) GPU; device %d is sm_%d%d", kOp, comm->cudaDev,
                    info.ccMajor, info.ccMinor);
  if (ws > kMaxLocalRanks || comm->localRanks != ws)
    return setError(mkcclInternalError, "%s: %d ranks, %d of them local", kOp, ws, comm->localRanks);
  for (int q = 0; q < ws; ++q)
    if (comm->rankLocal[q] != q)
      return setError(mkcclInternalError, "%s: rank %d is local rank %d in a one-node communicator", kOp, q,
                      comm->rankLocal[q]);

  ag::FusedCall c;
  memset(&c, 0, sizeof(c));
  ag::Layout& L = c.push.L;
  if (!ag::layoutFor(static_cast<int64_t>(M), static_cast<int64_t>(K), es, ws, me, &L))
    return setError(mkcclInvalidUsage, "%s: M=%zu K=%zu on %d ranks: shards of more than 2^30 rows are not supported",
                    kOp, M, K, ws);
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchAllGatherGemm, static_cast<size_t>(L.regionBytes()), &region));
  c.push.dev = ctx.dev;
  c.push.A = static_cast<const char*>(A);
  for (int q = 0; q < ws; ++q) {
    c.push.region[q] = region->peer[q];
    c.push.counters[q] = reinterpret_cast<uint64_t*>(region->peer[q] + L.countersOffset());
    c.push.flags[q] = reinterpret_cast<uint64_t*>(ctx.dev.peers[q]);
  }
  c.push.bulk = bulk;
  c.push.gathered = static_cast<char*>(gatheredA);
  c.push.gatheredOwn = gatheredA != nullptr && static_cast<const char*>(A) != c.push.gathered + me * L.shardBytes();
  c.A = A;
  c.W = W;
  c.C = C;
  c.M = static_cast<int64_t>(M);
  c.N = static_cast<int64_t>(N);
  c.K = static_cast<int64_t>(K);
  c.type = t;
  c.dev = comm->cudaDev;
  c.smCount = opMaxCtas(comm);
  c.commCtas = commCtas;
  c.variant = variant;
  c.timeoutNs = ctx.dev.timeoutNs;
  c.ceGroupBytes = ceGroup;
  c.ceRing = ceRing;
  if (t == mkcclBfloat16) return planAndRun<dev::Bf16>(ctx, c, forced);
  return planAndRun<dev::F16>(ctx, c, forced);
}

}  // namespace mkccl
