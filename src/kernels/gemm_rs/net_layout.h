// GEMM+ReduceScatter across nodes, fused into the persistent kernel (gemm_rs.net=fused; off by
// default): where rows go, where node sums wait, the network window's slots and the flags. Host-
// and device-callable; every rank computes the same from the call's global arguments, the node
// count, the ranks per node and its node (CPU: tests/fused/gemm_rs_net_layout_test.cc).
//
// Ranks are numbered node by node: rank g = m * L + i is local rank i of node m (N nodes of L ranks),
// and its rows of C are [g R, (g + 1) R), R = M / (N L) (subRows). Local rank i of every node is
// the node's intermediate owner of the rows of the ranks (m', i), one sub-chunk per node m':
//   1. node level: the one-node protocol (layout.h) runs over the node's L ranks with local chunk
//      i made of the N sub-chunks (m', i) (Layout::aRow). Its final phase leaves at (m, i) node m's
//      sum of every sub-chunk (m', i), stored by the final tiles' TMA stores into the scratch's net
//      area (slot m', mbs * 128 rows of pitch N: subOffset). The order computes every phase's tiles
//      of the other nodes' sub-chunks first, M-block by M-block (layout.h: locate, rasterTileNet).
//   2. network, by pieces: piece p of a sub-chunk is its M-block p, rows [128 p, 128 (p + 1))
//      clipped to R (netPieces; a padding M-block of a cluster has no rows and no piece). The push
//      team copies each final tile of sub-chunk s != m into the window's out slot s and counts it
//      in its M-block's count; the copy that completes an M-block's nBlocks tiles puts that piece
//      into counterpart (s, i)'s in slot m (the same offset), raising flag netDataFlag(p) there,
//      once (s, i) said its window is free for this call (kRsNetReadyFlag, raised to every
//      counterpart by block 0 when the kernel starts). So the network starts after the first
//      foreign M-block instead of after the whole foreign sub-chunk.
//   3. the node partials: rank (m, i) adds the N node sums of its own rows in node order 0..N-1 in
//      fp32 (sub-chunk m from the scratch once its M-block's count is complete, the others from the
//      window's in slots once their piece arrived) and rounds once into C. Items of kNetAddRows
//      rows (inside one piece) are claimed from the claim slot by warps of the push teams and the
//      consumers once their tiles are done; each waits for just its piece.
// Count and claim slots count from 0: the host clears them on the stream before the kernel.
// Flag values: dev::netFlagValue(call number). Flags per sender are a fixed budget (flagsPerPeer,
// 4096: the FIFO header's 12 bits): the plan refuses a shape whose pieces do not fit
// (netFlagsNeeded), and the sequential route runs it.
#pragma once
#include <stdint.h>
#include "kernels/gemm_rs/layout.h"

namespace mkccl {
namespace rs {

// Arrival flags of the network (kernels/device/net.cuh: flag 0 is netBarrier's, the collectives'
// are 1 and 2, AllGather+GEMM's 64..128).
constexpr uint32_t kRsNetReadyFlag = 130;  // "my window's in slots are free for this call"
constexpr uint32_t kRsNetDataFlag = 131;   // + piece p: "node m's sum of your rows' piece p is in
                                           // your in slot m"
constexpr int64_t kRsNetSlotAlign = 4096;
constexpr int kNetAddRows = 4;  // rows per item of the node partials' sum
static_assert(kTileRows % kNetAddRows == 0, "an item of the node sum lies in one piece");
constexpr int kMaxNetNodes = 64;  // a bound for the plan

// Turns a one-node layout of the node's ws ranks into the across-nodes one (fields above `subs`
// in Layout). M: the call's rows (all nodes).
MKCCL_HD void applyNetLayout(Layout* L, int nodes, int node, int64_t M) {
  L->subs = nodes;
  L->node = node;
  L->subRows = M / (int64_t(nodes) * L->ws);
  L->chunkRows = L->subRows;  // unused across nodes (aRow), kept meaningful
  const int64_t clusterRows = int64_t(kTileRows) * L->cs;
  L->mbs = int(ceilDiv(max64(L->subRows, 1), clusterRows) * L->cs);
  L->mbc = nodes * L->mbs;
  L->tiles = L->mbc * L->nBlocks;
  L->clusterTiles = L->tiles / L->cs;
}

// The sub-chunk of a tile's M-block (of the chunk, [0, mbc)), and its piece there.
MKCCL_HD int netSubOf(const Layout& L, int mb) { return mb / L.mbs; }
MKCCL_HD int netPieceOf(const Layout& L, int mb) { return mb - (mb / L.mbs) * L.mbs; }
// Tiles of one M-block: the count that completes its piece.
MKCCL_HD int netBlockTiles(const Layout& L) { return L.nBlocks; }

// Pieces of a sub-chunk: its M-blocks that hold rows (piece p = M-block p of the sub-chunk).
MKCCL_HD int netPieces(const Layout& L) { return int(ceilDiv(L.subRows, kTileRows)); }
MKCCL_HD int netPieceRows(const Layout& L, int p) {
  return int(max64(0, min64(kTileRows, L.subRows - int64_t(p) * kTileRows)));
}
// The piece a row of a sub-chunk lies in.
MKCCL_HD int netPieceOfRow(int64_t row) { return int(row / kTileRows); }
// A piece's bytes inside an out / in slot (rows of pitch N: a contiguous run), and its length.
MKCCL_HD int64_t netPieceOffset(const Layout& L, int p, int64_t es) { return int64_t(p) * kTileRows * L.N * es; }
MKCCL_HD int64_t netPieceBytes(const Layout& L, int p, int64_t es) { return netPieceRows(L, p) * L.N * es; }
// Its arrival flag, and the flags per sender a call needs (flagsPerPeer must be at least that).
MKCCL_HD uint32_t netDataFlag(int p) { return kRsNetDataFlag + uint32_t(p); }
MKCCL_HD int64_t netFlagsNeeded(const Layout& L) { return int64_t(kRsNetDataFlag) + netPieces(L); }

// The scratch's net area: after the one-node scratch, one slot per node, mbs * 128 rows of N
// elements of es bytes (the final tiles' TMA stores: row r of the area is row r of the map).
MKCCL_HD int64_t netAreaOffset(const Layout& L) { return (L.scratchBytes() + 255) / 256 * 256; }
MKCCL_HD int64_t netAreaRows(const Layout& L) { return int64_t(L.subs) * L.mbs * kTileRows; }
MKCCL_HD int64_t netSubOffset(const Layout& L, int s, int64_t es) {
  return int64_t(s) * L.mbs * kTileRows * L.N * es;
}
MKCCL_HD int64_t netScratchBytes(const Layout& L, int64_t es) {
  return netAreaOffset(L) + netAreaRows(L) * L.N * es;
}

// The window: out slots [0, subs), in slots [subs, 2 subs), slotBytes each.
MKCCL_HD int64_t netSlotBytes(const Layout& L, int64_t es) {
  return (L.subRows * L.N * es + kRsNetSlotAlign - 1) / kRsNetSlotAlign * kRsNetSlotAlign;
}
MKCCL_HD int64_t netOutOffset(const Layout& L, int s, int64_t es) { return int64_t(s) * netSlotBytes(L, es); }
MKCCL_HD int64_t netInOffset(const Layout& L, int m, int64_t es) {
  return int64_t(L.subs + m) * netSlotBytes(L, es);
}
MKCCL_HD int64_t netWindowBytes(const Layout& L, int64_t es) { return 2 * int64_t(L.subs) * netSlotBytes(L, es); }
// Bytes put to one counterpart per call (all pieces of a sub-chunk).
MKCCL_HD int64_t netPutBytes(const Layout& L, int64_t es) { return L.subRows * L.N * es; }

// This rank's flag slots (relative to kOpFlagSlot), after the one-node ones: a count per M-block of
// the chunk (sub-chunk s's M-block j at s * mbs + j), then the claim.
MKCCL_HD int64_t netCountSlot(const Layout& L, int mb) { return L.flagSlots() + mb; }
MKCCL_HD int64_t netClaimSlot(const Layout& L) { return L.flagSlots() + L.mbc; }
MKCCL_HD int64_t netFlagSlots(const Layout& L) { return L.flagSlots() + L.mbc + 1; }
// Items of the node partials' sum; item k's rows are [k kNetAddRows, ...) of the sub-chunk.
MKCCL_HD int64_t netAddItems(const Layout& L) { return (L.subRows + kNetAddRows - 1) / kNetAddRows; }
MKCCL_HD int netPieceOfItem(int64_t item) { return netPieceOfRow(item * kNetAddRows); }

}  // namespace rs
}  // namespace mkccl
