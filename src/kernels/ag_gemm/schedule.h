// AllGather+GEMM tile order: this rank's own rows first (they need no communication), then peers'
// rows in the order they arrive. Every sender pushes its shard front to back to all receivers at
// once, so chunk c of every peer lands at about the same time: after the own rows come chunk 0 of
// peers me+1, me+2, ..., then chunk 1 of each, and so on. The ce plan along the ring
// (ag_gemm.ce=ring) brings chunk c of rank me-1 first, then of me-2 one hop later, ...: the
// peers of a chunk come in that order instead.
//
// Same contract as dev::GroupedTileScheduler (persistent, "cluster tiles" of clusterM M-blocks,
// bands of `group` cluster rows walked down the band first for L2 reuse, cluster c of numClusters
// takes linear tiles c, c + numClusters, ...; both CTAs of a cluster see the same N-blocks in the
// same order), with the cluster rows permuted by rowAt(). The own rows form bands of their own:
// a band that mixed them with peers' rows would make the very first wave wait for peers' data
// (its tiles walk down every row of the band at once).
//
// Across nodes (nodeRanks > 0: nodes of nodeRanks ranks, rank = node * nodeRanks + local rank) the
// peers of this node come first, interleaved by chunk as above (their pushes start at once), then
// the other nodes' ranks, interleaved by chunk too (they cross the network first): for each node
// after this one, the counterpart (whose shard this rank spreads itself) and then its neighbours.
//
// The arrival order needs shards made of whole cluster rows (m a multiple of 128 * clusterM); for
// other shapes the rows are simply rotated to start at this rank's first row (correct either way:
// the producer waits for whatever a tile needs).
#pragma once
#include <stdint.h>
#include "kernels/device/tile_scheduler.cuh"
#include "kernels/ag_gemm/layout.h"

namespace mkccl {
namespace ag {

struct TileOrder {
  int me = 0, ws = 1;
  int rowsPerRank = 0;  // > 0: cluster rows per shard (arrival order); 0: rotation from firstRow
  int firstRow = 0;
  int ring = 0;         // peers of a chunk in ring order (me-1, me-2, ...) instead of me+1, me+2, ...
  int nodeRanks = 0;    // > 0: nodes of this many ranks (node-major rank numbers): this node's first
};

// The order for a layout and a cluster size. nodeRanks > 0: the communicator spans nodes of that
// many ranks, numbered node by node (otherwise pass 0: the rotation below is used across nodes).
MKCCL_HD TileOrder tileOrderFor(const Layout& L, int clusterM, bool ring = false, int nodeRanks = 0) {
  TileOrder o;
  o.me = L.me;
  o.ws = L.ws;
  o.ring = ring ? 1 : 0;
  o.nodeRanks = nodeRanks > 0 && nodeRanks < L.ws && L.ws % nodeRanks == 0 ? nodeRanks : 0;
  const int64_t unit = kTileRows * clusterM;
  if (L.ws > 1 && L.m % unit == 0) {
    o.rowsPerRank = static_cast<int>(L.m / unit);
  } else {
    o.firstRow = static_cast<int>(L.me * L.m / kTileRows / clusterM);
  }
  return o;
}

class TileScheduler {
 public:
  MKCCL_HD TileScheduler(const dev::TileSchedParams& p, const TileOrder& o, int cluster, int numClusters,
                            int ctaRank)
      : p_(p), o_(o), next_(cluster), stride_(numClusters), ctaRank_(ctaRank) {
    rows_ = (p.mBlocks + p.clusterM - 1) / p.clusterM;
    total_ = static_cast<int64_t>(rows_) * p.nBlocks;
    own_ = o.rowsPerRank < rows_ ? o.rowsPerRank : rows_;
  }

  MKCCL_HD bool next(dev::TileCoord& t) {
    if (next_ >= total_) return false;
    int64_t linear = next_;
    next_ += stride_;
    // Positions [0, own_) (this rank's rows), then [own_, rows_), each cut into bands.
    int first = 0, end = own_;
    const int64_t ownTiles = static_cast<int64_t>(own_) * p_.nBlocks;
    if (linear >= ownTiles) {
      linear -= ownTiles;
      first = own_;
      end = rows_;
    }
    const int64_t band = static_cast<int64_t>(p_.group) * p_.nBlocks;
    const int firstPos = first + static_cast<int>(linear / band) * p_.group;
    const int inBand = static_cast<int>(linear - (linear / band) * band);
    const int bandRows = p_.group < end - firstPos ? p_.group : end - firstPos;
    t.n = inBand / bandRows;
    t.m = rowAt(firstPos + inBand % bandRows) * p_.clusterM + ctaRank_;
    return true;
  }

  // Cluster row at position k of the order.
  MKCCL_HD int rowAt(int k) const {
    const int r = o_.rowsPerRank;
    if (r > 0) {
      if (k < r) return o_.me * r + k;
      const int k2 = k - r;
      if (o_.nodeRanks > 0) return nodeRowAt(k2);
      const int peers = o_.ws - 1;
      const int chunk = k2 / peers;
      int q = o_.ring ? o_.me - 1 - k2 % peers : o_.me + 1 + k2 % peers;
      if (q >= o_.ws) q -= o_.ws;
      if (q < 0) q += o_.ws;
      return q * r + chunk;
    }
    const int row = k + o_.firstRow;
    return row >= rows_ ? row - rows_ : row;
  }

  // Across nodes: position k2 after the own rows (rowsPerRank > 0).
  MKCCL_HD int nodeRowAt(int k2) const {
    const int r = o_.rowsPerRank, n = o_.nodeRanks, node = o_.me / n, lme = o_.me - node * n;
    const int near = n - 1, nodes = o_.ws / n;
    if (k2 < near * r) {
      const int j = k2 % near;
      return (node * n + (lme + 1 + j) % n) * r + k2 / near;
    }
    const int k3 = k2 - near * r, far = o_.ws - n, j = k3 % far;
    const int m = (node + 1 + j / n) % nodes, i = (lme + j % n) % n;
    return (m * n + i) * r + k3 / far;
  }

 private:
  dev::TileSchedParams p_;
  TileOrder o_;
  int64_t next_, stride_, total_;
  int rows_, own_, ctaRank_;
};

}  // namespace ag
}  // namespace mkccl
