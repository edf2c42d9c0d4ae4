// mkccl::allGatherGemmOp (mkcclAllGatherGemm): C[M, N] = AllGather(A) . W^T in one node.
// Arguments are checked by the API (api_fused.cc). Here: the plan (fused kernel, or our AllGather
// then the GEMM engine), the symmetric region that holds the gathered A, and the launches.
// docs/AG_GEMM.md describes the design, the plans and their overrides.
#include <stdlib.h>
#include <string.h>
#include <mutex>
#include <string>
#include "kernels/device/wgmma.cuh"
#include "kernels/fused/ag_gemm_host.cuh"
#include "kernels/fused/ag_gemm_layout.cuh"
#include "kernels/fused/ag_gemm_model.cuh"
#include "runtime/check.h"
#include "runtime/cudriver.h"
#include "runtime/log.h"
#include "runtime/ops.h"
#include "transport/nvlink/symmem.h"

namespace mkccl {
namespace {

const char* kOp = "mkcclAllGatherGemm";

enum class Plan { Auto, Fused, Sequential };

const char* planName(Plan p) { return p == Plan::Fused ? "fused" : p == Plan::Sequential ? "sequential" : "auto"; }

// MKCCL_AG_GEMM_PLAN=auto|fused|sequential (read on every call, like MKCCL_GEMM_VARIANT).
mkcclResult_t planFromEnv(Plan* out) {
  const char* s = getenv("MKCCL_AG_GEMM_PLAN");
  *out = Plan::Auto;
  if (s == nullptr || *s == '\0' || strcmp(s, "auto") == 0) return mkcclSuccess;
  if (strcmp(s, "fused") == 0) *out = Plan::Fused;
  else if (strcmp(s, "sequential") == 0) *out = Plan::Sequential;
  else return setError(mkcclInvalidUsage, "MKCCL_AG_GEMM_PLAN=%s: expected auto, fused or sequential", s);
  return mkcclSuccess;
}

// Says which plan a shape got, once per change (INFO), not on every call of a training loop.
void logChoice(int rank, size_t M, size_t N, size_t K, int ws, Plan plan, bool forced, const ag::Estimate& e,
               const ag::FusedPlan& fp) {
  if (logLevel() < LogLevel::Info) return;
  static std::mutex mu;
  static std::string last[kMaxLocalRanks];
  char key[160];
  snprintf(key, sizeof(key), "%zu %zu %zu %d %d %d", M, N, K, ws, static_cast<int>(plan), fp.commCtas);
  {
    std::lock_guard<std::mutex> lock(mu);
    std::string& l = last[rank % kMaxLocalRanks];
    if (l == key) return;
    l = key;
  }
  const GemmPlan& g = plan == Plan::Fused ? fp.gemm : fp.full;
  char comm[96];
  if (plan == Plan::Sequential)
    snprintf(comm, sizeof(comm), "AllGather first (%d CTAs)", ag::kGatherCtas);
  else
    snprintf(comm, sizeof(comm), "%d comm CTAs%s%s", fp.commCtas, fp.commFromBudget ? " (MKCCL_COMM_CTAS)" : "",
             fp.sideTeams ? " + the producer warpgroups' idle warps" : "");
  MKCCL_INFO("%s %zux%zux%zu on %d ranks: %s plan%s (model: fused %.0f us = max(GEMM %.0f, push %.0f + a tile), "
             "sequential %.0f us)%s; tile 128x%d, cluster %d, %d compute CTAs, %s",
             kOp, M, N, K, ws, planName(plan), forced ? " (MKCCL_AG_GEMM_PLAN)" : "", e.fusedUs, e.gemmUs, e.commUs,
             e.sequentialUs,
             !forced && plan == Plan::Sequential ? ": fusion cannot pay at this shape, AllGather then GEMM is faster"
                                                 : "",
             g.bn, g.clusterSize, g.ctas, comm);
}

template <class In>
mkcclResult_t planAndRun(OpCtx& ctx, ag::FusedCall& c, Plan forced, const ag::Layout& L) {
  ag::FusedPlan fp;
  MKCCL_CHECK(ag::fusedPlan<In>(c, &fp));
  const ag::Estimate e = ag::estimate(fp.gemm, fp.full, c.M, c.N, c.K, L.ws, fp.commCtas, fp.sideTeams != 0);
  const Plan plan = forced != Plan::Auto ? forced : e.fusedUs <= e.sequentialUs ? Plan::Fused : Plan::Sequential;
  logChoice(ctx.comm->rank, c.M, c.N, c.K, L.ws, plan, forced != Plan::Auto, e, fp);
  if (plan == Plan::Sequential) {
    c.push.ownToRegion = 1;  // the GEMM reads every row from the region
    MKCCL_CHECK(ag::gatherLaunch(c.push, std::min(c.smCount, ag::kGatherCtas), ctx.stream));
    return gemmOp(c.push.region[L.me], c.W, c.C, c.M, c.N, c.K, c.type, c.type, ctx.stream);
  }
  // Tiles wholly inside the own shard load it from the user's A; a tile that straddles a shard
  // boundary (m not a multiple of 128) reads the own rows from the region.
  c.push.ownToRegion = L.m % ag::kTileRows != 0;
  return ag::fusedLaunch<In>(c, fp, ctx.stream);
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
  MKCCL_CHECK(planFromEnv(&forced));
  GemmVariant variant;
  MKCCL_CHECK(gemmVariantFromEnv(&variant));
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
  c.commCtas = comm->cfg.commCtas;
  c.variant = variant;
  c.timeoutNs = ctx.dev.timeoutNs;
  if (t == mkcclBfloat16) return planAndRun<dev::Bf16>(ctx, c, forced, L);
  return planAndRun<dev::F16>(ctx, c, forced, L);
}

}  // namespace mkccl
