// GEMM+ReduceScatter / GEMM+AllReduce over NVLink: who computes what, in which order, and where a
// call's data and flags live. Everything derives from the call's global arguments (M, N, world
// size) and the plan (tile width, cluster), which every rank computes alike, so a receiver knows
// what a sender writes without asking. Host- and device-callable (the CPU test walks schedules).
//
// Direct reduction. The output rows are cut into ws chunks; chunk c belongs to rank c (RS: rows
// c*M/ws..., the user's C; AR: every rank ends with all of them). Every rank computes its partial
// product of every chunk, one phase per chunk: at phase j = 0..ws-1 rank r computes chunk
// c(r, j) = (r + j + 1) mod ws, and each finished tile of phases j < ws-1 goes straight to its
// owner's receive slot (j, u) — slot j is unique per sender, since sender q reaches chunk c at
// phase (c - q - 1) mod ws. The last phase is r's own chunk: its epilogue adds the ws-1 partials
// that arrived meanwhile and writes C. No tile waits for another rank's tile of the same phase,
// so the GEMM runs at its own rate; at any phase every rank sends to a different owner, so each
// link carries one sender. AR: each finished tile is then pushed to every other rank (its ag slot)
// and copied into C there.
//
// Tiles. A chunk is tiled on its own (128-row M-blocks counted from the chunk's first row), so no
// tile straddles two owners; M-blocks per chunk are padded to the cluster size (padding rows are
// computed on whatever A holds there and clipped when C is written). Tile u of a chunk is the
// one at raster position v (below), CTA ctaRank of its cluster: u = v * cs + ctaRank. Every chunk
// has the same tiles and every rank the same raster, so (slot, u) names a partial, and slots in u
// order are the order in which a phase's tiles are produced (runs of slots fill front to back).
//
// Order. Position p of one linear order of cluster tiles names (phase, cluster tile v of that
// phase's chunk); cluster k of G takes positions k, k + G, ... (Vc cluster tiles per chunk, ws
// phases). `order` (the tuner's gemm_rs.order) picks the mapping:
//   phases       p -> phase p / Vc, tile p % Vc: every sending phase, then the final one.
//   interleaved  the sending phases' positions round-robin over the ws-1 owners (p < (ws-1)*Vc:
//                phase p % (ws-1), tile p / (ws-1)), so that every link carries partials all the
//                time rather than one owner's link per phase; the final phase stays last.
// Receivers do not care: slots and flags name (phase, u), and positions are the same on every
// rank, so what a rank waits for at position P was sent at positions before P.
//
// Ring reduction (gemm_rs.reduce=ring; phase order only, the same on every rank). The
// partial of chunk c travels the ring r -> r-1 instead of going straight to its owner: rank r at
// phase j > 0 computes chunk (r + j + 1) mod ws, which rank r+1 computed at phase j-1 and sent
// into our rx slot j-1; the epilogue adds it and sends the sum into rank r-1's rx slot j, and the
// final phase adds the one sum of ws-1 partials. Every rank sends to one neighbour and receives
// from the other, which the copy engines carry at ~345 GB/s out of a GPU where all-to-all copies
// move ~185 (4xH200, tools/probes/ce_overlap.cu); the same bytes leave a GPU. A tile of phase j
// waits for its neighbour's tile of phase j-1: one phase of slack. Sums cross ranks rounded to the
// input type, so a result is rounded ws-1 times on its way instead of once.
// Inside a chunk, cluster tiles walk bands of `group` cluster rows down, then across N (L2 reuse).
// Every rank walks its own tiles in the same order in which the senders produce them.
//
// Scratch (this rank's share of the symmetric region kScratchGemmReduce), in tile slots of
// 128 x bn elements (tileBytes):
//   staging [(ws-1) x U]     gemm_rs.push=team only: our partials of phases 0..ws-2,
//                            written by our epilogues (local), sent on by the copy warps (the
//                            bulk path sends from shared memory; the slots stay so that rx
//                            offsets agree whichever path each rank uses)
//   rx      [(ws-1) x U]     partials of our chunk: slot j from rank (r - j - 1) mod ws
//   ag      [ws x U]         AR only: finished tiles of chunk c received from its owner
// A staging / rx slot holds a tile in "fragment order": half h (64 rows, one consumer
// warpgroup), then 16-byte vector i of thread t at ((h * nVec + i) * 128 + t) * 16, the vector
// holding the thread's accumulator pairs 4i..4i+3 (wgmma's register order): every epilogue load
// and store is a coalesced 16-byte access. An ag slot holds the tile row-major, [128][bn].
//
// Flags (64-bit slots of each rank's workspace flags; values flagValue(seq, 0), never reset):
//   barrier slot [q]          entry: rank q has started this call (the convention of
//                             signal.cuh's barrier slots, shared by every op): it is done with
//                             our earlier data, so we may write into its areas
//   kOpFlagSlot + j*U + u     rx (j, u) has landed (the SM pushes; the copy engines' flags are in
//                             the scratch: ceRxFlagOffset)
//   kOpFlagSlot + (ws-1)*U + c*U + u   AR: ag (c, u) has landed
//   then, gemm_rs.push=ce only (local, zeroed before the launch): per (slot j, batch b) a
//   count of the staged tiles and the word the copy stream waits for; one count of CTAs done.
#pragma once
#include <stdint.h>

#include "kernels/abi/hd.h"

namespace mkccl {
namespace rs {

enum Mode : int { kModeReduceScatter = 0, kModeAllReduce = 1 };
enum Order : int { kOrderPhases = 0, kOrderInterleaved = 1 };

constexpr int kTileRows = 128;  // GemmCfg::BM
constexpr int kThreadsPerHalf = 128;  // one consumer warpgroup


struct Layout {
  int ws = 1;               // ranks (one node)
  int mode = kModeReduceScatter;
  int64_t M = 0, N = 0;
  int64_t chunkRows = 0;    // chunk c: rows [c * chunkRows, min((c + 1) * chunkRows, M))
  int bn = 256, cs = 1;     // tile width, CTAs per cluster (along M)
  int mbc = 0;              // M-blocks per chunk (a multiple of cs)
  int nBlocks = 0;
  int tiles = 0;            // U: tiles per chunk
  int clusterTiles = 0;     // Vc = tiles / cs
  int group = 1;            // raster band height, in cluster rows
  int order = kOrderPhases; // see Order
  int ceBatch = 0;          // copy engines carry the partials in runs of B tiles of a slot
                            // (push ce; the same on every rank); 0: not
  int ceNb = 0;             // batches per slot, ceil(U / B) (setCeBatch)
  int ring = 0;             // 1: ring reduction (above; gemm_rs.reduce=ring)
  // Across nodes (gemm_rs.net=fused; net_layout.h): ws is the node's ranks, and local chunk c is
  // `subs` sub-chunks, sub s being the rows of rank (node s, local c) of the call, mbs M-blocks
  // each. 1 / 0 in one node.
  int subs = 1;             // nodes
  int node = 0;             // this rank's node (the order takes the other nodes' sub-chunks first)
  int mbs = 0;              // M-blocks per sub-chunk (a multiple of cs)
  int64_t subRows = 0;      // rows per sub-chunk: M / (nodes * ws)

  MKCCL_HD int64_t tileBytes() const { return int64_t(kTileRows) * bn * 2; }
  MKCCL_HD int64_t halfBytes() const { return tileBytes() / 2; }
  MKCCL_HD int vecsPerThread() const { return bn / 16; }  // 16-byte vectors per thread and half
  MKCCL_HD bool allReduce() const { return mode == kModeAllReduce; }

  MKCCL_HD int64_t chunkBegin(int c) const { return min64(int64_t(c) * chunkRows, M); }
  MKCCL_HD int64_t chunkEnd(int c) const { return min64(int64_t(c + 1) * chunkRows, M); }
  // Across nodes, the first A row of M-block mb of chunk c: block mb % mbs of sub-chunk
  // s = mb / mbs, the rows of the call's rank s * ws + c (ranks numbered node by node).
  MKCCL_HD int64_t aRow(int c, int mb) const {
    const int s = mb / mbs;
    return (int64_t(s) * ws + c) * subRows + int64_t(mb - s * mbs) * kTileRows;
  }
  // The chunk rank r computes at phase j; the rank r's partial (sum) of phase j goes to, into its
  // rx slot j; the rank whose partial lands in r's rx slot j.
  MKCCL_HD int chunkAt(int r, int j) const { return (r + j + 1) % ws; }
  MKCCL_HD int sendTo(int r, int j) const { return ring ? (r + ws - 1) % ws : chunkAt(r, j); }
  MKCCL_HD int senderOf(int r, int j) const { return ring ? (r + 1) % ws : ((r - j - 1) % ws + ws) % ws; }
  // What a tile of phase j adds before it sends or stores: rx slots [inFirst(j), + inCount(j)).
  MKCCL_HD int inCount(int j) const { return ring ? (j > 0 ? 1 : 0) : (j == ws - 1 ? ws - 1 : 0); }
  MKCCL_HD int inFirst(int j) const { return ring ? j - 1 : 0; }

  // Scratch byte offsets (this rank's share).
  MKCCL_HD int64_t slotStride() const { return int64_t(tiles) * tileBytes(); }  // slot j -> j+1
  MKCCL_HD int64_t stagingOffset(int j, int u) const { return (int64_t(j) * tiles + u) * tileBytes(); }
  MKCCL_HD int64_t rxOffset(int j, int u) const { return (int64_t(ws - 1 + j) * tiles + u) * tileBytes(); }
  MKCCL_HD int64_t agOffset(int c, int u) const {
    return (int64_t(2 * (ws - 1) + c) * tiles + u) * tileBytes();
  }
  MKCCL_HD int64_t tileAreaBytes() const {
    return int64_t(2 * (ws - 1) + (allReduce() ? ws : 0)) * tiles * tileBytes();
  }
  // Copy engines: the rx flags, after the tiles, one word per rx slot like the flags region's
  // (rxFlag: a batch's is its first tile's). In the scratch rather than the flags region: the
  // engines write a constant (a graph replays what the host enqueued once), which a late write of
  // another op's earlier call into a shared flag slot could pass for; only this op writes here, and
  // the caller's stream clears them before each call.
  MKCCL_HD int64_t ceRxFlagsOffset() const { return tileAreaBytes(); }
  MKCCL_HD int64_t scratchBytes() const {
    return tileAreaBytes() + (ceBatch > 0 ? int64_t(ws - 1) * tiles * 8 : 0);
  }

  // Flag slots, relative to kOpFlagSlot.
  MKCCL_HD int64_t rxSlot(int j, int u) const { return int64_t(j) * tiles + u; }
  // The slot that says rx (j, u) landed: its own, or its copy-engine batch's (the first tile's).
  MKCCL_HD int64_t rxFlag(int j, int u) const { return rxSlot(j, ceBatch > 0 ? u - u % ceBatch : u); }
  MKCCL_HD int64_t agSlot(int c, int u) const { return int64_t(ws - 1) * tiles + int64_t(c) * tiles + u; }
  MKCCL_HD int64_t baseFlagSlots() const {
    return int64_t(ws - 1) * tiles + (allReduce() ? int64_t(ws) * tiles : 0);
  }
  // Copy-engine batches of a slot, and batch b's tiles [b*B, min((b+1)*B, U)).
  MKCCL_HD void setCeBatch(int B) {
    ceBatch = B > 0 ? B : 0;
    ceNb = ceBatch > 0 ? int(ceilDiv(tiles, ceBatch)) : 0;
  }
  MKCCL_HD int ceBatches() const { return ceNb; }
  MKCCL_HD int ceBatchTiles(int b) const { return b + 1 < ceNb ? ceBatch : tiles - b * ceBatch; }
  MKCCL_HD int64_t ceCountSlot(int j, int b) const { return baseFlagSlots() + j * ceNb + b; }
  MKCCL_HD int64_t ceWordSlot(int j, int b) const { return baseFlagSlots() + (ws - 1 + j) * ceNb + b; }
  MKCCL_HD int64_t ceDoneSlot() const { return baseFlagSlots() + int64_t(2 * (ws - 1)) * ceNb; }
  MKCCL_HD int64_t flagSlots() const { return ceBatch > 0 ? ceDoneSlot() + 1 : baseFlagSlots(); }

  // Cluster tiles in the whole order (every phase). The planner keeps it (and U) far below 2^31:
  // flag slots bound them.
  MKCCL_HD int64_t orderLength() const { return int64_t(ws) * clusterTiles; }
};

// The layout of a call: chunks (RS: M / ws rows each, the user's split; AR: ours, rounded to whole
// cluster tiles so that no tile reaches into the next chunk), tiles, raster band.
MKCCL_HD Layout makeLayout(int mode, int ws, int64_t M, int64_t N, int bn, int cs, int group) {
  Layout L;
  L.ws = ws;
  L.mode = mode;
  L.M = M;
  L.N = N;
  L.bn = bn;
  L.cs = cs;
  const int64_t clusterRows = int64_t(kTileRows) * cs;
  if (mode == kModeAllReduce)
    L.chunkRows = max64(clusterRows, ceilDiv(ceilDiv(M, ws), clusterRows) * clusterRows);
  else
    L.chunkRows = M / ws;
  L.mbc = int(ceilDiv(max64(L.chunkRows, 1), clusterRows) * cs);
  L.nBlocks = int(ceilDiv(N, bn));
  L.tiles = L.mbc * L.nBlocks;
  L.clusterTiles = L.tiles / cs;
  L.group = group < 1 ? 1 : group;
  return L;
}

// One CTA tile of the order.
struct Tile {
  int step;   // phase 0..ws-1 (ws-1: the final phase, this rank's own chunk)
  int chunk;  // whose rows
  int mb;     // M-block inside the chunk
  int nb;     // N-block
  int u;      // tile index in the chunk: mb * nBlocks + nb
};

// Cluster tile v of a chunk -> (cluster row, N-block): bands of `group` cluster rows, walked down
// the band first, then across N.
MKCCL_HD void rasterTile(const Layout& L, int v, int* clusterRow, int* nb) {
  const int rows = L.mbc / L.cs;
  const int band = L.group * L.nBlocks;
  const int firstRow = (v / band) * L.group;
  const int inBand = v - (v / band) * band;
  const int bandRows = L.group < rows - firstRow ? L.group : rows - firstRow;
  *clusterRow = firstRow + inBand % bandRows;
  *nb = inBand / bandRows;
}

// Across nodes (net_layout.h) each sub-chunk is rastered on its own, the subs in the order node + 1,
// node + 2, ... (mod subs), this node's own last: the rows that must cross the network come first.
// The other nodes' sub-chunks go cluster row by cluster row (every N-block of one before the next),
// so that their M-blocks, which cross the network one by one (net_layout.h: pieces), complete
// early; the own sub-chunk keeps the bands (L2 reuse of W).
MKCCL_HD void rasterTileNet(const Layout& L, int v, int* clusterRow, int* nb) {
  const int rows = L.mbs / L.cs;
  const int perSub = rows * L.nBlocks;
  const int k = v / perSub;
  v -= k * perSub;
  int s = L.node + 1 + k;
  if (s >= L.subs) s -= L.subs;
  if (s != L.node) {
    const int row = v / L.nBlocks;
    *clusterRow = s * rows + row;
    *nb = v - row * L.nBlocks;
    return;
  }
  const int band = L.group * L.nBlocks;
  const int firstRow = (v / band) * L.group;
  const int inBand = v - (v / band) * band;
  const int bandRows = L.group < rows - firstRow ? L.group : rows - firstRow;
  *clusterRow = s * rows + firstRow + inBand % bandRows;
  *nb = inBand / bandRows;
}

// The tiles of one CTA: cluster `cluster` of `numClusters` takes positions cluster,
// cluster + numClusters, ...; both CTAs of a cluster see the same phases and N-blocks. Tiles are
// numbered from 1 in the CTA's sequence (the consumers' and copy warps' counters count them).
// kNet: the across-nodes order (net_layout.h; its own kernel instantiation, so that the one-node
// kernel's registers are not spent on it).
template <bool kNet>
class ScheduleT {
 public:
  // L must outlive the schedule (on the device: the kernel's parameter, read in place).
  MKCCL_HD ScheduleT(const Layout& L, int rank, int cluster, int numClusters, int ctaRank)
      : L_(&L), rank_(rank), cluster_(cluster), stride_(numClusters), ctaRank_(ctaRank), n_(0) {}

  // Tiles of this CTA.
  MKCCL_HD int count() const { return countBelow(L_->ws * L_->clusterTiles); }

  // The phase of the CTA's n-th tile (0-based; n < count()): cheaper than at().
  MKCCL_HD int stepAt(int n) const {
    int step, v;
    locate(cluster_ + n * stride_, &step, &v);
    return step;
  }

  // The CTA's n-th tile (0-based); n < count().
  MKCCL_HD void at(int n, Tile& t) const {
    const Layout& L = *L_;
    int v;
    locate(cluster_ + n * stride_, &t.step, &v);
    int cr = 0;
    if (kNet) rasterTileNet(L, v, &cr, &t.nb);
    else rasterTile(L, v, &cr, &t.nb);
    t.mb = cr * L.cs + ctaRank_;
    t.chunk = L.chunkAt(rank_, t.step);
    t.u = v * L.cs + ctaRank_;
  }

  MKCCL_HD bool next(Tile& t) {
    if (n_ >= count()) return false;
    at(n_++, t);
    return true;
  }

 private:
  // Position p of the order -> (phase, cluster tile of the chunk). 32-bit: a 64-bit division is a
  // subroutine call, which the consumers' register budget cannot afford around their accumulators.
  MKCCL_HD void locate(int p, int* step, int* v) const {
    if (kNet) {
      locateNet(p, step, v);
      return;
    }
    const Layout& L = *L_;
    const int sends = L.ws - 1;  // >= 1: the one-node kernel runs on 2 ranks or more
    if (L.order == kOrderInterleaved && p < sends * L.clusterTiles) {
      *step = p % sends;
      *v = p / sends;
    } else {
      *step = p / L.clusterTiles;
      *v = p - *step * L.clusterTiles;
    }
  }
  // Across nodes the order is two such orders: every phase's tiles of the other nodes' sub-chunks
  // (cluster tiles [0, Vc - Vc/subs) of each chunk), then every phase's tiles of this node's. (A
  // function of its own: folded into locate, the one-node kernel's consumers spilled 4 bytes more.)
  MKCCL_HD void locateNet(int p, int* step, int* v) const {
    const Layout& L = *L_;
    int vc = L.clusterTiles, v0 = 0;
    const int foreign = L.clusterTiles - L.clusterTiles / L.subs;
    if (p < L.ws * foreign) {
      vc = foreign;
    } else {
      p -= L.ws * foreign;
      vc -= foreign;
      v0 = foreign;
    }
    const int sends = L.ws - 1;  // 0 across nodes of one rank each: every tile is final
    if (L.order == kOrderInterleaved && sends > 0 && p < sends * vc) {
      *step = p % sends;
      *v = v0 + p / sends;
    } else {
      *step = p / vc;
      *v = v0 + p - *step * vc;
    }
  }
  MKCCL_HD int countBelow(int p) const { return p > cluster_ ? (p - cluster_ + stride_ - 1) / stride_ : 0; }

  const Layout* L_;
  int rank_, cluster_, stride_, ctaRank_, n_;
};
using Schedule = ScheduleT<false>;
using NetSchedule = ScheduleT<true>;

}  // namespace rs
}  // namespace mkccl
