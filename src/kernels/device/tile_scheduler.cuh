// Persistent tile scheduler: which output tiles a compute CTA (or cluster) works on, in what order.
//
// Work is split into "cluster tiles": clusterM adjacent M-blocks by clusterN adjacent N-blocks
// (the CTAs of a cluster with one N-block share its W tile through TMA multicast, those with one
// M-block its A tile). A CTA's rank in its cluster is rm + clusterM * rn: M-block row*clusterM + rm,
// N-block col*clusterN + rn. Cluster c of numClusters takes cluster tiles c, c + numClusters, ...
// of the linear order; every CTA of a cluster therefore sees the same sequence of cluster tiles
// and k-loops, as multicast requires. A CTA whose M-block or N-block lies past the matrix still
// runs the tile (TMA zero-fills the loads and clips the stores).
//
// Linear order -> (cluster row, cluster column): grouped rasterisation. Rows are taken in bands of
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
  int clusterM;          // CTAs per cluster along M, sharing the W tile (1 or 2)
  int group;             // band height in cluster rows (>= 1)
  int rowRotate;         // first cluster row of the order, in [0, clusterRows)
  int clusterN = 1;      // CTAs per cluster along N, sharing the A tile (1, 2 or 4; 0 reads as 1)
};

struct TileCoord {
  int m, n;  // M-block and N-block of this CTA's tile
};

class GroupedTileScheduler {
 public:
  MKCCL_HD GroupedTileScheduler(const TileSchedParams& p, int cluster, int numClusters,
                                                  int ctaRank)
      : p_(p), next_(cluster), stride_(numClusters) {
    const int cn = p.clusterN > 1 ? p.clusterN : 1;
    rm_ = ctaRank % p.clusterM;
    rn_ = ctaRank / p.clusterM;
    rows_ = (p.mBlocks + p.clusterM - 1) / p.clusterM;
    cols_ = (p.nBlocks + cn - 1) / cn;
    cn_ = cn;
    total_ = static_cast<int64_t>(rows_) * cols_;
  }

  // The next tile of this CTA; false when its share is done.
  MKCCL_HD bool next(TileCoord& t) {
    if (next_ >= total_) return false;
    const int64_t linear = next_;
    next_ += stride_;
    const int64_t band = static_cast<int64_t>(p_.group) * cols_;
    const int firstRow = static_cast<int>(linear / band) * p_.group;
    const int inBand = static_cast<int>(linear - (linear / band) * band);
    const int bandRows = p_.group < rows_ - firstRow ? p_.group : rows_ - firstRow;
    int row = firstRow + inBand % bandRows;
    t.n = (inBand / bandRows) * cn_ + rn_;
    row += p_.rowRotate;
    if (row >= rows_) row -= rows_;
    t.m = row * p_.clusterM + rm_;
    return true;
  }

 private:
  TileSchedParams p_;
  int64_t next_, stride_, total_;
  int rows_, cols_, cn_, rm_, rn_;
};

}  // namespace dev
}  // namespace mkccl

