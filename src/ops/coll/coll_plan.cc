// Host planning of the NVLink collectives (see coll_plan.h and src/kernels/coll/coll_kernel.cuh).
#include "ops/coll/coll_plan.h"
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include "ops/coll/coll_kernels.h"
#include "base/check.h"
#include "ops/tuner/op_state.h"
#include "runtime/comm.h"

namespace mkccl {
namespace coll {
namespace {

constexpr size_t kDefaultSlotBytes = 256 << 10;
constexpr int kDefaultSlots = 4;
// Flag values carry the step in 20 bits (signal.cuh flagValue); step t posts t + 1.
constexpr uint64_t kMaxSteps = (1ull << 20) - 2;

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

const Tuning& tuningOf(const OpCtx& ctx) { return ::mkccl::tuningOf(ctx.comm).coll; }

void initArgs(const OpCtx& ctx, Kind kind, const void* send, void* recv, Args* a) {
  memset(a, 0, sizeof(*a));
  a->dev = ctx.dev;
  a->kind = kind;
  a->send = static_cast<const char*>(send);
  a->recv = static_cast<char*>(recv);
  a->flagBase = kOpFlagSlot;
  for (int i = 0; i < ctx.comm->nranks && i < kMaxLocalRanks; ++i) a->localOfRank[i] = (int8_t)ctx.comm->rankLocal[i];
}

mkcclResult_t planLayout(const OpCtx& ctx, const Tuning& tune, size_t maxStream, Args* a, int* grid) {
  const int n = ctx.dev.localRanks, m = n - 1;
  const Kind kind = (Kind)a->kind;
  const int sets = kind == kAllReduceTwoShot ? 2 : 1;
  const int nroles = kind == kAllReduceTwoShot ? 3 : 2;
  a->roles = kRoleSend | kRoleRecv | (kind == kAllReduceTwoShot ? kRoleGather : 0);

  // Channels: enough that each carries a useful chunk; AllToAll's layout may not depend on the
  // sizes (they differ per rank), so it always uses the full count.
  int C;
  if (tune.channels > 0) C = tune.channels;
  // Channel counts from the 2026-11-22 sweeps on 4xH200 (perf/coll_sweep.sh): 16 -> 32 channels
  // took large ReduceScatter / AllReduce / AllToAll from 0.81-0.92x NCCL to 0.90-0.99x; 64 beat 32
  // for AllToAll at every size from 4 MiB (0.92-1.09x) and for reductions of >= 64 MiB streams.
  else if (kind == kAllToAll) C = 64;
  else if (kind == kAllReduceOneShot) C = (int)std::min<size_t>(32, std::max<size_t>(1, ceilDiv(maxStream, 16 << 10)));
  else if (kind != kAllGather && maxStream >= (64u << 20)) C = 64;
  else C = (int)std::min<size_t>(32, std::max<size_t>(1, ceilDiv(maxStream, 64 << 10)));
  size_t S = tune.slotBytes ? tune.slotBytes : kDefaultSlotBytes;
  int NB = tune.slots ? tune.slots : kDefaultSlots;

  // Fit the rings into their part of the data region (the LL area takes the end): shrink the
  // slots first, then the depth, then channels.
  const size_t data = llLayout(ctx.dev.dataBytes, n).base;
  auto ringBytes = [&] { return (size_t)sets * C * m * NB * S; };
  while (ringBytes() > data) {
    if (S > (16u << 10)) S = roundUp(S / 2, 16);
    else if (NB > 2) NB = NB > 4 ? 4 : 2;
    else if (S > kMinSlotBytes) S = roundUp(S / 2, 16);
    else if (C > 1) C = (C + 1) / 2;
    else
      return setError(mkcclInvalidUsage,
                      "collective: the workspace data region (%zu bytes) cannot hold %d ring(s) of 2 x %zu bytes "
                      "per peer; raise workspaceBytes",
                      data, sets, kMinSlotBytes);
  }
  // Flags: data + credit per (set, channel, peer).
  const size_t flagSlots = ctx.dev.flagsBytes / sizeof(uint64_t);
  while ((size_t)kOpFlagSlot + (size_t)2 * sets * C * m > flagSlots && C > 1) C = (C + 1) / 2;
  if ((size_t)kOpFlagSlot + (size_t)2 * sets * C * m > flagSlots)
    return setError(mkcclInternalError, "collective: %zu flag slots cannot hold the flags of %d peers", flagSlots, m);

  a->proto = kProtoSimple;
  a->channels = C;
  a->slots = NB;
  a->slotBytes = S;
  a->minChunk = kind == kAllToAll ? std::min<size_t>(S, 4 << 10) : 16;
  a->setBytes = (size_t)C * m * NB * S;
  a->rotate = kind == kAllToAll;

  // Steps are numbered in 20 bits of a flag value.
  if (maxStream > 0) {
    const size_t E = chunkBytes(maxStream, C, S, a->minChunk);
    const uint64_t steps = ceilDiv(ceilDiv(maxStream, E), C) + 1;
    if (steps > kMaxSteps)
      return setError(mkcclInvalidUsage,
                      "collective: %zu bytes per peer need %llu pipeline steps with a %zu-byte workspace (limit %llu); "
                      "raise workspaceBytes",
                      maxStream, (unsigned long long)steps, ctx.dev.dataBytes + ctx.dev.flagsBytes,
                      (unsigned long long)kMaxSteps);
  }

  // Work split (local): one CTA per role and channel when the CTA budget allows; else every CTA
  // runs all roles of its channels. One-shot AllReduce is always fused (in place needs a chunk
  // pushed before its reduction overwrites it).
  const int maxCtas = std::max(1, opMaxCtas(ctx.comm));
  if (kind != kAllReduceOneShot && nroles * C <= maxCtas) {
    a->split = 1;
    *grid = nroles * C;
  } else {
    a->split = 0;
    *grid = std::min(C, maxCtas);
  }
  return mkcclSuccess;
}

size_t llStreamLimit(const OpCtx& ctx, const Tuning& tune) {
  if (tune.proto == 2) return 0;
  const size_t cap = llLayout(ctx.dev.dataBytes, ctx.dev.localRanks).lines * 8;
  return tune.proto == 1 ? cap : std::min(cap, tune.llMaxBytes);
}

mkcclResult_t planLL(const OpCtx& ctx, const Tuning& tune, Args* a, int* grid) {
  const LLLayout l = llLayout(ctx.dev.dataBytes, ctx.dev.localRanks);
  size_t units = llUnits(a->redLen), longest = a->redLen;
  for (int q = 0; q < ctx.dev.localRanks; ++q) {
    longest = std::max({longest, a->outLen[q], a->inLen[q]});
    units = std::max({units, llUnits(a->outLen[q]), llUnits(a->inLen[q])});
  }
  if (longest > l.lines * 8)
    return setError(mkcclInternalError, "collective: a %zu-byte stream does not fit the LL area (%zu bytes per stream)",
                    longest, l.lines * 8);
  a->proto = kProtoLL;
  a->llFlag = llFlagOf(ctx.dev.seq);
  a->llBase = l.base;
  a->llLines = l.lines;
  // Enough CTAs that the stores in flight fill NVLink, and that a few-KiB stream is spread over
  // several SMs: one CTA per llCtaUnits units of the longest stream (the 2026-11-22 run had
  // ReduceScatter at 32-128 KiB 3-5% behind NCCL with 1024 units per CTA).
  const size_t want = ceilDiv(std::max<size_t>(units, 1), tune.llCtaUnits);
  *grid = (int)std::min<size_t>(want, (size_t)std::min(kLLMaxCtas, std::max(1, opMaxCtas(ctx.comm))));
  return mkcclSuccess;
}

mkcclResult_t launchColl(const OpCtx& ctx, const Args& a, int grid, mkcclDataType_t t, mkcclRedOp_t op) {
  const bool ll = a.proto == kProtoLL;
  const void* fn = nullptr;
  if (a.kind == kAllGather || a.kind == kAllToAll) {
    fn = ll ? llCopyKernel() : copyKernel();
  } else {
    fn = ll ? llReduceKernelFloat(t, op) : reduceKernelFloat(t, op);
    if (!fn) fn = ll ? llReduceKernelInt(t, op) : reduceKernelInt(t, op);
    if (!fn)
      return setError(mkcclInvalidArgument, "reduction %s on %s is not supported", redOpName(op), typeName(t));
  }
  if (ll)
    MKCCL_TRACE("collective kind %d: LL, %d CTAs, seq %llu", a.kind, grid, (unsigned long long)a.dev.seq);
  else
    MKCCL_TRACE("collective kind %d: %d CTAs (%s), %d channels, %d x %zu-byte slots, seq %llu", a.kind, grid,
                a.split ? "split" : "fused", a.channels, a.slots, a.slotBytes, (unsigned long long)a.dev.seq);
  void* params[] = {const_cast<Args*>(&a)};
  CUDA_CHECK(cudaLaunchKernel(fn, dim3(grid), dim3(ll ? kLLThreads : kThreads), params, 0, ctx.stream));
  return mkcclSuccess;
}

mkcclResult_t requireSingleNode(const OpCtx& ctx, const char* opName) {
  if (ctx.comm->nNodes > 1)
    return setError(mkcclInvalidUsage, "%s: inter-node collectives are not implemented yet (communicator spans %d nodes)",
                    opName, ctx.comm->nNodes);
  return mkcclSuccess;
}

}  // namespace coll
}  // namespace mkccl
