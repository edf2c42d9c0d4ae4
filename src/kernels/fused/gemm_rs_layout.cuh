// GEMM+ReduceScatter / GEMM+AllReduce over NVLink: the ring, its tiles, and where a call's data and
// flags live. Everything derives from the call's global arguments (M, N, world size) and the plan
// (tile width, cluster, skew), which every rank computes alike, so a receiver knows what a sender
// writes without asking. Host- and device-callable (the CPU test walks schedules).
//
// The ring. The output rows are cut into ws chunks; chunk c belongs to rank c (RS: rows
// c*M/ws..., the user's C; AR: every rank ends with all of them). Rank r computes, at step
// j = 0..ws-1, its partial product of chunk c(r, j) = (r + j + 1) mod ws, adds the running sum that
// rank r+1 computed for the same chunk at step j-1 (it arrived in r's receive area), and sends
// the sum on to rank r-1 — except at the last step, whose chunk is r's own: the sum is then
// complete and goes to C. Each rank sends (ws-1)/ws of a full C once, always to the same peer,
// and every sum is reduced in a GEMM epilogue (no reduction kernel, no SMs taken from the GEMM).
// AR then passes every finished tile around the same ring (ws-1 hops, forwarded by copy warps).
//
// Tiles. A chunk is tiled on its own (128-row M-blocks counted from the chunk's first row), so no
// tile straddles two owners; M-blocks per chunk are padded to the cluster size (padding rows are
// computed on whatever A holds there and clipped when C is written). Tile u of a chunk is
// (mb, nb) -> u = mb * nBlocks + nb: every chunk has the same tiles, so (step, u) names a sum.
//
// Order. A CTA's tiles come from one linear order of "cluster tiles" (step j, index v in the
// chunk), sorted by the key j*skew + v (ties: lower step first): step j starts `skew` cluster
// tiles after step j-1, so the sum a tile needs was produced skew positions (about skew/G waves)
// earlier, and steps overlap: sends spread over the whole GEMM and the final (send-free) tiles
// end the kernel. Inside a chunk, v walks bands of `group` cluster rows down, then across N.
//
// Scratch (this rank's share of the symmetric region kScratchGemmReduce), in tile slots of
// 128 x bn elements (tileBytes):
//   staging [(ws-1) x U]     partial sums of steps 0..ws-2, written by our epilogues (local)
//   rx      [(ws-1) x U]     sums of steps 0..ws-2 received from rank r+1
//   ag      [ws x U]         AR only: finished tiles of chunk c received from rank r+1
// A staging / rx slot holds a tile in "fragment order": half h (64 rows, one consumer
// warpgroup), then 16-byte vector i of thread t at ((h * nVec + i) * 128 + t) * 16, the vector
// holding the thread's accumulator pairs 4i..4i+3 (wgmma's register order): every epilogue load
// and store is a coalesced 16-byte access. An ag slot holds the tile row-major, [128][bn].
//
// Flags (64-bit slots of each rank's workspace flags; values flagValue(seq, 0), never reset):
//   barrier slot [r-1]        entry: rank r-1 has started this call (the convention of
//                             signal.cuh's barrier slots, shared by every op): it is done with
//                             our earlier data, so we may write into its areas
//   kOpFlagSlot + j*U + u     rx (j, u) has landed (written by rank r+1)
//   kOpFlagSlot + (ws-1)*U + c*U + u   AR: ag (c, u) has landed (written by rank r+1)
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define MKCCL_RS_HD __host__ __device__ __forceinline__
#else
#define MKCCL_RS_HD inline
#endif

namespace mkccl {
namespace rs {

enum Mode : int { kModeReduceScatter = 0, kModeAllReduce = 1 };

constexpr int kTileRows = 128;  // GemmCfg::BM
constexpr int kThreadsPerHalf = 128;  // one consumer warpgroup

MKCCL_RS_HD int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
MKCCL_RS_HD int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
MKCCL_RS_HD int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

struct Layout {
  int ws = 1;               // ranks in the ring (one node)
  int mode = kModeReduceScatter;
  int64_t M = 0, N = 0;
  int64_t chunkRows = 0;    // chunk c: rows [c * chunkRows, min((c + 1) * chunkRows, M))
  int bn = 256, cs = 1;     // tile width, CTAs per cluster (along M)
  int mbc = 0;              // M-blocks per chunk (a multiple of cs)
  int nBlocks = 0;
  int tiles = 0;            // U: tiles per chunk
  int clusterTiles = 0;     // Vc = tiles / cs
  int skew = 1;             // in cluster tiles
  int group = 1;            // raster band height, in cluster rows

  MKCCL_RS_HD int64_t tileBytes() const { return int64_t(kTileRows) * bn * 2; }
  MKCCL_RS_HD int64_t halfBytes() const { return tileBytes() / 2; }
  MKCCL_RS_HD int vecsPerThread() const { return bn / 16; }  // 16-byte vectors per thread and half
  MKCCL_RS_HD bool allReduce() const { return mode == kModeAllReduce; }

  MKCCL_RS_HD int64_t chunkBegin(int c) const { return min64(int64_t(c) * chunkRows, M); }
  MKCCL_RS_HD int64_t chunkEnd(int c) const { return min64(int64_t(c + 1) * chunkRows, M); }
  // The chunk rank r computes at step j.
  MKCCL_RS_HD int chunkAt(int r, int j) const { return (r + j + 1) % ws; }

  // Scratch byte offsets (this rank's share).
  MKCCL_RS_HD int64_t stagingOffset(int j, int u) const { return (int64_t(j) * tiles + u) * tileBytes(); }
  MKCCL_RS_HD int64_t rxOffset(int j, int u) const {
    return (int64_t(ws - 1 + j) * tiles + u) * tileBytes();
  }
  MKCCL_RS_HD int64_t agOffset(int c, int u) const {
    return (int64_t(2 * (ws - 1) + c) * tiles + u) * tileBytes();
  }
  MKCCL_RS_HD int64_t scratchBytes() const {
    return int64_t(2 * (ws - 1) + (allReduce() ? ws : 0)) * tiles * tileBytes();
  }

  // Flag slots, relative to kOpFlagSlot.
  MKCCL_RS_HD int64_t rxSlot(int j, int u) const { return int64_t(j) * tiles + u; }
  MKCCL_RS_HD int64_t agSlot(int c, int u) const { return int64_t(ws - 1) * tiles + int64_t(c) * tiles + u; }
  MKCCL_RS_HD int64_t flagSlots() const { return int64_t(ws - 1) * tiles + (allReduce() ? int64_t(ws) * tiles : 0); }

  // Cluster tiles in the whole order (every step).
  MKCCL_RS_HD int64_t orderLength() const { return int64_t(ws) * clusterTiles; }
};

// The layout of a call: chunks (RS: M / ws rows each, the user's split; AR: ours, rounded to whole
// cluster tiles so that no tile reaches into the next chunk), tiles, skew in cluster tiles.
MKCCL_RS_HD Layout makeLayout(int mode, int ws, int64_t M, int64_t N, int bn, int cs, int skew, int group) {
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
  L.skew = int(max64(1, min64(skew, L.clusterTiles)));
  L.group = group < 1 ? 1 : group;
  return L;
}

// One CTA tile of the order.
struct Tile {
  int step;   // 0..ws-1 (ws-1: the final step, this rank's own chunk)
  int chunk;  // whose rows
  int mb;     // M-block inside the chunk
  int nb;     // N-block
  int u;      // tile index in the chunk: mb * nBlocks + nb
};

// Cluster tiles with key < k: sum over steps j of clamp(k - j*skew, 0, Vc).
MKCCL_RS_HD int64_t keysBelow(const Layout& L, int64_t k) {
  int64_t n = 0;
  for (int j = 0; j < L.ws; ++j) n += min64(max64(k - int64_t(j) * L.skew, 0), L.clusterTiles);
  return n;
}

// Position p of the order -> (step, cluster tile index v in the chunk).
MKCCL_RS_HD void decodeOrder(const Layout& L, int64_t p, int* step, int* v) {
  int64_t lo = 0, hi = int64_t(L.ws - 1) * L.skew + L.clusterTiles;  // keysBelow(lo) <= p < keysBelow(hi)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (keysBelow(L, mid) <= p) lo = mid;
    else hi = mid;
  }
  const int64_t k = lo;
  const int64_t first = k - L.clusterTiles + 1;  // steps with k - j*skew < Vc
  const int64_t jlo = first > 0 ? ceilDiv(first, L.skew) : 0;
  const int64_t j = jlo + (p - keysBelow(L, k));
  *step = int(j);
  *v = int(k - j * L.skew);
}

// Cluster tile v of a chunk -> (cluster row, N-block): bands of `group` cluster rows, walked down
// the band first, then across N.
MKCCL_RS_HD void rasterTile(const Layout& L, int v, int* clusterRow, int* nb) {
  const int rows = L.mbc / L.cs;
  const int64_t band = int64_t(L.group) * L.nBlocks;
  const int firstRow = int(v / band) * L.group;
  const int inBand = int(v - (v / band) * band);
  const int bandRows = L.group < rows - firstRow ? L.group : rows - firstRow;
  *clusterRow = firstRow + inBand % bandRows;
  *nb = inBand / bandRows;
}

// The tiles of one CTA: cluster `cluster` of `numClusters` takes positions cluster,
// cluster + numClusters, ...; both CTAs of a cluster see the same steps and N-blocks.
class Schedule {
 public:
  // L must outlive the schedule (on the device: the kernel's parameter, read in place).
  MKCCL_RS_HD Schedule(const Layout& L, int rank, int cluster, int numClusters, int ctaRank)
      : L_(&L), rank_(rank), next_(cluster), stride_(numClusters), ctaRank_(ctaRank) {}

  MKCCL_RS_HD bool next(Tile& t) {
    const Layout& L = *L_;
    if (next_ >= L.orderLength()) return false;
    int v = 0, cr = 0;
    decodeOrder(L, next_, &t.step, &v);
    next_ += stride_;
    rasterTile(L, v, &cr, &t.nb);
    t.mb = cr * L.cs + ctaRank_;
    t.chunk = L.chunkAt(rank_, t.step);
    t.u = t.mb * L.nBlocks + t.nb;
    return true;
  }

 private:
  const Layout* L_;
  int rank_;
  int64_t next_, stride_;
  int ctaRank_;
};

}  // namespace rs
}  // namespace mkccl
