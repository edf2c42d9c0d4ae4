// Index math of the attention engine, shared by the host (planning, tests) and the kernels: which
// sequence positions a tensor's rows hold (segments), the query tiles, the key/value blocks each
// tile attends, the causal masks, the ring's zigzag layout and the persistent schedule's units.
// Plain structs and functions only (no CUDA types), so the CPU tests check the same code.
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define MKCCL_ATTN_HD __host__ __device__ __forceinline__
#else
#define MKCCL_ATTN_HD inline
#endif

namespace mkccl {
namespace attn {

constexpr int kBlockM = 128;  // query rows per tile: two consumer warpgroups of 64 rows
constexpr int kBlockN = 128;  // key/value rows per block
constexpr int kMaxSegs = 2;   // zigzag: each rank holds two chunks of the sequence
constexpr int kMaxSteps = 16; // ring steps (ranks of one NVLink domain)

enum RingLayout : int { kLayoutContiguous = 0, kLayoutZigzag = 1 };

// Local rows [row0, row0 + len) of a [B, S, H, D] tensor hold sequence positions pos0, pos0 + 1, ...
// Positions fit in 32 bits (the API bounds the whole sequence below 2^31 tokens); a plain call's
// queries may start at a negative position (more queries than keys, causal).
struct Seg {
  int32_t row0, len, pos0;
};
struct SegList {
  int32_t n;
  Seg s[kMaxSegs];
};

// Element i of a two-element list without a run-time array index (which would put the list in
// local memory on the GPU).
template <class T>
MKCCL_ATTN_HD const T& pick2(const T (&a)[2], int i) {
  return i == 0 ? a[0] : a[1];
}

MKCCL_ATTN_HD int64_t minI64(int64_t a, int64_t b) { return a < b ? a : b; }
MKCCL_ATTN_HD int64_t maxI64(int64_t a, int64_t b) { return a > b ? a : b; }
MKCCL_ATTN_HD int ceilDivI(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// The segments rank r of ws holds under `layout` with sLocal tokens: contiguous, rank r holds
// positions [r sLocal, (r + 1) sLocal); zigzag (sLocal even), the sequence is cut into 2 ws chunks
// of sLocal / 2 and rank r holds chunks r and 2 ws - 1 - r, in that order (causal load balance:
// every rank gets one early and one late chunk).
MKCCL_ATTN_HD SegList ringSegs(int layout, int r, int ws, int sLocal) {
  SegList l;
  if (layout == kLayoutZigzag) {
    const int half = sLocal / 2;
    l.n = 2;
    l.s[0] = Seg{0, half, r * half};
    l.s[1] = Seg{half, half, (2 * ws - 1 - r) * half};
  } else {
    l.n = 1;
    l.s[0] = Seg{0, sLocal, r * sLocal};
    l.s[1] = Seg{0, 0, 0};
  }
  return l;
}
// Whose keys/values rank r holds at ring step t (they travel r-1 -> r).
MKCCL_ATTN_HD int ringSource(int r, int ws, int t) { return ((r - t) % ws + ws) % ws; }
// Local row of the tensor that holds sequence position `pos` under `layout` on its owner, and the
// owner (for tests and the unfused baseline).
MKCCL_ATTN_HD void ringOwner(int layout, int ws, int sLocal, int64_t pos, int* rank, int* row) {
  if (layout == kLayoutZigzag) {
    const int half = sLocal / 2;
    const int chunk = static_cast<int>(pos / half);
    const int off = static_cast<int>(pos % half);
    if (chunk < ws) {
      *rank = chunk;
      *row = off;
    } else {
      *rank = 2 * ws - 1 - chunk;
      *row = half + off;
    }
  } else {
    *rank = static_cast<int>(pos / sLocal);
    *row = static_cast<int>(pos % sLocal);
  }
}

// What one launch computes. A plain call: one step, q = {0, Sq, Skv - Sq} (causal masks aligned to
// the bottom right, as FlashAttention 2 does: query i sees keys j <= i + Skv - Sq), kv = {0, Skv, 0}.
// A ring: ws steps, q = this rank's segments, kv of step t = the segments of ringSource(rank, t).
struct AttnShape {
  int32_t B, Hq, Hkv, causal;
  int32_t steps;
  int32_t ring, layout, rank, ws, sLocal;
  SegList q, kv;  // kv: plain calls only
};

MKCCL_ATTN_HD SegList kvSegsAt(const AttnShape& s, int step) {
  return s.ring ? ringSegs(s.layout, ringSource(s.rank, s.ws, step), s.ws, s.sLocal) : s.kv;
}

// Blocks [0, n) of key/value segment k that a query tile whose last row has position maxQ attends.
MKCCL_ATTN_HD int kvBlocks(const Seg& k, int causal, int32_t maxQ) {
  int32_t n = k.len;
  if (causal && maxQ - k.pos0 + 1 < n) n = maxQ - k.pos0 + 1;
  return n <= 0 ? 0 : (n + kBlockN - 1) / kBlockN;
}
// Whether block j of segment k needs a per-element mask for a tile whose first row has position
// minQ: it reaches past the segment, or (causal) holds a key after that row's position.
MKCCL_ATTN_HD bool blockNeedsMask(const Seg& k, int j, int causal, int32_t minQ) {
  const int32_t end = (j + 1) * kBlockN;
  return end > k.len || (causal && k.pos0 + end - 1 > minQ);
}

MKCCL_ATTN_HD int tilesIn(const Seg& q) { return ceilDivI(q.len, kBlockM); }
// Query tiles of one (batch, head): the segments' tiles, one after the other.
MKCCL_ATTN_HD int tilesPerHead(const SegList& q) {
  int n = 0;
  for (int i = 0; i < q.n; ++i) n += tilesIn(q.s[i]);
  return n;
}
MKCCL_ATTN_HD int tileBase(const SegList& q, int seg) {
  int n = 0;
  for (int i = 0; i < seg; ++i) n += tilesIn(q.s[i]);
  return n;
}

// One query tile at one step: its rows, positions and the key/value blocks it attends.
struct TileWork {
  int32_t step, b, h, seg, m;
  int32_t qRow0;  // tensor row of the tile's first row
  int32_t qRows;  // rows of the tile inside its segment (<= kBlockM)
  int32_t qPos0;  // position of the tile's first row (row i has qPos0 + i)
  SegList kv;
  int32_t nBlk[kMaxSegs];
  int32_t total;  // blocks in all
  int32_t item;   // (b, h, tile) index, the same at every step (ring merge state)
  MKCCL_ATTN_HD int32_t maxQ() const { return qPos0 + qRows - 1; }
};

MKCCL_ATTN_HD TileWork makeTile(const AttnShape& s, const SegList& kv, int step, int b, int h, int seg, int m) {
  TileWork w;
  const Seg& q = s.q.s[seg];
  w.step = step;
  w.b = b;
  w.h = h;
  w.seg = seg;
  w.m = m;
  w.qRow0 = q.row0 + m * kBlockM;
  w.qRows = q.len - m * kBlockM < kBlockM ? q.len - m * kBlockM : kBlockM;
  w.qPos0 = q.pos0 + m * kBlockM;
  w.kv = kv;
  w.total = 0;
  for (int i = 0; i < kMaxSegs; ++i) {
    w.nBlk[i] = i < kv.n ? kvBlocks(kv.s[i], s.causal, w.maxQ()) : 0;
    w.total += w.nBlk[i];
  }
  w.item = (b * s.Hq + h) * tilesPerHead(s.q) + tileBase(s.q, seg) + m;
  return w;
}

// Block number `it` (0 .. total-1) of a tile in processing order: the last segment first, blocks
// from the highest (the masked ones at the causal diagonal or the tail) down.
MKCCL_ATTN_HD void blockAt(const TileWork& w, int it, int* seg, int* j) {
  static_assert(kMaxSegs == 2, "blockAt walks two segments");
  if (w.kv.n == 2 && it < w.nBlk[1]) {
    *seg = 1;
    *j = w.nBlk[1] - 1 - it;
  } else {
    const int skipped = w.kv.n == 2 ? w.nBlk[1] : 0;
    *seg = 0;
    *j = w.nBlk[0] - 1 - (it - skipped);
  }
}

// Whether query segment `seg` attends anything at step `step` (its last tile has the most keys).
MKCCL_ATTN_HD bool segActive(const AttnShape& s, const SegList& kv, int seg) {
  const Seg& q = s.q.s[seg];
  if (q.len <= 0) return false;
  const int32_t maxQ = q.pos0 + q.len - 1;
  for (int i = 0; i < kv.n; ++i)
    if (kvBlocks(kv.s[i], s.causal, maxQ) > 0) return true;
  return false;
}

// Scheduling units: a causal call pairs tile m with tile n-1-m of the same segment (the two cost
// about as much as any other pair), a non-causal one schedules single tiles.
MKCCL_ATTN_HD int unitsIn(const Seg& q, int causal) {
  const int n = tilesIn(q);
  return causal ? (n + 1) / 2 : n;
}
MKCCL_ATTN_HD int unitsPerHeadAt(const AttnShape& s, const SegList& kv) {
  int n = 0;
  for (int i = 0; i < s.q.n; ++i)
    if (segActive(s, kv, i)) n += unitsIn(s.q.s[i], s.causal);
  return n;
}
MKCCL_ATTN_HD int64_t unitsAt(const AttnShape& s, int step) {
  return static_cast<int64_t>(s.B) * s.Hq * unitsPerHeadAt(s, kvSegsAt(s, step));
}
MKCCL_ATTN_HD int64_t totalUnits(const AttnShape& s) {
  int64_t n = 0;
  for (int t = 0; t < s.steps; ++t) n += unitsAt(s, t);
  return n;
}

// The tiles of unit u (steps in order; within a step batch, head, segment, pair): the first,
// and in *m2 the tile number of the second in the same segment, or -1. Consecutive units share a
// head (and, with GQA, consecutive heads a key/value head): CTAs that run at the same time read
// the same keys and values from L2.
MKCCL_ATTN_HD TileWork unitTiles(const AttnShape& s, int64_t u, int* m2) {
  int step = 0;
  SegList kv = kvSegsAt(s, 0);
  int perHead = unitsPerHeadAt(s, kv);
  while (u >= static_cast<int64_t>(s.B) * s.Hq * perHead && step + 1 < s.steps) {
    u -= static_cast<int64_t>(s.B) * s.Hq * perHead;
    ++step;
    kv = kvSegsAt(s, step);
    perHead = unitsPerHeadAt(s, kv);
  }
  const int bh = static_cast<int>(u / perHead);
  int r = static_cast<int>(u % perHead);
  const int b = bh / s.Hq, h = bh % s.Hq;
  int seg = 0;
  for (; seg < s.q.n; ++seg) {
    if (!segActive(s, kv, seg)) continue;
    const int k = unitsIn(s.q.s[seg], s.causal);
    if (r < k) break;
    r -= k;
  }
  const int nt = tilesIn(s.q.s[seg]);
  *m2 = s.causal && nt - 1 - r != r ? nt - 1 - r : -1;
  return makeTile(s, kv, step, b, h, seg, r);
}

// Ring merge state of a tile: the latest step before `step` at which it had work (-1: none), and
// the last step at which it has work (it writes the output there).
MKCCL_ATTN_HD int tileHasWork(const AttnShape& s, int step, int b, int h, int seg, int m) {
  const SegList kv = kvSegsAt(s, step);
  return makeTile(s, kv, step, b, h, seg, m).total > 0;
}
MKCCL_ATTN_HD int prevWorkStep(const AttnShape& s, const TileWork& w) {
  for (int t = w.step - 1; t >= 0; --t)
    if (tileHasWork(s, t, w.b, w.h, w.seg, w.m)) return t;
  return -1;
}
MKCCL_ATTN_HD int lastWorkStep(const AttnShape& s, const TileWork& w) {
  for (int t = s.steps - 1; t > w.step; --t)
    if (tileHasWork(s, t, w.b, w.h, w.seg, w.m)) return t;
  return w.step;
}

// Tiles with work at `step` (each is counted by its two warpgroups when done: the ring's "this
// rank has finished reading the step's keys/values" signal).
inline int64_t tilesWithWork(const AttnShape& s, int step) {
  const SegList kv = kvSegsAt(s, step);
  int64_t perHead = 0;
  for (int seg = 0; seg < s.q.n; ++seg) {
    if (!segActive(s, kv, seg)) continue;
    for (int m = 0; m < tilesIn(s.q.s[seg]); ++m)
      if (makeTile(s, kv, step, 0, 0, seg, m).total > 0) ++perHead;
  }
  return perHead * s.B * s.Hq;
}

// Multiply-adds of the tiles' blocks, counted per element the masks keep (what the TFLOP/s
// figures use: 4 D per kept (query, key) pair).
inline int64_t keptPairs(const AttnShape& s) {
  int64_t n = 0;
  for (int t = 0; t < s.steps; ++t) {
    const SegList kv = kvSegsAt(s, t);
    for (int qs = 0; qs < s.q.n; ++qs)
      for (int i = 0; i < s.q.s[qs].len; ++i) {
        const int64_t pq = static_cast<int64_t>(s.q.s[qs].pos0) + i;
        for (int k = 0; k < kv.n; ++k) {
          int64_t c = kv.s[k].len;
          if (s.causal) c = minI64(c, maxI64(0, pq - kv.s[k].pos0 + 1));
          n += c;
        }
      }
  }
  return n * s.B * s.Hq;
}

}  // namespace attn
}  // namespace mkccl
