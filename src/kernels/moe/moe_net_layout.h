// MoE dispatch/combine across nodes: where one call's data sit in the network window, and how
// they are cut into pieces (plain C++: the host, the kernels and the CPU tests share it).
// docs/MOE.md, "Across nodes".
//
// Every rank computes the whole layout from the counts table (the same on every rank once the
// dispatch's counts exchange is done), so a sender knows where its data go in a receiver's window
// without asking, and every rank reaches the same verdict on whether the windows are big enough.
//
// Window of rank r during a call (offsets from the window's start):
//   [0, row)                        countsOut: r's key totals (dispatch; sent to every remote rank)
//   [row * (1 + s), +row)           countsIn[s]: remote rank s's key totals (dispatch)
//   base = row * (1 + ranks)        in-area: for each remote rank a, in rank order, what a sends r
//   base + alignUp(in, 256)         out-area: for each remote rank b, in rank order, what r sends b
// A flow is a run of entries of one stride. Dispatch: a flow from source s to expert rank d holds
// s's pairs to d (P(s -> d), the counts table's key E + d of row s) in pair-index order, each
// entry the row, the pair record and the slots' rowInfos. Combine: the flow from d back to s holds
// the same pairs in the same order, each entry a landing row. The dispatch checks that both fit.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "kernels/moe/moe_layout.h"

namespace mkccl {
namespace moe {

// Arrival flags of the network (4096 per sender; 0 netBarrier, 1-2 the collectives, 64-128
// AllGather+GEMM, 130+ GEMM+RS): 3 "my window is free for this call" (every MoE call), 4 "my key
// totals are in your window" (dispatch), 8 + p "piece p of what I send you is in your window".
// A piece gets a flag of its own because nothing is ordered across flags.
constexpr uint32_t kNetReadyFlag = 3;
constexpr uint32_t kNetCountsFlag = 4;
constexpr uint32_t kNetPieceFlag = 8;
constexpr int kNetMaxPieces = 56;  // flags 8 .. 63
// Steps of netFlagValue(seq, step) (values only grow: one call number per call).
constexpr uint32_t kNetStepReady = 0, kNetStepCounts = 1, kNetStepDispatch = 2, kNetStepCombine = 3;
// Pieces of at least this many bytes (fewer, larger puts), unless a flow needs more pieces.
constexpr uint64_t kNetMinPieceBytes = 256u << 10;
constexpr uint64_t kNetAlign = 256;

// A dispatch entry: the row (rowBytes), the pair record (m, then the m rows at the receiver:
// pairStride int32), then the k rowInfos of the pair's slots (16 bytes each). 16-byte multiple.
MOE_HD uint64_t netEntryBytes(const Dims& d) {
  return (uint64_t)d.rowBytes() + (uint64_t)d.pairStride() * 4 + (uint64_t)d.topk * 16;
}
MOE_HD uint64_t netEntryRecord(const Dims& d) { return d.rowBytes(); }
MOE_HD uint64_t netEntryInfo(const Dims& d) { return d.rowBytes() + (uint64_t)d.pairStride() * 4; }
// A combine entry: one dtype row, the pair's rows weighted and summed in fp32 then rounded once
// (m >= 2), or its one row as it is. Not the fp32 landing row of the NVLink path: half the bytes
// on the wire, which decides the combine's time across nodes; one more rounding of a partial sum.
MOE_HD uint64_t netCombineStride(const Dims& d) { return d.rowBytes(); }

MOE_HD uint64_t netCountsRow(const Dims& d) { return alignUp((size_t)d.keys() * 4, kNetAlign); }
MOE_HD uint64_t netCountsIn(const Dims& d, int s) { return netCountsRow(d) * (uint64_t)(1 + s); }
MOE_HD uint64_t netDataBase(const Dims& d) { return netCountsRow(d) * (uint64_t)(1 + d.ranks); }

// Entries per piece of a flow of `count` entries of `stride` bytes: at most kNetMaxPieces
// pieces, each at least kNetMinPieceBytes where the flow is that long.
MOE_HD long long netPer(long long count, uint64_t stride) {
  const long long a = (count + kNetMaxPieces - 1) / kNetMaxPieces;
  const long long b = (long long)((kNetMinPieceBytes + stride - 1) / stride);
  const long long p = a > b ? a : b;
  return p < 1 ? 1 : p;
}
MOE_HD int netPieces(long long count, long long per) { return (int)((count + per - 1) / per); }
// Entries of piece p (the last one may be short).
MOE_HD long long netPieceCount(long long count, long long per, int p) {
  const long long left = count - (long long)p * per;
  return left < per ? left : per;
}

// The pairs of one dispatch between every two ranks, and the nodes (what the layout depends on).
struct NetPairs {
  int n;  // ranks (no initializers: the kernels keep these in shared memory)
  int node[kMaxRanks];
  int32_t P[kMaxRanks][kMaxRanks];  // P[s][d]: pairs of rank s's tokens with a slot on rank d's experts
  MOE_HD bool remote(int a, int b) const { return node[a] != node[b]; }
  // Entries of the flow from rank a to rank b: dispatch a -> b carries P[a][b]; combine carries
  // P[b][a] back.
  MOE_HD long long flow(bool combine, int a, int b) const { return combine ? P[b][a] : P[a][b]; }
};

// Where rank r's in-area puts what rank a sends it.
MOE_HD uint64_t netInOff(const NetPairs& t, bool combine, uint64_t base, uint64_t stride, int r, int a) {
  uint64_t o = base;
  for (int x = 0; x < a; ++x)
    if (t.remote(x, r)) o += (uint64_t)t.flow(combine, x, r) * stride;
  return o;
}
MOE_HD uint64_t netInBytes(const NetPairs& t, bool combine, uint64_t stride, int r) {
  uint64_t o = 0;
  for (int x = 0; x < t.n; ++x)
    if (t.remote(x, r)) o += (uint64_t)t.flow(combine, x, r) * stride;
  return o;
}
MOE_HD uint64_t netOutBase(const NetPairs& t, bool combine, uint64_t base, uint64_t stride, int r) {
  return base + alignUp(netInBytes(t, combine, stride, r), kNetAlign);
}
// Where rank r stages what it sends rank b.
MOE_HD uint64_t netOutOff(const NetPairs& t, bool combine, uint64_t base, uint64_t stride, int r, int b) {
  uint64_t o = netOutBase(t, combine, base, stride, r);
  for (int x = 0; x < b; ++x)
    if (t.remote(r, x)) o += (uint64_t)t.flow(combine, r, x) * stride;
  return o;
}
// Bytes of rank r's window one op of the call uses.
MOE_HD uint64_t netNeedOf(const NetPairs& t, bool combine, uint64_t base, uint64_t stride, int r) {
  return netOutOff(t, combine, base, stride, r, t.n);
}
// Bytes of rank r's window the dispatch and the combine of this routing use (the larger).
MOE_HD uint64_t netWindowNeed(const NetPairs& t, const Dims& d, int r) {
  const uint64_t a = netNeedOf(t, false, netDataBase(d), netEntryBytes(d), r);
  const uint64_t b = netNeedOf(t, true, netDataBase(d), netCombineStride(d), r);
  return a > b ? a : b;
}

// One rank's view of one op of a call: for every remote rank q, where what q sends me lies in my
// window, where what I send q is staged in mine and lands in q's, and the entries per piece.
struct NetView {
  uint64_t stride;
  uint64_t in[kMaxRanks], out[kMaxRanks], dst[kMaxRanks];
  // 32-bit (a flow is at most maxTokensPerRank <= 2^24 pairs): the kernels divide by these.
  int cntIn[kMaxRanks], cntOut[kMaxRanks];  // entries of the flows q -> me, me -> q
  int perIn[kMaxRanks], perOut[kMaxRanks];  // entries per piece of those flows
};
MOE_HD void netViewFor(const NetPairs& t, bool combine, const Dims& d, int me, NetView* v) {
  const uint64_t base = netDataBase(d);
  const uint64_t stride = combine ? netCombineStride(d) : netEntryBytes(d);
  v->stride = stride;
  uint64_t in = base, out = netOutBase(t, combine, base, stride, me);
  for (int q = 0; q < t.n; ++q) {
    v->cntIn[q] = v->cntOut[q] = 0;
    v->perIn[q] = v->perOut[q] = 1;
    v->in[q] = in, v->out[q] = out, v->dst[q] = 0;
    if (!t.remote(q, me)) continue;
    v->cntIn[q] = (int)t.flow(combine, q, me);
    v->cntOut[q] = (int)t.flow(combine, me, q);
    v->perIn[q] = (int)netPer(v->cntIn[q], stride);
    v->perOut[q] = (int)netPer(v->cntOut[q], stride);
    v->dst[q] = netInOff(t, combine, base, stride, q, me);
    in += (uint64_t)v->cntIn[q] * stride;
    out += (uint64_t)v->cntOut[q] * stride;
  }
}

}  // namespace moe
}  // namespace mkccl
