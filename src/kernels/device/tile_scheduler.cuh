// Persistent tile scheduler: which output tiles a compute CTA (or cluster) works on, in what order.
//
// Work is split into "cluster tiles": clusterM adjacent M-blocks sharing one N-block (the CTAs of
// a cluster share the W tile through TMA multicast). Cluster c of numClusters takes cluster tiles
// c, c + numClusters, ... of the linear order; both CTAs of a cluster therefore see the same
// sequence of N-blocks and k-loops, as multicast requires. A CTA whose M-block lies past the
// matrix still runs the tile (TMA zero-fills the loads and clips the stores).
//
// Linear order -> (cluster row, N-block): grouped rasterisation. Rows are taken in bands of
// `group` cluster rows; inside a band the order walks down the band first, then across N, so the
// tiles running at the same time share few A rows and few W columns in L2. `rowRotate` then
// rotates the rows (the band structure is kept): a fused op passes the first row it wants done
// (e.g. this rank's own rows in AllGather+GEMM), the plain GEMM passes 0.
#pragma once
#include <stdint.h>

#include "kernels/abi/hd.h"

namespace mkccl {
namespace dev {

struct TileSchedParams {
  int mBlocks, nBlocks;  // output tiles along M and N
  int clusterM;          // CTAs per cluster, along M (1 or 2)
  int group;             // band height in cluster rows (>= 1)
  int rowRotate;         // first cluster row of the order, in [0, clusterRows)
};

struct TileCoord {
  int m, n;  // M-block and N-block of this CTA's tile
};

class GroupedTileScheduler {
 public:
  MKCCL_HD GroupedTileScheduler(const TileSchedParams& p, int cluster, int numClusters,
                                                  int ctaRank)
      : p_(p), next_(cluster), stride_(numClusters), ctaRank_(ctaRank) {
    rows_ = (p.mBlocks + p.clusterM - 1) / p.clusterM;
    total_ = static_cast<int64_t>(rows_) * p.nBlocks;
  }

  // The next tile of this CTA; false when its share is done.
  MKCCL_HD bool next(TileCoord& t) {
    if (next_ >= total_) return false;
    const int64_t linear = next_;
    next_ += stride_;
    const int64_t band = static_cast<int64_t>(p_.group) * p_.nBlocks;
    const int firstRow = static_cast<int>(linear / band) * p_.group;
    const int inBand = static_cast<int>(linear - (linear / band) * band);
    const int bandRows = p_.group < rows_ - firstRow ? p_.group : rows_ - firstRow;
    int row = firstRow + inBand % bandRows;
    t.n = inBand / bandRows;
    row += p_.rowRotate;
    if (row >= rows_) row -= rows_;
    t.m = row * p_.clusterM + ctaRank_;
    return true;
  }

 private:
  TileSchedParams p_;
  int64_t next_, stride_, total_;
  int rows_, ctaRank_;
};

}  // namespace dev
}  // namespace mkccl

