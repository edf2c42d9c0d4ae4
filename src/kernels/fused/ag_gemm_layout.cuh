// AllGather+GEMM: how a call's data and flags are laid out. Everything here derives from the
// call's global arguments (M, K, world size) and the flags region's size only, so every rank
// computes the same layout whatever its SM count, plan or CTA budget (a receiver counts what a
// sender pushes without ever asking it).
//
// Data: each rank's symmetric scratch region holds the gathered A, [M, K] row-major; rank q's
// shard is rows [q*m, (q+1)*m) (m = M / ws). Rank q pushes its shard into every peer's region at
// those rows.
//
// Units of work and arrival:
//   slice  sliceBytes (>= 64 KiB) of a shard's bytes (the shard is contiguous: row pitch is K):
//          what a push worker claims, copies to every receiver and then reports;
//   chunk  chunkRows rows (a multiple of the 128-row A tile) of a shard: what a tile waits for.
// The receiver keeps one counter per (sender, chunk) in its flags region. At the start of a call
// it sets them to F = flagValue(seq, 0) (any value of an earlier call is smaller); every slice a
// sender lands adds, per chunk it touches, 1 (red.release.sys). The chunk is complete when its
// counter reaches F + slicesOfChunk(c). Slices may straddle chunks; the formulas below count both
// sides the same way.
//
// Flags slots (this rank's flags region, from kOpFlagSlot):
//   +0            push work queue (claim counter, see ag_gemm_push.cuh)
//   +1            gather-out work queue
//   +2 + q*nChunks + c   arrival counter of sender q's chunk c
#pragma once
#include <stdint.h>
#include "runtime/devcomm.h"

#if defined(__CUDACC__)
#define MKCCL_AG_HD __host__ __device__ __forceinline__
#else
#define MKCCL_AG_HD inline
#endif

namespace mkccl {
namespace ag {

constexpr int64_t kTileRows = 128;              // rows of an A tile (GemmCfg::BM)
constexpr int64_t kMinSliceBytes = 64 << 10;    // small enough to spread a shard over ~all SMs
// Claim counters run from flagValue(seq, 0) to at most + (ws - 1) * slices + claims in flight:
// kept below 2^20 so they never reach the next call's values.
constexpr int64_t kMaxSlicesPerShard = 1 << 15;

MKCCL_AG_HD int64_t minI64(int64_t a, int64_t b) { return a < b ? a : b; }
MKCCL_AG_HD int64_t maxI64(int64_t a, int64_t b) { return a > b ? a : b; }
MKCCL_AG_HD int64_t ceilDivI64(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Layout {
  int ws = 1, me = 0;      // ranks (all in one node: rank == local rank), this rank
  int64_t M = 0, m = 0;    // rows in all, rows per rank
  int64_t rowBytes = 0;    // K * element size (a multiple of 16)
  int64_t chunkRows = 0;   // rows per chunk, a multiple of kTileRows
  int64_t nChunks = 0;     // chunks per shard
  int64_t sliceBytes = 0;  // a multiple of 16
  int64_t nSlices = 0;     // slices per shard
  int64_t flagBase = 0;    // first flags slot used

  MKCCL_AG_HD int64_t shardBytes() const { return m * rowBytes; }
  MKCCL_AG_HD int64_t chunkBytes() const { return chunkRows * rowBytes; }

  MKCCL_AG_HD int64_t pushClaimSlot() const { return flagBase; }
  MKCCL_AG_HD int64_t gatherClaimSlot() const { return flagBase + 1; }
  MKCCL_AG_HD int64_t chunkSlot(int q, int64_t c) const { return flagBase + 2 + q * nChunks + c; }
  MKCCL_AG_HD int64_t firstChunkSlot() const { return flagBase + 2; }
  MKCCL_AG_HD int64_t slotsUsed() const { return 2 + ws * nChunks; }

  // Slices [first, last] that touch chunk c.
  MKCCL_AG_HD int64_t chunkFirstSlice(int64_t c) const { return c * chunkBytes() / sliceBytes; }
  MKCCL_AG_HD int64_t chunkLastSlice(int64_t c) const {
    return (minI64((c + 1) * chunkBytes(), shardBytes()) - 1) / sliceBytes;
  }
  MKCCL_AG_HD int64_t slicesOfChunk(int64_t c) const { return chunkLastSlice(c) - chunkFirstSlice(c) + 1; }

  // Byte range of slices [g0, g1) in a shard, and the chunks it touches.
  MKCCL_AG_HD int64_t sliceBegin(int64_t g) const { return g * sliceBytes; }
  MKCCL_AG_HD int64_t sliceEnd(int64_t g) const { return minI64((g + 1) * sliceBytes, shardBytes()); }
  MKCCL_AG_HD int64_t chunkOfByte(int64_t b) const { return b / chunkBytes(); }
  // How many of the slices [g0, g1) touch chunk c.
  MKCCL_AG_HD int64_t slicesIn(int64_t c, int64_t g0, int64_t g1) const {
    const int64_t n = minI64(g1 - 1, chunkLastSlice(c)) - maxI64(g0, chunkFirstSlice(c)) + 1;
    return n > 0 ? n : 0;
  }

  // The 128-row tile at M-block mb lies wholly inside this rank's shard (the producer then loads
  // it straight from the user's A).
  MKCCL_AG_HD bool ownBlock(int64_t mb) const {
    const int64_t r0 = mb * kTileRows;
    if (r0 >= M) return false;
    const int64_t r1 = minI64(r0 + kTileRows, M);
    return r0 >= me * m && r1 <= (me + 1) * m;
  }
};

// The layout of a call. flagSlots: 64-bit slots of the flags region from kOpFlagSlot on.
// False when the flags region cannot hold even one chunk per rank (never with the 1 MiB region).
MKCCL_AG_HD bool layoutFor(int64_t M, int64_t K, int64_t elemBytes, int ws, int me, int64_t flagSlots, Layout* out) {
  Layout L;
  L.ws = ws;
  L.me = me;
  L.M = M;
  L.m = M / ws;
  L.rowBytes = K * elemBytes;
  const int64_t shard = L.shardBytes();
  int64_t s = ceilDivI64(shard, kMaxSlicesPerShard);
  s = (s + 15) / 16 * 16;
  L.sliceBytes = maxI64(kMinSliceBytes, s);
  L.nSlices = maxI64(1, ceilDivI64(shard, L.sliceBytes));
  L.chunkRows = kTileRows;
  while (2 + ws * ceilDivI64(L.m, L.chunkRows) > flagSlots && L.chunkRows < L.m) L.chunkRows *= 2;
  L.nChunks = maxI64(1, ceilDivI64(L.m, L.chunkRows));
  L.flagBase = kOpFlagSlot;
  *out = L;
  return L.slotsUsed() <= flagSlots && L.m >= 1;
}

}  // namespace ag
}  // namespace mkccl
