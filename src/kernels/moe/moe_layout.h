// MoE dispatch/combine: the memory layout and the index math that the host, the kernels and the
// CPU tests share (plain C++, no runtime headers). docs/MOE.md describes the protocol.
//
// Keys. Routing is counted per key: keys [0, E) are global experts (one per (token, slot) that
// names the expert), keys [E, E + nranks) are destination ranks (one per (token, rank) pair: the
// row travels once per pair).
#pragma once
#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MOE_HD __host__ __device__ __forceinline__
#else
#define MOE_HD inline
#endif

namespace mkccl {
namespace moe {

constexpr int kMaxTopk = 16;
constexpr int kMaxExperts = 1024;
constexpr int kMaxRanks = 16;  // of the communicator, all nodes (v1 of MoE across nodes); kMaxLocalRanks
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kDefaultAlign = 128;
constexpr int kLandChunks = 8;  // 2048 elements: 8 KB of an fp32 landing row

// 64-bit flags at the start of every rank's MoE region (zeroed once at creation, never reset):
//   kCountFlag + q: source q's key counts have landed here       (flagValue(seq, 1), dispatch)
//   kDoneFlag + q:  source q's rows and their metadata have landed (flagValue(seq, 2), dispatch)
//   kCombFlag + q:  expert rank q's combine results have landed    (flagValue(seq, 1), combine)
// One slot per (meaning, writer): its values only grow with the call sequence.
constexpr int kCountFlag = 0;
constexpr int kDoneFlag = 16;
constexpr int kCombFlag = 32;
constexpr size_t kFlagBytes = 64 * 8;

MOE_HD size_t alignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

// The shape of a handle, the same on every rank.
struct Dims {
  int ranks = 1;         // ranks of the communicator (global: experts, keys, counts, pairs)
  int localRanks = 0;    // ranks of this node (NVLink peers: the queues and landing rows); 0 = ranks
  int experts = 0;       // E
  int topk = 0;          // k
  size_t hidden = 0;     // H
  size_t esize = 2;      // bytes per element
  size_t cap = 0;        // maxTokensPerRank
  size_t rows = 0;       // maxRecvRows
  int align = kDefaultAlign;

  MOE_HD int localExperts() const { return experts / ranks; }
  MOE_HD int lranks() const { return localRanks > 0 ? localRanks : ranks; }
  MOE_HD int keys() const { return experts + ranks; }
  // Elements between rows of the receive buffer (and of combine's Y): 16-byte rows.
  MOE_HD size_t pitch() const { return alignUp(hidden * esize, 16) / esize; }
  MOE_HD size_t rowBytes() const { return pitch() * esize; }
  // A combine result row: fp32 (a partial sum of several rows) or one dtype row; 8-element groups
  // (what a lane reads) never run past it.
  MOE_HD size_t landingPitch() const { return alignUp(hidden, 8) * 4; }
  // A landing row is written, and announced, in pieces of kLandChunks 256-element chunks (whole
  // combine; the reduce of a token waits only for the pieces it sums).
  MOE_HD int landPieces() const { return (int)((hidden + 256 * kLandChunks - 1) / (256 * kLandChunks)); }
  // int32 words of a pair record: the row count m, then m rows of the expert-major buffer.
  MOE_HD int pairStride() const { return (int)alignUp((size_t)topk + 1, 4); }
};

// The fused dispatch + GEMM1 (mkcclMoeDispatchGemm) counts arrivals per block of this many rows
// of recvX: a GEMM tile's height, so one counter tells a tile that its rows have landed.
constexpr int kArrivalBlock = 128;
MOE_HD size_t arrivalBlocks(const Dims& d) { return (d.rows + kArrivalBlock - 1) / kArrivalBlock; }

// The worst case of the receive buffer: every rank sends every token here with all k slots on
// this rank's experts (a token may name an expert twice), and each local expert pads its segment
// by up to align-1 rows.
MOE_HD size_t worstRecvRows(const Dims& d) {
  return (size_t)d.ranks * d.cap * (size_t)d.topk + (size_t)d.localExperts() * (size_t)(d.align - 1);
}

// Byte offsets in each rank's symmetric region (the same on every rank).
struct Region {
  size_t counts = 0;    // int32 [ranks][keys]: row q = source q's counts (experts, then pairs per rank)
  size_t pairs = 0;     // int32 [ranks][cap][pairStride]: the pair records of source q, by pair index
  size_t queueTail = 0; // uint64 [ranks]: source q's next queue slot, (seq << 32) + slots taken
                        // (set to seq << 32 by this rank before it lets q in)
  size_t pairQueue = 0; // uint64 [localRanks - 1][cap] (by local peer index): source q's pairs in the order their rows landed,
                        // (seq << 32) | pair index (the dispatch's expansion follows the arrivals)
  size_t rowInfo = 0;   // mkcclMoeRowInfo [rows]
  size_t recvX = 0;     // [rows][pitch] elements
  size_t landing = 0;   // [localRanks - 1][cap][landingPitch bytes]: combine results from each local peer
                        // (other nodes' results land in the network window: moe_net_layout.h)
  size_t landReady = 0; // uint64 [localRanks - 1][cap][landPieces]: piece q of a landing row holds
                        // this call's data once its word is flagValue(seq, 1) (zeroed at creation)
  size_t arrivals = 0;  // uint64 [1 + arrivalBlocks]: the fused dispatch+GEMM's layout flag, then
                        // one counter per 128-row block of recvX (rows of this call landed in it)
  size_t bytes = 0;
};

MOE_HD Region regionFor(const Dims& d) {
  Region r;
  size_t at = kFlagBytes;
  r.counts = at;
  at = alignUp(at + (size_t)d.ranks * d.keys() * 4, 256);
  r.pairs = at;
  at = alignUp(at + (size_t)d.ranks * d.cap * d.pairStride() * 4, 256);
  r.queueTail = at;
  at = alignUp(at + (size_t)d.ranks * 8, 256);
  r.pairQueue = at;
  at = alignUp(at + (size_t)(d.lranks() - 1) * d.cap * 8, 256);
  r.rowInfo = at;
  at = alignUp(at + d.rows * 16, 256);
  r.recvX = at;
  at = alignUp(at + d.rows * d.rowBytes(), 256);
  r.landing = at;
  at = alignUp(at + (size_t)(d.lranks() - 1) * d.cap * d.landingPitch(), 256);
  r.landReady = at;
  at = alignUp(at + (size_t)(d.lranks() - 1) * d.cap * d.landPieces() * 8, 256);
  r.arrivals = at;
  at = alignUp(at + (1 + arrivalBlocks(d)) * 8, 256);
  r.bytes = at;
  return r;
}

// Index of `other` among `owner`'s peers (0 .. ranks-2): other = owner+1+i, wrapping.
MOE_HD int peerIndex(int owner, int other, int ranks) {
  const int i = other - owner - 1;
  return i < 0 ? i + ranks : i;
}

// How the tokens of a dispatch are cut: CTA b takes tokens [ctaStart(b), ctaStart(b+1)), and warp
// w of it [warpStart(b, w), warpStart(b, w+1)). A token's (CTA, warp) is fixed by T and the grid,
// so the count pass and the send pass agree on it.
struct TokenSplit {
  int T = 0, ctas = 1;
  MOE_HD int perCta() const { return (T + ctas - 1) / ctas; }
  MOE_HD int ctaStart(int b) const {
    const long long s = (long long)b * perCta();
    return s < T ? (int)s : T;
  }
  MOE_HD int perWarp(int b) const { return (ctaStart(b + 1) - ctaStart(b) + kWarps - 1) / kWarps; }
  MOE_HD int warpStart(int b, int w) const {
    const long long s = ctaStart(b) + (long long)w * perWarp(b);
    return s < ctaStart(b + 1) ? (int)s : ctaStart(b + 1);
  }
  MOE_HD int ctaOf(int t) const { return t / perCta(); }
  MOE_HD int warpOf(int t) const {
    const int b = ctaOf(t);
    return (t - ctaStart(b)) / perWarp(b);
  }
};

// Where the token-side of combine finds slot j of a token (what dispatch records on the source).
//   code < 0: dropped slot. Otherwise bits 0-7 the expert's rank d, bit 8 set on the first slot of
//   the token that goes to d, bits 16-23 m = the token's slots on d.
//   idx: d == this rank: the row of the slot in this rank's expert-major buffer (Y);
//        d != this rank, first slot: the pair index (the landing row from d); else unused.
struct Route {
  int32_t code;
  int32_t idx;
  float weight;
  int32_t pad;
};
MOE_HD int32_t routeCode(int d, bool first, int m) { return d | (first ? 256 : 0) | (m << 16); }
MOE_HD int routeRank(int32_t code) { return code & 255; }
MOE_HD bool routeFirst(int32_t code) { return (code >> 8) & 1; }
MOE_HD int routeSlots(int32_t code) { return (code >> 16) & 255; }

// A remote (token, rank) pair with m slots comes back as one dtype row when m == 1 (the token's
// rank applies the weight) or as the fp32 sum of its m weighted rows (summed by the expert rank):
// never more bytes than m rows of dtype would take, and every sum stays in fp32.
MOE_HD bool landsAsSum(int m) { return m >= 2; }

}  // namespace moe
}  // namespace mkccl
