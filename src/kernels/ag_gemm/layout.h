// AllGather+GEMM: how a call's data and counters are laid out. Everything here derives from the
// call's global arguments (M, K, world size) only, so every rank computes the same layout
// whatever its SM count, plan or CTA budget (a receiver counts what a sender pushes without ever
// asking it).
//
// Data: each rank's symmetric scratch region holds the gathered A, [M, K] row-major; rank q's
// shard is rows [q*m, (q+1)*m) (m = M / ws). Rank q pushes its shard into every peer's region at
// those rows.
//
// Units, in rows of a shard (powers of two, so that the device divides by shifting):
//   slice  sliceRows rows (>= 64 KiB where K allows): what a push worker claims, copies to every
//          receiver and then reports;
//   chunk  chunkRows rows, a multiple of the 128-row A tile and of sliceRows: what a tile waits
//          for. Slices never straddle chunks.
// The receiver keeps one counter per (sender, chunk). At the start of a call it sets them to
// F = flagValue(seq, 0) (any value of an earlier call is smaller); a sender adds, for each chunk,
// the number of its slices it has landed (red.release.sys). The chunk is complete when its
// counter reaches F + slicesOfChunk(c). Under the ce plan the base is 0 instead of F and the copy
// engines write the complete value (PushArgs::counterBase: their values are constants that a
// graph replay repeats).
//
// Counters live after the gathered A in the same symmetric region (64-bit slots from
// countersOffset), not in the communicator's flags region: only this op ever writes there, so no
// late flag write of another op's earlier call can lower a counter after the call reset it.
//   slot 0                  push work queue (claim counter, see push.cuh)
//   slot 1                  gather-out work queue
//   slot 2 + q*nChunks + c  arrival counter of sender q's chunk c
//   then two more work queues, used across nodes only (net.cuh): pieces of the own shard to put on
//   the network, and pieces that arrived to spread over NVLink
//
// fp8 block scales (mkcclAllGatherGemmFp8 with mkcclFp8ScaleBlock; scaleRowBytes > 0): after the
// counters, the scale area holds the gathered A's scale rows, [M][ceil(K/128)] fp32 (rank q's
// rows at q*m, as its rows). Its rows travel with the data rows, under the same chunk counters: a
// sender stores a slice's scale rows before the fence and the counter adds that publish the slice
// (push.cuh; the ce plan copies them before its counter writes), so a chunk counted complete has
// its scales here too.
//
// Across nodes, ws and me are the communicator's (shard q is global rank q's); the NVLink pushes
// go to the ranks of this node (PushArgs::lws / lme).
#pragma once
#include <stdint.h>
#include "kernels/abi/devcomm.h"
#include "kernels/abi/hd.h"

namespace mkccl {
namespace ag {

constexpr int kTileRows = 128;                 // rows of an A tile (GemmCfg::BM)
constexpr int kTileRowsLog2 = 7;
constexpr int64_t kMinSliceBytes = 64 << 10;   // small enough to spread a shard over ~all SMs
// Claim counters run from flagValue(seq, 0) up to (ws - 1) * slices + claims in flight: kept
// below 2^20 so that they never reach the next call's values.
constexpr int kMaxSlicesPerShard = 1 << 15;


struct Layout {
  int ws = 1, me = 0;       // ranks (shards) and this rank, in the communicator
  int64_t M = 0;            // rows in all (< 2^31)
  int m = 0;                // rows per rank
  int64_t rowBytes = 0;     // K * element size (a multiple of 16)
  int chunkLog2 = 0;        // chunkRows = 1 << chunkLog2 (>= 128)
  int sliceLog2 = 0;        // sliceRows = 1 << sliceLog2 (<= chunkRows)
  int nChunks = 0;          // chunks per shard
  int nSlices = 0;          // slices per shard
  int64_t scaleRowBytes = 0;  // fp8 block scales: bytes of one row's scales (4 ceil(K/128)); else 0

  MKCCL_HD int chunkRows() const { return 1 << chunkLog2; }
  MKCCL_HD int sliceRows() const { return 1 << sliceLog2; }
  MKCCL_HD int slicesPerChunk() const { return 1 << (chunkLog2 - sliceLog2); }
  MKCCL_HD int64_t shardBytes() const { return static_cast<int64_t>(m) * rowBytes; }

  // The counters: byte offset in the region, and slots from there.
  MKCCL_HD int64_t countersOffset() const { return (M * rowBytes + 255) / 256 * 256; }
  MKCCL_HD int64_t countersEnd() const { return countersOffset() + static_cast<int64_t>(slotsUsed()) * 8; }
  // The scale area (scaleRowBytes > 0), and where it starts seen from the counters (the device
  // reaches a rank's area through its counters pointer, which is the region's in every mode).
  MKCCL_HD int64_t scalesOffset() const { return (countersEnd() + 255) / 256 * 256; }
  MKCCL_HD int64_t scalesFromCounters() const { return scalesOffset() - countersOffset(); }
  MKCCL_HD int64_t regionBytes() const {
    return scaleRowBytes > 0 ? scalesOffset() + M * scaleRowBytes : countersEnd();
  }
  MKCCL_HD int pushClaimSlot() const { return 0; }
  MKCCL_HD int gatherClaimSlot() const { return 1; }
  MKCCL_HD int chunkSlot(int q, int c) const { return 2 + q * nChunks + c; }
  MKCCL_HD int netSendClaimSlot() const { return 2 + ws * nChunks; }
  MKCCL_HD int netSpreadClaimSlot() const { return 3 + ws * nChunks; }
  MKCCL_HD int slotsUsed() const { return 4 + ws * nChunks; }

  // Shard rows [begin, end) of slice g; its chunk.
  MKCCL_HD int sliceRowBegin(int g) const { return g << sliceLog2; }
  MKCCL_HD int sliceRowEnd(int g) const { return minI((g + 1) << sliceLog2, m); }
  MKCCL_HD int chunkOfSlice(int g) const { return g >> (chunkLog2 - sliceLog2); }
  MKCCL_HD int chunkOfRow(int row) const { return row >> chunkLog2; }
  // Slices of chunk c (the last chunk may have fewer), and how many of slices [g0, g1) it holds.
  MKCCL_HD int slicesOfChunk(int c) const { return minI(slicesPerChunk(), nSlices - c * slicesPerChunk()); }
  MKCCL_HD int slicesIn(int c, int g0, int g1) const {
    const int n = minI(g1, (c + 1) * slicesPerChunk()) - maxI(g0, c * slicesPerChunk());
    return n > 0 ? n : 0;
  }

  // The 128-row tile at M-block mb lies wholly inside this rank's shard (the producer then loads
  // it straight from the user's A).
  MKCCL_HD bool ownBlock(int mb) const {
    const int64_t r0 = static_cast<int64_t>(mb) * kTileRows;
    if (r0 >= M) return false;
    const int64_t r1 = min64(r0 + kTileRows, M);
    return r0 >= static_cast<int64_t>(me) * m && r1 <= static_cast<int64_t>(me + 1) * m;
  }
};

MKCCL_HD int log2Ceil(int64_t v) {
  int l = 0;
  while ((int64_t{1} << l) < v) ++l;
  return l;
}

// The layout of a call (M < 2^31, M % ws == 0). False for a shape it cannot describe.
// scaleRowBytes: fp8 block scales' bytes per row (the scale area), else 0.
MKCCL_HD bool layoutFor(int64_t M, int64_t K, int64_t elemBytes, int ws, int me, Layout* out,
                        int64_t scaleRowBytes = 0) {
  Layout L;
  L.scaleRowBytes = scaleRowBytes;
  L.ws = ws;
  L.me = me;
  L.M = M;
  L.m = static_cast<int>(M / ws);
  L.rowBytes = K * elemBytes;
  // Slices: the fewest rows that make 64 KiB, and few enough slices for the claim counters.
  int s = log2Ceil((kMinSliceBytes + L.rowBytes - 1) / L.rowBytes);
  s = maxI(s, log2Ceil((L.m + kMaxSlicesPerShard - 1) / kMaxSlicesPerShard));
  // Chunks: one A tile, or a slice when that is larger.
  L.chunkLog2 = maxI(kTileRowsLog2, s);
  L.sliceLog2 = s;
  L.nChunks = maxI(1, static_cast<int>((static_cast<int64_t>(L.m) + L.chunkRows() - 1) >> L.chunkLog2));
  L.nSlices = maxI(1, static_cast<int>((static_cast<int64_t>(L.m) + L.sliceRows() - 1) >> L.sliceLog2));
  *out = L;
  return L.m >= 1 && L.nSlices <= kMaxSlicesPerShard && L.chunkLog2 <= 30;
}

}  // namespace ag
}  // namespace mkccl
