// GEMM+ReduceScatter across nodes, fused into the persistent kernel (gemm_rs.net=fused; off by
// default; run on one H200 on emulated nodes): where rows go, where node sums wait, the network window's
// slots and the flags. Host- and device-callable; every rank computes the same from the call's
// global arguments, the node count, the ranks per node and its node (tests/fused/gemm_rs_layout_test.cc).
//
// Ranks are numbered node by node: rank g = m * L + i is local rank i of node m (N nodes of L ranks),
// and its rows of C are [g R, (g + 1) R), R = M / (N L) (subRows). Local rank i of every node is
// the node's intermediate owner of the rows of the ranks (m', i), one sub-chunk per node m':
//   1. node level: the one-node protocol (layout.h) runs over the node's L ranks with local chunk
//      i made of the N sub-chunks (m', i) (Layout::aRow). Its final phase leaves at (m, i) node m's
//      sum of every sub-chunk (m', i), stored by the final tiles' TMA stores into the scratch's net
//      area (slot m', mbs * 128 rows of pitch N: subOffset). The order computes every phase's tiles
//      of the other nodes' sub-chunks first (layout.h: locate, rasterTile).
//   2. network: the push team copies each final tile of sub-chunk s != m into the window's out slot
//      s (rows clipped to R) and counts it (count slot s of this rank's flags); the copy that
//      completes the count puts out slot s into counterpart (s, i)'s in slot m, raising flag
//      kRsNetDataFlag there, once (s, i) said its window is free for this call (kRsNetReadyFlag,
//      raised to every counterpart by block 0 when the kernel starts). One put per node pair.
//   3. the node partials: rank (m, i) adds the N node sums of its own rows in node order 0..N-1 in
//      fp32 (sub-chunk m from the scratch once its count is complete, the others from the window's
//      in slots once arrived) and rounds once into C. Items of kNetAddRows rows are claimed from
//      the claim slot by warps of the push teams and the consumers once their tiles are done.
// Count and claim slots count from 0: the host clears them on the stream before the kernel.
// Flag values: dev::netFlagValue(call number).
#pragma once
#include <stdint.h>
#include "kernels/gemm_rs/layout.h"

namespace mkccl {
namespace rs {

// Arrival flags of the network (kernels/device/net.cuh: flag 0 is netBarrier's, AllGather+GEMM's
// are 64..128).
constexpr uint32_t kRsNetReadyFlag = 130;  // "my window's in slots are free for this call"
constexpr uint32_t kRsNetDataFlag = 131;   // "node m's sum of your rows is in your in slot m"
constexpr uint32_t kRsNetFlagsNeeded = 132;  // flagsPerPeer must exceed the last
constexpr int64_t kRsNetSlotAlign = 4096;
constexpr int kNetAddRows = 4;  // rows per item of the node partials' sum
constexpr int kMaxNetNodes = 64;  // count slots are in the flags area; a bound for the plan

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

// Tiles of one sub-chunk (the count that completes it).
MKCCL_HD int64_t netSubTiles(const Layout& L) { return int64_t(L.mbs) * L.nBlocks; }
// The sub-chunk of a tile's M-block.
MKCCL_HD int netSubOf(const Layout& L, int mb) { return mb / L.mbs; }

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
MKCCL_HD int64_t netPutBytes(const Layout& L, int64_t es) { return L.subRows * L.N * es; }

// This rank's flag slots (relative to kOpFlagSlot), after the one-node ones: count s, then claim.
MKCCL_HD int64_t netCountSlot(const Layout& L, int s) { return L.flagSlots() + s; }
MKCCL_HD int64_t netClaimSlot(const Layout& L) { return L.flagSlots() + L.subs; }
MKCCL_HD int64_t netFlagSlots(const Layout& L) { return L.flagSlots() + L.subs + 1; }
// Items of the node partials' sum.
MKCCL_HD int64_t netAddItems(const Layout& L) { return (L.subRows + kNetAddRows - 1) / kNetAddRows; }

}  // namespace rs
}  // namespace mkccl
