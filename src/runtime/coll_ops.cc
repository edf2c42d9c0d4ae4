// The NVLink collectives: AllGather, ReduceScatter, AllReduce, AllToAll(v) (ops.h). Arguments are
// checked by the API (api_coll.cc); here each call becomes streams of bytes between local ranks
// (coll_args.h) for the collective kernel (src/kernels/coll/coll_kernel.cuh).
#include <algorithm>
#include "runtime/check.h"
#include "runtime/coll_plan.h"
#include "runtime/comm.h"
#include "runtime/ops.h"

namespace mkccl {

using namespace coll;

namespace {

mkcclResult_t localCopy(OpCtx& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
  return mkcclSuccess;
}

int rankOf(const OpCtx& ctx, int local) { return ctx.comm->localToRank[local]; }

}  // namespace

mkcclResult_t allGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t) {
  MKCCL_CHECK(requireSingleNode(ctx, "mkcclAllGather"));
  const size_t B = sendcount * typeSize(t);
  const int n = ctx.dev.localRanks, me = ctx.dev.localRank;
  char* mine = static_cast<char*>(recv) + (size_t)ctx.dev.rank * B;
  if (n == 1) return localCopy(ctx, mine, send, B);
  Args a;
  initArgs(ctx, kAllGather, send, recv, &a);
  for (int q = 0; q < n; ++q) {
    a.outLen[q] = B;
    a.inLen[q] = B;
    a.inOff[q] = (size_t)rankOf(ctx, q) * B;
  }
  if (send == mine) a.outLen[me] = 0;  // in place: nothing to copy locally
  int grid = 0;
  MKCCL_CHECK(planLayout(ctx, tuningFromEnv(), B, &a, &grid));
  return launchColl(ctx, a, grid, t, mkcclSum);
}

mkcclResult_t reduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                              mkcclRedOp_t op) {
  MKCCL_CHECK(requireSingleNode(ctx, "mkcclReduceScatter"));
  const size_t R = recvcount * typeSize(t);
  const int n = ctx.dev.localRanks, me = ctx.dev.localRank;
  if (n == 1) return localCopy(ctx, recv, send, R);
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
  int grid = 0;
  MKCCL_CHECK(planLayout(ctx, tuningFromEnv(), R, &a, &grid));
  return launchColl(ctx, a, grid, t, op);
}

mkcclResult_t allReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                          mkcclRedOp_t op) {
  MKCCL_CHECK(requireSingleNode(ctx, "mkcclAllReduce"));
  const size_t ts = typeSize(t), bytes = count * ts;
  const int n = ctx.dev.localRanks, me = ctx.dev.localRank;
  if (n == 1) return localCopy(ctx, recv, send, bytes);
  const Tuning tune = tuningFromEnv();
  const bool oneShot = tune.algo == 1 || (tune.algo == 0 && bytes <= tune.oneShotMaxBytes);
  Args a;
  initArgs(ctx, oneShot ? kAllReduceOneShot : kAllReduceTwoShot, send, recv, &a);
  a.avgDiv = op == mkcclAvg ? n : 0;
  size_t maxStream;
  if (oneShot) {
    for (int p = 0; p < n; ++p) a.outLen[p] = p == me ? 0 : bytes;
    a.redLen = bytes;
    maxStream = bytes;
  } else {
    // Rank r reduces block r; blocks start on 16-byte boundaries so every block is vector aligned.
    const size_t per = 16 / ts;
    const size_t blk = (count + n - 1) / n;
    const size_t blkElems = (blk + per - 1) / per * per;
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
  int grid = 0;
  MKCCL_CHECK(planLayout(ctx, tune, maxStream, &a, &grid));
  return launchColl(ctx, a, grid, t, op);
}

mkcclResult_t allToAllvOp(OpCtx& ctx, const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                          const size_t* recvcounts, const size_t* rdispls, mkcclDataType_t t) {
  MKCCL_CHECK(requireSingleNode(ctx, "mkcclAllToAllv"));
  const size_t ts = typeSize(t);
  const int n = ctx.dev.localRanks, r = ctx.dev.rank;
  ARG_CHECK(sendcounts[r] == recvcounts[r],
            "mkcclAllToAllv: rank %d sends %zu elements to itself but expects to receive %zu", r, sendcounts[r],
            recvcounts[r]);
  if (n == 1)
    return localCopy(ctx, static_cast<char*>(recv) + rdispls[r] * ts, static_cast<const char*>(send) + sdispls[r] * ts,
                     sendcounts[r] * ts);
  Args a;
  initArgs(ctx, kAllToAll, send, recv, &a);
  size_t maxStream = 0;
  for (int q = 0; q < n; ++q) {
    const int p = rankOf(ctx, q);
    a.outOff[q] = sdispls[p] * ts;
    a.outLen[q] = sendcounts[p] * ts;
    a.inOff[q] = rdispls[p] * ts;
    a.inLen[q] = recvcounts[p] * ts;
    maxStream = std::max({maxStream, a.outLen[q], a.inLen[q]});
  }
  int grid = 0;
  MKCCL_CHECK(planLayout(ctx, tuningFromEnv(), maxStream, &a, &grid));
  return launchColl(ctx, a, grid, t, mkcclSum);
}

}  // namespace mkccl
