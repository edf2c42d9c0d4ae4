// Grouped GEMM as an op of the engine (gemm_kernel.cuh): G independent problems that share K, N
// and the operand layouts, C_g = A_g . W_g^T, as MoE's expert GEMMs are. The groups' rows are
// stacked in A and C ("expert-major"): group g owns rows [rowOffsets[g], rowOffsets[g + 1]), each
// group padded to a multiple of 128 rows, so that no 128-row tile straddles two groups; its weights
// are rows [g * N, (g + 1) * N) of a row-stacked W[G * N, K]. The row offsets live in device memory
// and are read by the kernel (a dispatch kernel earlier on the stream may write them): no host
// synchronisation, so a grouped GEMM can follow a device-side routing inside a CUDA graph.
//
// Schedule: the linear order of all groups' tiles (group by group, each in grouped rasterisation:
// bands of `group` M-blocks walked down, then across N); CTA c of P takes tiles c, c + P, ... and
// walks the groups forward as it goes (each CTA reads the offsets it passes). Single CTAs only (a
// cluster's second M-block could lie in the next group).
#pragma once
#include <stdint.h>
#include "kernels/abi/hd.h"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_op.cuh"

namespace mkccl {

// The grouped GEMM's kernel parameter (host and device).
struct GroupedParams {
  const int* rowOffsets;  // [groups + 1] in device memory, non-decreasing multiples of 128
  int groups;
  int nBlocks;            // N-blocks of one group (ceil(N / BN))
  int bn;                 // tile width (BN)
  int band;               // raster band height in M-blocks
  int64_t N;              // columns of every group's C (rows of W_g)
  int64_t maxRows;        // rows of A and C, a multiple of 128 (offsets beyond it are clamped)
};

// A tile: its M-block in the stacked A / C, its N-block, and its group.
struct GroupTile {
  int m, n, g;
};

class GroupedScheduler {
 public:
  using Tile = GroupTile;
  template <class Params>
  __device__ __forceinline__ GroupedScheduler(const GemmArgs& g, const Params& p, int cluster, int numClusters, int)
      : p_(p.grouped), fault_(g.fault), next_(cluster), stride_(numClusters) {}

  __device__ __forceinline__ bool next(GroupTile& t) {
    // Advance to the group that holds linear tile next_ (groups only move forward).
    while (true) {
      if (g_ >= p_.groups) return false;
      if (!loaded_) {
        const int r0 = clampRows(p_.rowOffsets[g_]), r1 = clampRows(p_.rowOffsets[g_ + 1]);
        if (r0 % 128 != 0 || r1 % 128 != 0 || r1 < r0) {
          // Tiles would straddle groups (two groups writing the same rows of C): stop here, the
          // same way in every role of the CTA (they read the same offsets), and tell the host.
          if (fault_ != nullptr && threadIdx.x == 0) *reinterpret_cast<volatile int*>(fault_) = kGemmFaultGroupOffsets;
          g_ = p_.groups;
          return false;
        }
        firstBlock_ = r0 / 128;
        mBlocks_ = (r1 - r0) / 128;
        loaded_ = true;
      }
      const int64_t tiles = int64_t(mBlocks_) * p_.nBlocks;
      if (next_ < base_ + tiles) break;
      base_ += tiles;
      ++g_;
      loaded_ = false;
    }
    const int64_t linear = next_ - base_;
    next_ += stride_;
    const int64_t band = int64_t(p_.band) * p_.nBlocks;
    const int firstRow = static_cast<int>(linear / band) * p_.band;
    const int inBand = static_cast<int>(linear - (linear / band) * band);
    const int bandRows = p_.band < mBlocks_ - firstRow ? p_.band : mBlocks_ - firstRow;
    t.m = firstBlock_ + firstRow + inBand % bandRows;
    t.n = inBand / bandRows;
    t.g = g_;
    return true;
  }

 private:
  // An offset read from memory, kept inside [0, maxRows] whatever it holds (maxRows is a multiple of
  // 128: the host checks it).
  __device__ __forceinline__ int clampRows(int r) const {
    return r < 0 ? 0 : (r > p_.maxRows ? static_cast<int>(p_.maxRows) : r);
  }
  GroupedParams p_;
  int* fault_;
  int64_t next_, stride_;
  int64_t base_ = 0;  // linear index of group g_'s first tile
  int g_ = 0, firstBlock_ = 0, mBlocks_ = 0;
  bool loaded_ = false;
};

// A from the kernel's mapA at the tile's stacked M-block; W_g's rows follow the group.
template <class Cfg>
struct GroupedLoads {
  const CUtensorMap* mapA;
  int64_t N;
  template <class Params>
  __device__ __forceinline__ GroupedLoads(const GemmArgs&, const Params& p, const CUtensorMap* mapA_, uint32_t)
      : mapA(mapA_), N(p.grouped.N) {}
  __device__ __forceinline__ void prefetch() const { dev::tmaPrefetchMap(mapA); }
  __device__ __forceinline__ TileA a(const GroupTile& t) const { return {mapA, t.m * Cfg::BM}; }
  __device__ __forceinline__ int32_t bRow(const GroupTile& t) const {
    return static_cast<int32_t>(int64_t(t.g) * N + int64_t(t.n) * Cfg::BN);
  }
  __device__ __forceinline__ bool wait(const GroupTile&, int) const { return true; }
  __device__ __forceinline__ void issued() {}
  __device__ __forceinline__ void done() {}
};

struct GroupedGemmOp : GemmOpDefaults {
  struct Params {
    GroupedParams grouped;
  };
  using Scheduler = GroupedScheduler;
  template <class Cfg, class Op>
  using Loads = GroupedLoads<Cfg>;
};

}  // namespace mkccl
