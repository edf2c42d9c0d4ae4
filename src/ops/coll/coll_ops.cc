// The NVLink collectives: AllGather, ReduceScatter, AllReduce, AllToAll(v) (ops.h). Arguments are
// checked by the API (api_coll.cc); here each call becomes streams of bytes between local ranks
// (coll_args.h) for a collective kernel: LL (src/kernels/coll/coll_ll.cuh) for the streams up to
// llStreamLimit, simple (coll_kernel.cuh) for longer ones. Senders and receivers choose alike:
// the choice depends only on a stream's length and settings every rank shares.
#include <algorithm>
#include <vector>
#include "base/check.h"
#include "ops/coll/coll_direct.h"
#include "ops/coll/coll_net.h"
#include "ops/coll/coll_plan.h"
#include "runtime/comm.h"
#include "runtime/ops.h"

namespace mkccl {

namespace {
// The inter-node path's host proxy and FIFO commands carry the host's sequence number: such a call
// cannot be replayed from a graph, so it is not captured (docs/GRAPHS.md).
mkcclResult_t netCaptureCheck(const OpCtx& ctx) {
  if (!ctx.capturing) return mkcclSuccess;
  return setError(mkcclInvalidUsage,
                  "collectives across nodes (this communicator spans %d nodes) cannot be captured into a CUDA "
                  "graph yet; call them eagerly (docs/GRAPHS.md)",
                  ctx.comm->nNodes);
}
}  // namespace

using namespace coll;

namespace {

mkcclResult_t localCopy(OpCtx& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
  return mkcclSuccess;
}

int rankOf(const OpCtx& ctx, int local) { return ctx.comm->localToRank[local]; }

// Plans a for the protocol chosen (ll: every stream of a fits llStreamLimit) and launches it.
mkcclResult_t planAndLaunch(OpCtx& ctx, const Tuning& tune, bool ll, size_t maxStream, Args* a, mkcclDataType_t t,
                            mkcclRedOp_t op) {
  int grid = 0;
  if (ll) MKCCL_CHECK(planLL(ctx, tune, a, &grid));
  else MKCCL_CHECK(planLayout(ctx, tune, maxStream, a, &grid));
  return launchColl(ctx, *a, grid, t, op);
}

// One-shot AllReduce below this many bytes (auto), by protocol: LL's one-shot sends (n-1) copies
// of the whole buffer at half efficiency, worth one NVLink hop less only for small calls.
constexpr size_t kOneShotLLBytes = 64 << 10;
constexpr size_t kOneShotSimpleBytes = 256 << 10;

}  // namespace

mkcclResult_t allGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t) {
  if (ctx.comm->nNodes > 1) {
    MKCCL_CHECK(netCaptureCheck(ctx));
    return netAllGatherOp(ctx, send, recv, sendcount, t);
  }
  const size_t B = sendcount * typeSize(t);
  const int n = ctx.dev.localRanks, me = ctx.dev.localRank;
  char* mine = static_cast<char*>(recv) + (size_t)ctx.dev.rank * B;
  if (n == 1) return localCopy(ctx, mine, send, B);
  const Tuning& tune = tuningOf(ctx);
  Registration* g = nullptr;  // a registered receive buffer: stored into in place
  MKCCL_CHECK(findReg(ctx, recv, B * (size_t)ctx.dev.nranks, &g));
  if (g && directWanted(tune, B)) return directAllGather(ctx, g, send, recv, B);
  Args a;
  initArgs(ctx, kAllGather, send, recv, &a);
  for (int q = 0; q < n; ++q) {
    a.outLen[q] = B;
    a.inLen[q] = B;
    a.inOff[q] = (size_t)rankOf(ctx, q) * B;
  }
  if (send == mine) a.outLen[me] = 0;  // in place: nothing to copy locally
  return planAndLaunch(ctx, tune, B <= llStreamLimit(ctx, tune), B, &a, t, mkcclSum);
}

mkcclResult_t reduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                              mkcclRedOp_t op) {
  if (ctx.comm->nNodes > 1) {
    MKCCL_CHECK(netCaptureCheck(ctx));
    return netReduceScatterOp(ctx, send, recv, recvcount, t, op);
  }
  const size_t R = recvcount * typeSize(t);
  const int n = ctx.dev.localRanks, me = ctx.dev.localRank;
  if (n == 1) return localCopy(ctx, recv, send, R);
  const Tuning& tune = tuningOf(ctx);
  Registration* g = nullptr;  // a registered send buffer: every rank pulls its block from the peers'
  MKCCL_CHECK(findReg(ctx, send, R * (size_t)ctx.dev.nranks, &g));
  if (g && directWanted(tune, R)) return directReduceScatter(ctx, g, send, recv, R, t, op);
  Args a;
  initArgs(ctx, kReduceScatter, send, recv, &a);
  for (int p = 0; p < n; ++p) {
    a.outLen[p] = p == me ? 0 : R;
    a.outOff[p] = (size_t)rankOf(ctx, p) * R;
  }
  a.redLen = R;
  a.redInOff = (size_t)ctx.dev.rank * R;
  a.redOutOff = 0;
  a.avgDiv = op == mkcclAvg ? n : 0;
  return planAndLaunch(ctx, tune, R <= llStreamLimit(ctx, tune), R, &a, t, op);
}

mkcclResult_t allReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                          mkcclRedOp_t op) {
  if (ctx.comm->nNodes > 1) {
    MKCCL_CHECK(netCaptureCheck(ctx));
    return netAllReduceOp(ctx, send, recv, count, t, op);
  }
  const size_t ts = typeSize(t), bytes = count * ts;
  const int n = ctx.dev.localRanks, me = ctx.dev.localRank;
  if (n == 1) return localCopy(ctx, recv, send, bytes);
  const Tuning& tune = tuningOf(ctx);
  // Two-shot blocks: rank r reduces block r; blocks start on 16-byte boundaries so that every
  // block is vector aligned.
  const size_t per = 16 / ts;
  const size_t blkElems = ((count + n - 1) / n + per - 1) / per * per;
  // Registered receive buffer (and send buffer, or in place): pulled, reduced and pushed in place.
  // A registered receive buffer with an unregistered send buffer: the input is copied into the
  // receive buffer first (a local copy) and reduced in place there.
  Registration *gs = nullptr, *gr = nullptr;
  MKCCL_CHECK(findReg(ctx, send, bytes, &gs));
  MKCCL_CHECK(findReg(ctx, recv, bytes, &gr));
  if (gr && directWanted(tune, blkElems * ts)) {
    if (!gs) {
      MKCCL_CHECK(localCopy(ctx, recv, send, bytes));
      send = recv;
      gs = gr;
    }
    return directAllReduce(ctx, gs, gr, send, recv, count, blkElems, t, op);
  }
  const size_t llMax = llStreamLimit(ctx, tune);
  bool oneShot, ll;
  if (tune.algo == 1) {
    oneShot = true, ll = bytes <= llMax;
  } else if (tune.algo == 2) {
    oneShot = false, ll = blkElems * ts <= llMax;
  } else if (bytes <= llMax && bytes <= (tune.oneShotMaxBytes != Tuning::kUnset ? tune.oneShotMaxBytes : kOneShotLLBytes)) {
    oneShot = true, ll = true;
  } else if (blkElems * ts <= llMax) {
    oneShot = false, ll = true;
  } else {
    ll = false;
    oneShot = bytes <= (tune.oneShotMaxBytes != Tuning::kUnset ? tune.oneShotMaxBytes : kOneShotSimpleBytes);
  }
  Args a;
  initArgs(ctx, oneShot ? kAllReduceOneShot : kAllReduceTwoShot, send, recv, &a);
  a.avgDiv = op == mkcclAvg ? n : 0;
  size_t maxStream;
  if (oneShot) {
    for (int p = 0; p < n; ++p) a.outLen[p] = p == me ? 0 : bytes;
    a.redLen = bytes;
    maxStream = bytes;
  } else {
    auto start = [&](int r) { return std::min(count, (size_t)r * blkElems); };
    auto len = [&](int r) { return std::min(count, (size_t)(r + 1) * blkElems) - start(r); };
    for (int q = 0; q < n; ++q) {
      const int r = rankOf(ctx, q);
      a.outOff[q] = a.inOff[q] = start(r) * ts;
      a.outLen[q] = q == me ? 0 : len(r) * ts;
      a.inLen[q] = q == me ? 0 : len(r) * ts;
    }
    a.redLen = len(ctx.dev.rank) * ts;
    a.redInOff = a.redOutOff = start(ctx.dev.rank) * ts;
    maxStream = blkElems * ts;
  }
  return planAndLaunch(ctx, tune, ll, maxStream, &a, t, op);
}

mkcclResult_t allToAllvOp(OpCtx& ctx, const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                          const size_t* recvcounts, const size_t* rdispls, mkcclDataType_t t, bool uniform) {
  MKCCL_CHECK(requireSingleNode(ctx, "mkcclAllToAllv"));
  const size_t ts = typeSize(t);
  const int n = ctx.dev.localRanks, r = ctx.dev.rank;
  ARG_CHECK(sendcounts[r] == recvcounts[r],
            "mkcclAllToAllv: rank %d sends %zu elements to itself but expects to receive %zu", r, sendcounts[r],
            recvcounts[r]);
  if (n == 1)
    return localCopy(ctx, static_cast<char*>(recv) + rdispls[r] * ts, static_cast<const char*>(send) + sdispls[r] * ts,
                     sendcounts[r] * ts);
  const Tuning& tune = tuningOf(ctx);
  {
    // A registered send buffer: every rank pulls its blocks from the peers' send buffers. AllToAll
    // by the size rule; AllToAllv whenever registered (directWanted: its blocks differ per rank).
    // A rank that sends nothing still takes part (its send pointer inside the registration).
    size_t extent = 0;
    for (int p = 0; p < ctx.dev.nranks; ++p)
      if (sendcounts[p]) extent = std::max(extent, (sdispls[p] + sendcounts[p]) * ts);
    Registration* g = nullptr;
    MKCCL_CHECK(findReg(ctx, send, extent, &g));
    if (g && (uniform ? directWanted(tune, sendcounts[0] * ts) : tune.direct != 2)) {
      std::vector<size_t> sb(ctx.dev.nranks), sd(ctx.dev.nranks), rb(ctx.dev.nranks), rd(ctx.dev.nranks);
      for (int p = 0; p < ctx.dev.nranks; ++p) {
        sb[p] = sendcounts[p] * ts, sd[p] = sdispls[p] * ts;
        rb[p] = recvcounts[p] * ts, rd[p] = rdispls[p] * ts;
      }
      return directAllToAll(ctx, g, send, sb.data(), sd.data(), recv, rb.data(), rd.data());
    }
  }
  // Each stream goes LL or simple by its own length (both ends see the same length): one kernel
  // per protocol that has streams here (the LL one also when none has, so that the call posts its
  // entry flag like every collective).
  const size_t llMax = llStreamLimit(ctx, tune);
  Args ll, simple;
  initArgs(ctx, kAllToAll, send, recv, &ll);
  initArgs(ctx, kAllToAll, send, recv, &simple);
  size_t maxStream = 0;
  bool anyLL = false, anySimple = false;
  for (int q = 0; q < n; ++q) {
    const int p = rankOf(ctx, q);
    const size_t out = sendcounts[p] * ts, in = recvcounts[p] * ts;
    Args& ao = out <= llMax ? ll : simple;
    ao.outOff[q] = sdispls[p] * ts;
    ao.outLen[q] = out;
    Args& ai = in <= llMax ? ll : simple;
    ai.inOff[q] = rdispls[p] * ts;
    ai.inLen[q] = in;
    anyLL |= (out > 0 && out <= llMax) || (in > 0 && in <= llMax);
    if (out > llMax || in > llMax) {
      anySimple = true;
      maxStream = std::max({maxStream, out > llMax ? out : 0, in > llMax ? in : 0});
    }
  }
  const bool llRuns = anyLL || !anySimple;
  if (llRuns) MKCCL_CHECK(planAndLaunch(ctx, tune, true, 0, &ll, t, mkcclSum));
  simple.sharedSeq = llRuns ? 1 : 0;  // one call, one number: the LL kernel took it
  if (anySimple) MKCCL_CHECK(planAndLaunch(ctx, tune, false, maxStream, &simple, t, mkcclSum));
  return mkcclSuccess;
}

}  // namespace mkccl
