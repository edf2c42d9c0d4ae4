// Hierarchical collectives across nodes (see coll_net.h). N nodes of L ranks each; rank (m, i) is
// local rank i of node m; its counterparts are the ranks (m', i). Calls larger than a window slot
// go in rounds of at most one slot per peer (slot = window / 2N, net_coll.h), each round:
//
//   AllGather (B bytes per rank): my block -> S[my node]; exchange with the counterparts (R[m] =
//     block of (m, i)); copy each R[m] to its place in recv. After the rounds, for every node m an
//     in-place NVLink AllGather among the local ranks of the blocks of node m's ranks.
//   ReduceScatter (R bytes per rank): for every node m, an NVLink ReduceScatter among the local
//     ranks of the blocks of node m's ranks (local i gets this node's partial of block (m, i)) into
//     S[m], my own node's into recv; exchange S[m] -> counterpart in node m; recv = reduction over
//     nodes (node order) of the partials.
//   AllReduce: the vector cut into L shares (16-byte aligned); an NVLink ReduceScatter of the
//     shares into S[my node] (this node's partial of my share); exchange; my share of recv =
//     reduction over nodes in node order (every counterpart computes the same bits); an NVLink
//     AllGather of the shares.
//
// Every kernel that waits on flags (NVLink kernel or exchange) gets a fresh call number: the comm's
// seq advances by one per launch, so to the NVLink protocols they look like back-to-back calls
// (every rank makes the same launches, so the numbers agree). mkcclAvg reduces with sum and
// divides once, at the end, by the number of ranks. The network part moves whole slots with one put
// each: the wire is TCP on our machines; simple and bounded beats fast.
#include "ops/coll/coll_net.h"
#include <string.h>
#include <algorithm>
#include "ops/coll/coll_kernels.h"
#include "ops/coll/net_coll.h"
#include "base/check.h"
#include "ops/coll/coll_plan.h"
#include "runtime/comm.h"
#include "runtime/hooks.h"

namespace mkccl {

using namespace coll;

namespace {

constexpr uint64_t kSlotAlign = 4096;

// Hands out the sequence numbers of one call's launches: the call's own first, then new ones.
class SeqSource {
 public:
  explicit SeqSource(OpCtx& ctx) : ctx_(ctx) {}
  OpCtx next() {
    OpCtx c = ctx_;
    if (!first_) c.dev.seq = ++ctx_.comm->seq;
    first_ = false;
    return c;
  }

 private:
  OpCtx& ctx_;
  bool first_ = true;
};

struct Plan {
  NetCollInfo* info;
  int N, L, node, me;  // nodes, ranks per node, my node, my local rank
  uint64_t slot;
  int rank(int m, int i) const { return info->rankAt[(size_t)m * L + i]; }
  char* S(int m) const { return info->window + netcoll::slotS(m, slot); }
  char* R(int m) const { return info->window + netcoll::slotR(m, N, slot); }
};

mkcclResult_t makePlan(const OpCtx& ctx, const char* opName, Plan* p) {
  NetCollInfo* info = nullptr;
  MKCCL_CHECK(netUniformCollInfo(ctx.comm, opName, &info));
  p->info = info;
  p->N = info->nNodes;
  p->L = info->localRanks;
  p->node = ctx.comm->node;
  p->me = ctx.comm->localRank;
  p->slot = info->windowBytes / (2 * (uint64_t)p->N) / kSlotAlign * kSlotAlign;
  if (p->slot < kSlotAlign)
    return setError(mkcclInvalidUsage,
                    "%s: a %llu-byte network window is too small for %d nodes (2 slots of >= %llu bytes per node); "
                    "raise MKCCL_NET_BUFFER_BYTES",
                    opName, (unsigned long long)info->windowBytes, p->N, (unsigned long long)kSlotAlign);
  return mkcclSuccess;
}

mkcclResult_t copyAsync(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  return mkcclSuccess;
}

// Args of an NVLink kernel among the ranks of my node. The reduction order is local-rank order (=
// rank order inside the node: localToRank is sorted), whatever the ranks' global numbers.
void nodeArgs(const OpCtx& c, Kind kind, const void* send, void* recv, int L, Args* a) {
  initArgs(c, kind, send, recv, a);
  for (int i = 0; i < L; ++i) a->localOfRank[i] = (int8_t)i;
}

// Sub-range [first, first + len) of each local rank's piece, by local rank.
struct Pieces {
  size_t first[kMaxLocalRanks], len[kMaxLocalRanks];
  size_t maxLen() const {
    size_t m = 0;
    for (int i = 0; i < kMaxLocalRanks; ++i) m = std::max(m, len[i]);
    return m;
  }
};

// NVLink ReduceScatter among my node's ranks: local rank p's piece of every rank's `send` (at
// send + P.first[p], P.len[p] bytes) reduced into p's out (mine: `out`).
mkcclResult_t nodeReduceScatter(SeqSource& seq, const Plan& p, const void* send, const Pieces& P, void* out,
                                mkcclDataType_t t, mkcclRedOp_t op) {
  const OpCtx c = seq.next();
  Args a;
  nodeArgs(c, kReduceScatter, send, out, p.L, &a);
  for (int q = 0; q < p.L; ++q) {
    a.outLen[q] = q == p.me ? 0 : P.len[q];
    a.outOff[q] = P.first[q];
  }
  a.redLen = P.len[p.me];
  a.redInOff = P.first[p.me];
  a.redOutOff = 0;
  a.avgDiv = 0;
  int grid = 0;
  const Tuning& tune = tuningOf(c);
  MKCCL_CHECK(planLayout(c, tune, P.maxLen(), &a, &grid));
  return launchColl(c, a, grid, t, op == mkcclAvg ? mkcclSum : op);
}

// In-place NVLink AllGather among my node's ranks: local rank q's piece (recv + P.first[q],
// P.len[q] bytes, already in q's recv) copied into every local rank's recv.
mkcclResult_t nodeAllGather(SeqSource& seq, const Plan& p, void* recv, const Pieces& P) {
  const OpCtx c = seq.next();
  char* r = static_cast<char*>(recv);
  Args a;
  nodeArgs(c, kAllGather, r + P.first[p.me], r, p.L, &a);
  for (int q = 0; q < p.L; ++q) {
    a.outLen[q] = q == p.me ? 0 : P.len[p.me];  // in place: my own piece is already there
    a.inLen[q] = P.len[q];
    a.inOff[q] = P.first[q];
  }
  int grid = 0;
  const Tuning& tune = tuningOf(c);
  MKCCL_CHECK(planLayout(c, tune, P.maxLen(), &a, &grid));
  return launchColl(c, a, grid, mkcclUint8, mkcclSum);
}

// f(g0, n) for the runs of consecutive global ranks among node m's (one run when ranks go node by
// node), in local order.
template <class F>
mkcclResult_t forRankRuns(const Plan& p, int m, F&& f) {
  for (int q = 0; q < p.L;) {
    int n = 1;
    while (q + n < p.L && p.rank(m, q + n) == p.rank(m, q) + n) ++n;
    MKCCL_CHECK(f(p.rank(m, q), n));
    q += n;
  }
  return mkcclSuccess;
}

// Units [u0, u0 + un) of each block: piece j of `pieces` (units j / pieces ..).
struct PieceRange {
  size_t u0, un;
};
PieceRange pieceOf(size_t units, int pieces, int j) {
  const size_t u0 = units * j / pieces;
  return {u0, units * (j + 1) / pieces - u0};
}

mkcclResult_t exchange(SeqSource& seq, const Plan& p, uint64_t bytes, bool perNode) {
  const OpCtx c = seq.next();
  MKCCL_TRACE("inter-node exchange, seq %llu: %llu bytes per counterpart, %d nodes, slot %llu",
              (unsigned long long)c.dev.seq, (unsigned long long)bytes, p.N, (unsigned long long)p.slot);
  return netcoll::launchExchange(c.dev, p.slot, bytes, perNode, c.stream);
}

}  // namespace

mkcclResult_t netAllGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t) {
  Plan p;
  MKCCL_CHECK(makePlan(ctx, "mkcclAllGather", &p));
  SeqSource seq(ctx);
  const size_t B = sendcount * typeSize(t);
  char* out = static_cast<char*>(recv);
  const cudaStream_t s = ctx.stream;
  MKCCL_CHECK(copyAsync(out + (size_t)ctx.dev.rank * B, send, B, s));  // nothing when in place
  for (size_t o = 0; o < B; o += p.slot) {
    const size_t len = std::min<size_t>(p.slot, B - o);
    MKCCL_CHECK(copyAsync(p.S(p.node), static_cast<const char*>(send) + o, len, s));
    MKCCL_CHECK(exchange(seq, p, len, false));
    for (int m = 0; m < p.N; ++m)
      if (m != p.node) MKCCL_CHECK(copyAsync(out + (size_t)p.rank(m, p.me) * B + o, p.R(m), len, s));
  }
  if (p.L > 1)
    for (int m = 0; m < p.N; ++m) {
      Pieces P{};
      for (int q = 0; q < p.L; ++q) {
        P.first[q] = (size_t)p.rank(m, q) * B;
        P.len[q] = B;
      }
      MKCCL_CHECK(nodeAllGather(seq, p, recv, P));
    }
  return mkcclSuccess;
}

mkcclResult_t netReduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                                 mkcclRedOp_t op) {
  Plan p;
  MKCCL_CHECK(makePlan(ctx, "mkcclReduceScatter", &p));
  SeqSource seq(ctx);
  const size_t ts = typeSize(t), Rb = recvcount * ts;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const cudaStream_t s = ctx.stream;
  for (size_t o = 0; o < Rb; o += p.slot) {
    const size_t len = std::min<size_t>(p.slot, Rb - o);
    // This node's partial of block (m, me), for every node m: mine straight into recv.
    for (int m = 0; m < p.N; ++m) {
      char* dst = m == p.node ? out + o : p.S(m);
      if (p.L == 1) {
        MKCCL_CHECK(copyAsync(dst, in + (size_t)p.rank(m, 0) * Rb + o, len, s));
        continue;
      }
      Pieces P{};
      for (int q = 0; q < p.L; ++q) {
        P.first[q] = (size_t)p.rank(m, q) * Rb + o;
        P.len[q] = len;
      }
      MKCCL_CHECK(nodeReduceScatter(seq, p, send, P, dst, t, op));
    }
    MKCCL_CHECK(exchange(seq, p, len, true));
    MKCCL_CHECK(netcoll::launchReduce(p.info->window, p.slot, p.N, p.node, out + o, out + o, len / ts, t,
                                      op == mkcclAvg ? mkcclSum : op, op == mkcclAvg ? ctx.comm->nranks : 0, s));
  }
  return mkcclSuccess;
}

mkcclResult_t netReduceScatterProducedOp(OpCtx& ctx, const NetProducedInput& in, void* send, void* recv,
                                         mkcclDataType_t t, bool* ran) {
  *ran = false;
  Plan p;
  MKCCL_CHECK(makePlan(ctx, "mkcclReduceScatter", &p));
  const size_t ts = typeSize(t), unitBytes = in.unitElems * ts, Rb = in.units * unitBytes;
  if (p.N < 2 || Rb > p.slot || (t != mkcclFloat16 && t != mkcclBfloat16 && t != mkcclFloat32)) return mkcclSuccess;
  if (in.units == 0 || in.pieces < 1 || in.pieces > netcoll::kMaxPieces || size_t(in.pieces) > in.units)
    return setError(mkcclInternalError, "inter-node ReduceScatter: %d pieces of %zu units", in.pieces, in.units);
  *ran = true;
  SeqSource seq(ctx);
  char* in8 = static_cast<char*>(send);
  char* out = static_cast<char*>(recv);
  const cudaStream_t s = ctx.stream;
  auto produceNode = [&](int m, size_t u0, size_t un) {
    return forRankRuns(p, m, [&](int g0, int n) { return in.produce(g0, n, u0, un); });
  };
  // This node's partial of units [u0, u0 + un) of node m's blocks into dst (local rank i's piece:
  // block (m, i)).
  auto nodePartial = [&](int m, size_t u0, size_t un, char* dst) -> mkcclResult_t {
    const size_t off = u0 * unitBytes, len = un * unitBytes;
    if (p.L == 1) return copyAsync(dst, in8 + (size_t)p.rank(m, 0) * Rb + off, len, s);
    Pieces P{};
    for (int q = 0; q < p.L; ++q) {
      P.first[q] = (size_t)p.rank(m, q) * Rb + off;
      P.len[q] = len;
    }
    return nodeReduceScatter(seq, p, send, P, dst, t, mkcclSum);
  };
  OpCtx xc;  // the exchange's call number: its sends and its finish
  for (int j = 0; j < in.pieces; ++j) {
    const auto [u0, un] = pieceOf(in.units, in.pieces, j);
    for (int k = 1; k < p.N; ++k) {  // the next nodes first: every node sends to a different one first
      const int m = (p.node + k) % p.N;
      MKCCL_CHECK(produceNode(m, u0, un));
      MKCCL_CHECK(nodePartial(m, u0, un, p.S(m) + u0 * unitBytes));
    }
    if (j == 0) xc = seq.next();
    MKCCL_TRACE("inter-node ReduceScatter, seq %llu: piece %d of %d, %zu bytes per counterpart",
                (unsigned long long)xc.dev.seq, j, in.pieces, un * unitBytes);
    MKCCL_CHECK(netcoll::launchExchangeSend(xc.dev, p.slot, u0 * unitBytes, un * unitBytes, j, true, s));
  }
  MKCCL_CHECK(produceNode(p.node, 0, in.units));
  const char* own = p.L == 1 ? in8 + (size_t)p.rank(p.node, 0) * Rb : out;
  if (p.L > 1) MKCCL_CHECK(nodePartial(p.node, 0, in.units, out));
  return netcoll::launchReduceArrivals(xc.dev, p.info->window, p.slot, p.N, own, out, in.units, in.unitElems,
                                      in.pieces, t, s);
}

mkcclResult_t netPiecedFits(OpCtx& ctx, size_t blockBytes, bool* fits) {
  Plan p;
  MKCCL_CHECK(makePlan(ctx, "mkcclAllGather", &p));
  *fits = p.N >= 2 && blockBytes <= p.slot;
  return mkcclSuccess;
}

mkcclResult_t netAllGatherConsumedOp(OpCtx& ctx, const NetConsumedInput& in, void* gathered, mkcclDataType_t t,
                                     bool* ran) {
  *ran = false;
  Plan p;
  MKCCL_CHECK(makePlan(ctx, "mkcclAllGather", &p));
  const size_t unitBytes = in.unitElems * typeSize(t), Rb = in.units * unitBytes;
  if (p.N < 2 || Rb > p.slot) return mkcclSuccess;
  if (in.units == 0 || in.pieces < 1 || in.pieces > netcoll::kMaxPieces || size_t(in.pieces) > in.units)
    return setError(mkcclInternalError, "inter-node AllGather: %d pieces of %zu units", in.pieces, in.units);
  *ran = true;
  SeqSource seq(ctx);
  char* g8 = static_cast<char*>(gathered);
  const cudaStream_t s = ctx.stream;
  auto consumeNode = [&](int m, size_t u0, size_t un) {
    return forRankRuns(p, m, [&](int g0, int n) { return in.consume(g0, n, u0, un); });
  };
  // Units [u0, u0 + un) of node m's blocks to every local rank, in place (each local rank holds
  // its own block's).
  auto spread = [&](int m, size_t u0, size_t un) -> mkcclResult_t {
    if (p.L == 1) return mkcclSuccess;
    Pieces P{};
    for (int q = 0; q < p.L; ++q) {
      P.first[q] = (size_t)p.rank(m, q) * Rb + u0 * unitBytes;
      P.len[q] = un * unitBytes;
    }
    return nodeAllGather(seq, p, gathered, P);
  };
  // My block, piece by piece, into S[my node] and onto the network.
  const char* mine = g8 + (size_t)p.rank(p.node, p.me) * Rb;
  OpCtx xc;  // the exchange's call number: its sends and its waits
  for (int j = 0; j < in.pieces; ++j) {
    const auto [u0, un] = pieceOf(in.units, in.pieces, j);
    MKCCL_CHECK(copyAsync(p.S(p.node) + u0 * unitBytes, mine + u0 * unitBytes, un * unitBytes, s));
    if (j == 0) xc = seq.next();
    MKCCL_TRACE("inter-node AllGather, seq %llu: piece %d of %d, %zu bytes", (unsigned long long)xc.dev.seq, j,
                in.pieces, un * unitBytes);
    MKCCL_CHECK(netcoll::launchExchangeSend(xc.dev, p.slot, u0 * unitBytes, un * unitBytes, j, false, s));
  }
  // This node's blocks while the pieces cross.
  MKCCL_CHECK(spread(p.node, 0, in.units));
  MKCCL_CHECK(consumeNode(p.node, 0, in.units));
  // The other nodes' pieces as they land: to their places, over NVLink to the node, consumed.
  for (int j = 0; j < in.pieces; ++j) {
    const auto [u0, un] = pieceOf(in.units, in.pieces, j);
    MKCCL_CHECK(netcoll::launchExchangeWait(xc.dev, j, j == in.pieces - 1, s));
    for (int k = 1; k < p.N; ++k) {
      const int m = (p.node + k) % p.N;
      MKCCL_CHECK(copyAsync(g8 + (size_t)p.rank(m, p.me) * Rb + u0 * unitBytes, p.R(m) + u0 * unitBytes,
                            un * unitBytes, s));
      MKCCL_CHECK(spread(m, u0, un));
    }
    for (int k = 1; k < p.N; ++k) MKCCL_CHECK(consumeNode((p.node + k) % p.N, u0, un));
  }
  return mkcclSuccess;
}

mkcclResult_t netAllReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                             mkcclRedOp_t op) {
  Plan p;
  MKCCL_CHECK(makePlan(ctx, "mkcclAllReduce", &p));
  SeqSource seq(ctx);
  const size_t ts = typeSize(t);
  // Shares by local rank: 16-byte aligned starts, so every piece is vector aligned.
  const size_t per = 16 / ts, blk = (count + p.L - 1) / p.L, blkElems = (blk + per - 1) / per * per;
  auto start = [&](int q) { return std::min(count, (size_t)q * blkElems) * ts; };
  auto shareLen = [&](int q) { return std::min(count, (size_t)(q + 1) * blkElems) * ts - start(q); };
  const size_t maxShare = shareLen(0);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const cudaStream_t s = ctx.stream;
  for (size_t o = 0; o < maxShare; o += p.slot) {
    // This round: bytes [o, o + slot) of every share (shorter shares: what is left of them).
    Pieces P{};
    for (int q = 0; q < p.L; ++q) {
      const size_t sl = shareLen(q);
      P.first[q] = start(q) + std::min(o, sl);
      P.len[q] = o < sl ? std::min<size_t>(p.slot, sl - o) : 0;
    }
    const size_t len = P.len[p.me];
    if (p.L == 1) MKCCL_CHECK(copyAsync(p.S(p.node), in + P.first[0], len, s));
    else MKCCL_CHECK(nodeReduceScatter(seq, p, send, P, p.S(p.node), t, op));
    MKCCL_CHECK(exchange(seq, p, len, false));
    MKCCL_CHECK(netcoll::launchReduce(p.info->window, p.slot, p.N, p.node, p.S(p.node), out + P.first[p.me], len / ts,
                                      t, op == mkcclAvg ? mkcclSum : op, op == mkcclAvg ? ctx.comm->nranks : 0, s));
    if (p.L > 1) MKCCL_CHECK(nodeAllGather(seq, p, recv, P));
  }
  return mkcclSuccess;
}

mkcclResult_t netCollPreload() {
  MKCCL_CHECK(netcoll::preload());  // the exchange and reduce kernels (net_coll.cu)
  // The NVLink kernels these ops launch.
  cudaFuncAttributes a;
  CUDA_CHECK(cudaFuncGetAttributes(&a, copyKernel()));
  for (int t = 0; t < mkcclNumTypes; ++t)
    for (mkcclRedOp_t op : {mkcclSum, mkcclProd, mkcclMax, mkcclMin}) {
      const void* fn = reduceKernelFloat((mkcclDataType_t)t, op);
      if (!fn) fn = reduceKernelInt((mkcclDataType_t)t, op);
      if (fn) CUDA_CHECK(cudaFuncGetAttributes(&a, fn));
    }
  return mkcclSuccess;
}

}  // namespace mkccl
