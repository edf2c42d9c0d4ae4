// The collectives' in-place paths over registered buffers (mkcclCommRegister): the host side of
// kernels/coll/coll_direct.cuh. coll_ops.cc decides which calls come here (directWanted).
#include "ops/coll/coll_direct.h"
#include <string.h>
#include <algorithm>
#include "base/check.h"
#include "kernels/coll/coll_direct_copy.cuh"
#include "runtime/comm.h"

namespace mkccl {
namespace coll {

const void* directAllGatherKernelPtr() { return reinterpret_cast<const void*>(&directAllGatherKernel); }
const void* directAllToAllKernelPtr() { return reinterpret_cast<const void*>(&directAllToAllKernel); }

bool directWanted(const Tuning& tune, size_t block) { return directRule(tune.direct, tune.directMinBytes, tune.directMaxBytes, block); }

mkcclResult_t findReg(OpCtx& ctx, const void* p, size_t bytes, Registration** g) {
  *g = nullptr;
  if (ctx.comm->regs.empty() || ctx.comm->nNodes != 1) return mkcclSuccess;
  *g = regFind(ctx.comm, p, bytes);
  if (*g) MKCCL_CHECK(regNoteUse(*g, ctx.stream, ctx.capturing));
  return mkcclSuccess;
}

int regIndexOf(const mkcclComm* comm, const Registration* g) {
  const auto& regs = comm->regs;
  for (size_t i = 0; i < regs.size(); ++i)
    if (regs[i].get() == g) return (int)i;
  return -1;
}

namespace {

int regIndex(const OpCtx& ctx, const Registration* g) { return regIndexOf(ctx.comm, g); }

uint64_t offIn(const Registration* g, const void* p) {
  return (uint64_t)(static_cast<const char*>(p) - g->base);
}

void initDirect(const OpCtx& ctx, int kind, int site, DirectArgs* a) {
  memset(a, 0, sizeof(*a));
  a->dev = ctx.dev;
  a->kind = kind;
  a->site = site;
  for (int i = 0; i < ctx.comm->nranks && i < kMaxLocalRanks; ++i) a->localOfRank[i] = (int8_t)ctx.comm->rankLocal[i];
}

void setBases(const Registration* g, char** out, int n) {
  for (int q = 0; q < kMaxLocalRanks; ++q) out[q] = q < n ? g->peer[q] : nullptr;
}

// Enough CTAs to keep the loads and stores in flight (perCta bytes each), within the SM budget.
int gridFor(const OpCtx& ctx, size_t bytes, size_t perCta) {
  int grid = (int)std::min<size_t>((bytes + perCta - 1) / perCta, kDirectMaxCtas);
  return std::max(1, std::min(grid, opMaxCtas(ctx.comm)));
}

mkcclResult_t launch(const OpCtx& ctx, const void* fn, const DirectArgs& a, int grid) {
  MKCCL_TRACE("direct collective kind %d: %d CTAs, %llu bytes, seq %llu", a.kind, grid, (unsigned long long)a.bytes,
              (unsigned long long)a.dev.seq);
  void* params[] = {const_cast<DirectArgs*>(&a)};
  CUDA_CHECK(cudaLaunchKernel(fn, dim3(grid), dim3(kDirectThreads), params, 0, ctx.stream));
  return mkcclSuccess;
}

int rankOf(const OpCtx& ctx, int local) { return ctx.comm->localToRank[local]; }

}  // namespace

mkcclResult_t directAllGather(OpCtx& ctx, Registration* gRecv, const void* send, void* recv, size_t bytes) {
  const int n = ctx.dev.localRanks;
  DirectArgs a;
  initDirect(ctx, kDirectAllGather, kSiteAllGather, &a);
  const int ri = regIndex(ctx, gRecv);
  const uint64_t recvOff = offIn(gRecv, recv);
  for (int q = 0; q < n; ++q) {
    a.pubDst[q] = regWord(ri, recvOff + (uint64_t)rankOf(ctx, q) * bytes);  // q's block in my buffer
    a.pubLen[q] = bytes;
  }
  a.dstReg = ri + 1;
  setBases(gRecv, a.dstBase, n);
  a.send = static_cast<const char*>(send);
  a.bytes = bytes;
  return launch(ctx, directAllGatherKernelPtr(), a, gridFor(ctx, bytes, 64 << 10));
}

mkcclResult_t directReduceScatter(OpCtx& ctx, Registration* gSend, const void* send, void* recv, size_t recvBytes,
                                  mkcclDataType_t t, mkcclRedOp_t op) {
  const int n = ctx.dev.localRanks;
  const void* fn = directReduceKernelFloat(t, op);
  if (!fn) fn = directReduceKernelInt(t, op);
  if (!fn) return setError(mkcclInvalidArgument, "reduction %s on %s is not supported", redOpName(op), typeName(t));
  DirectArgs a;
  initDirect(ctx, kDirectReduce, kSiteReduceScatter, &a);
  const int si = regIndex(ctx, gSend);
  const uint64_t sendOff = offIn(gSend, send);
  for (int q = 0; q < n; ++q) {
    a.pubSrc[q] = regWord(si, sendOff + (uint64_t)rankOf(ctx, q) * recvBytes);  // q's block of my input
    a.pubLen[q] = recvBytes;
  }
  a.srcReg = si + 1;
  setBases(gSend, a.srcBase, n);
  a.recv = static_cast<char*>(recv);
  a.bytes = recvBytes;
  a.elemSize = (int)typeSize(t);
  a.avgDiv = op == mkcclAvg ? ctx.dev.nranks : 0;
  return launch(ctx, fn, a, gridFor(ctx, recvBytes, 64 << 10));
}

mkcclResult_t directAllReduce(OpCtx& ctx, Registration* gSend, Registration* gRecv, const void* send, void* recv,
                              size_t count, size_t blkElems, mkcclDataType_t t, mkcclRedOp_t op) {
  const int n = ctx.dev.localRanks;
  const void* fn = directReduceKernelFloat(t, op);
  if (!fn) fn = directReduceKernelInt(t, op);
  if (!fn) return setError(mkcclInvalidArgument, "reduction %s on %s is not supported", redOpName(op), typeName(t));
  const size_t ts = typeSize(t);
  auto start = [&](int r) { return std::min(count, (size_t)r * blkElems); };
  auto len = [&](int r) { return std::min(count, (size_t)(r + 1) * blkElems) - start(r); };
  DirectArgs a;
  initDirect(ctx, kDirectReduce, kSiteAllReduce, &a);
  const int si = regIndex(ctx, gSend), ri = regIndex(ctx, gRecv);
  const uint64_t sendOff = offIn(gSend, send), recvOff = offIn(gRecv, recv);
  for (int q = 0; q < n; ++q) {
    const int r = rankOf(ctx, q);
    a.pubSrc[q] = regWord(si, sendOff + start(r) * ts);  // q's slice of my input
    a.pubDst[q] = regWord(ri, recvOff + start(r) * ts);  // where q's result goes in my output
    a.pubLen[q] = len(r) * ts;
  }
  a.srcReg = si + 1;
  a.dstReg = ri + 1;
  setBases(gSend, a.srcBase, n);
  setBases(gRecv, a.dstBase, n);
  const int me = ctx.dev.rank;
  a.recv = static_cast<char*>(recv) + start(me) * ts;
  a.bytes = len(me) * ts;
  a.pushOut = 1;
  a.elemSize = (int)ts;
  a.avgDiv = op == mkcclAvg ? ctx.dev.nranks : 0;
  return launch(ctx, fn, a, gridFor(ctx, blkElems * ts, 64 << 10));
}

mkcclResult_t directAllToAll(OpCtx& ctx, Registration* gSend, const void* send, const size_t* sendBytes,
                             const size_t* sdisplBytes, void* recv, const size_t* recvBytes, const size_t* rdisplBytes) {
  const int n = ctx.dev.localRanks;
  DirectArgs a;
  initDirect(ctx, kDirectAllToAll, kSiteAllToAll, &a);
  const int si = regIndex(ctx, gSend);
  const uint64_t sendOff = offIn(gSend, send);
  size_t longest = 0;
  for (int q = 0; q < n; ++q) {
    const int r = rankOf(ctx, q);
    a.pubSrc[q] = regWord(si, sendOff + sdisplBytes[r]);  // my block for q
    a.pubLen[q] = sendBytes[r];
    a.inLen[q] = recvBytes[r];
    a.inOff[q] = rdisplBytes[r];
    longest = std::max(longest, recvBytes[r]);
  }
  a.srcReg = si + 1;
  setBases(gSend, a.srcBase, n);
  a.recv = static_cast<char*>(recv);
  // Every stream is spread over the whole grid: size it by the longest one.
  return launch(ctx, directAllToAllKernelPtr(), a, gridFor(ctx, longest, 64 << 10));
}

}  // namespace coll
}  // namespace mkccl
