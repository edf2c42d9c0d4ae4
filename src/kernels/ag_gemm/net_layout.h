// AllGather+GEMM across nodes: how a shard crosses the network (net.cuh runs it). Derived from the
// call's global arguments and the window size only, so every rank computes the same plan.
//
// Hierarchical: rank (n, i) (local rank i of node n) puts its shard, piece by piece, into the
// network window of its counterpart (n', i) in every other node; (n', i) spreads each piece that
// arrives over NVLink into the gathered-A region of every rank of its node (its own included),
// adding to the same chunk counters a local push adds to. So each shard crosses each node pair
// once, and the GEMM's producers wait for remote rows exactly as for local ones.
//
// Window (the same on every rank): slot n (slotBytes each) holds node n's shard: the own node's
// slot is what this rank puts (its own shard, copied there by the kernel), slot n' != node what
// the counterpart of node n' put here. A put goes from slot[node] to the same offset of the
// counterpart's window. Pieces are whole chunks (pieceRows a multiple of chunkRows), so a piece's
// slices add up to whole chunk counts exactly as a push's claims do.
//
// Arrival flags (kernels/device/net.cuh; values netFlagValue(call number)): kNetReadyFlag, "my
// window slots are free for this call" (raised when the kernel starts: every earlier reader of the
// window is an earlier kernel of this rank's stream), and kNetPieceFlag + p, "piece p is here".
#pragma once
#include <stdint.h>
#include "kernels/ag_gemm/layout.h"

namespace mkccl {
namespace ag {

constexpr uint32_t kNetReadyFlag = 64;                // after the collectives' flags (1, 2)
constexpr uint32_t kNetPieceFlag = 65;                // + piece
constexpr int kMaxNetPieces = 64;                     // flags [65, 129)
constexpr int64_t kMinNetPieceBytes = 512 << 10;      // a put is a TCP send or an RDMA write: not tiny
constexpr int64_t kNetSlotAlign = 4096;

struct NetLayout {
  int nodes = 1, node = 0;  // nodes, this rank's node
  int pieceLog2 = 0;        // rows per piece = 1 << pieceLog2 (>= chunkRows)
  int nPieces = 0;          // pieces per shard
  int64_t slotBytes = 0;    // window bytes per node

  MKCCL_HD int pieceRows() const { return 1 << pieceLog2; }
  MKCCL_HD int pieceRowBegin(int p) const { return p << pieceLog2; }
  MKCCL_HD int pieceRowEnd(int p, const Layout& L) const { return minI((p + 1) << pieceLog2, L.m); }
  MKCCL_HD int64_t slotOff(int n) const { return static_cast<int64_t>(n) * slotBytes; }
  // Slices [g0, g1) of piece p (pieces are whole chunks, chunks whole slices).
  MKCCL_HD int sliceBegin(int p, const Layout& L) const { return p << (pieceLog2 - L.sliceLog2); }
  MKCCL_HD int sliceEnd(int p, const Layout& L) const { return minI((p + 1) << (pieceLog2 - L.sliceLog2), L.nSlices); }
};

// The plan of a call on `nodes` nodes with a window of windowBytes: pieces of whole chunks, at
// least minPieceBytes each (the tuner's ag_gemm.net_piece_kib; kMinNetPieceBytes by default) and
// at most kMaxNetPieces of them. False when the window cannot hold one shard per node (the caller
// says so: raise MKCCL_NET_BUFFER_BYTES).
MKCCL_HD bool netLayoutFor(const Layout& L, int nodes, int node, uint64_t windowBytes, NetLayout* out,
                           int64_t minPieceBytes = kMinNetPieceBytes) {
  NetLayout n;
  n.nodes = nodes;
  n.node = node;
  if (minPieceBytes < 1) minPieceBytes = 1;
  int p = maxI(L.chunkLog2, log2Ceil((minPieceBytes + L.rowBytes - 1) / L.rowBytes));
  while ((static_cast<int64_t>(L.m) + (int64_t{1} << p) - 1) >> p > kMaxNetPieces) ++p;
  n.pieceLog2 = p;
  n.nPieces = static_cast<int>((static_cast<int64_t>(L.m) + (int64_t{1} << p) - 1) >> p);
  n.slotBytes = (L.shardBytes() + kNetSlotAlign - 1) / kNetSlotAlign * kNetSlotAlign;
  *out = n;
  return nodes >= 2 && n.nPieces >= 1 && n.nPieces <= kMaxNetPieces &&
         static_cast<uint64_t>(n.slotBytes) * static_cast<uint64_t>(nodes) <= windowBytes;
}

}  // namespace ag
}  // namespace mkccl
