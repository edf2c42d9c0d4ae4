// What the host planner (src/ops/coll/coll_plan.cc) hands the collective kernels. Shared by host and
// device code. Two protocols: "simple" (coll_kernel.cuh: chunked rings with flags and credits, for
// bandwidth) and "LL" (coll_ll.cuh: 8 data bytes and their flag in one store, for latency).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "kernels/abi/devcomm.h"

#include "kernels/abi/hd.h"

namespace mkccl {
namespace coll {

enum Proto : int {
  kProtoSimple = 0,
  kProtoLL = 1,
};

enum Kind : int {
  kAllGather = 0,
  kAllToAll = 1,          // also AllToAllv
  kReduceScatter = 2,
  kAllReduceOneShot = 3,  // every rank pushes its whole input to every peer, then reduces all
  kAllReduceTwoShot = 4,  // reduce-scatter, and each reduced block pushed to every peer
};

// What a CTA does for its channel(s), one step at a time.
enum Role : int {
  kRoleSend = 1,    // push my chunks into peers' rings (ring set 0)
  kRoleRecv = 2,    // consume ring set 0: copy out (AllGather, AllToAll) or reduce (the others)
  kRoleGather = 4,  // AllReduce two-shot: copy reduced blocks out of ring set 1
};

constexpr int kThreads = 512;    // simple protocol: threads per CTA
constexpr int kLLThreads = 512;  // LL protocol: threads per CTA
constexpr int kLLUnroll = 2;     // LL: 8-byte units a thread handles per pass (loads in flight)
constexpr int kLLMaxCtas = 64;   // LL: enough stores in flight to fill NVLink from one GPU

struct Args {
  DevComm dev;
  int kind;
  int proto;          // Proto
  int sharedSeq;      // 1: the call's second kernel (AllToAllv: LL, then simple): it peeks at the
                      // number the first kernel took (dev::peekCallSeq) instead of taking one
  // LL (layout fixed per communicator, llLayout below): the call's flag and the area's place.
  uint32_t llFlag;    // llFlagOf(the host's seq); the kernels use the device's (coll_kernel.cuh)
  size_t llBase;      // offset of the LL area in the workspace data region
  size_t llLines;     // lines per (half, set, sender) region: streams of up to 8 * llLines bytes
  // Layout: identical on every rank (it depends only on the call's global arguments and the
  // workspace size), because senders write into the receivers' rings.
  int channels;       // C: chunk k of a stream belongs to channel (k + rot) % C
  int slots;          // NB: ring depth per (channel, sender) pair
  size_t slotBytes;   // S: bytes of one ring slot (multiple of 16)
  size_t minChunk;    // lower bound of a stream's chunk size (multiple of 16)
  size_t setBytes;    // bytes of one ring set = C * (n-1) * NB * S
  int flagBase;       // first flag slot used (kOpFlagSlot)
  int rotate;         // AllToAll: rot = (sender + receiver) % C spreads small pairs over channels
  // Work split: local to this rank (depends on its CTA budget), not part of the layout.
  int split;          // 1: CTA b runs role roleList[b / C] for channel b % C; 0: every role
  int roles;          // roles of this kind (bit mask)
  int avgDiv;         // > 0: divide the reduction by it (mkcclAvg)
  const char* send;
  char* recv;
  // Streams, in bytes, by local rank q: what I push to q (send + outOff[q], outLen[q]) and what q
  // pushes to me (to recv + inOff[q], inLen[q]). outLen[me]/inOff[me]: my own block, copied
  // locally by the send role (AllGather out of place, AllToAll).
  size_t outOff[kMaxLocalRanks], outLen[kMaxLocalRanks];
  size_t inOff[kMaxLocalRanks], inLen[kMaxLocalRanks];
  // Reduce kinds: the block I reduce (every peer pushes redLen bytes to me): my own contribution
  // at send + redInOff, the result to recv + redOutOff.
  size_t redLen, redInOff, redOutOff;
  int8_t localOfRank[kMaxLocalRanks];  // reduction order is rank order: rank i is local rank localOfRank[i]
};

MKCCL_HD size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// ---- LL area --------------------------------------------------------------------------------
// The last part of every rank's workspace data region (the rings of the simple protocol use the
// rest, [0, base)). Receiver p's area holds, per half h (= call seq & 1), set (0: the streams;
// 1: the reduced blocks of AllReduce two-shot) and sender q, a region of `lines` lines of 16 bytes;
// line i carries bytes [8i, 8i + 8) of the stream. Its place depends only on the data region's
// size and the rank count, so every call (of any kind) on a communicator agrees on it.
constexpr size_t kLLLineBytes = 16;
constexpr size_t kLLMaxStreamBytes = 512 << 10;  // per (sender, receiver) stream and call

struct LLLayout {
  size_t base = 0;   // start of the area in the data region (== dataBytes: no area)
  size_t lines = 0;  // per region; 0: LL unavailable
};

// At most a quarter of the data region, at most kLLMaxStreamBytes per stream.
MKCCL_HD LLLayout llLayout(size_t dataBytes, int nLocal) {
  LLLayout l;
  l.base = dataBytes;
  if (nLocal < 2) return l;
  const size_t regions = 4 * (size_t)(nLocal - 1);
  size_t lines = dataBytes / 4 / (regions * kLLLineBytes);
  if (lines > kLLMaxStreamBytes / 8) lines = kLLMaxStreamBytes / 8;
  lines &= ~(size_t)15;
  if (lines == 0) return l;
  l.lines = lines;
  l.base = (dataBytes - regions * lines * kLLLineBytes) & ~(size_t)255;
  return l;
}

// The 32-bit flag of call seq's LL lines: never 0 (the value of memory no line was ever written
// to), and distinct for calls less than 2^32 - 1 apart, so a line left from an earlier call of the
// same half never passes for this call's.
MKCCL_HD uint32_t llFlagOf(uint64_t seq) { return (uint32_t)(seq % 0xffffffffull) + 1u; }

// 8-byte units of a stream of L bytes.
MKCCL_HD size_t llUnits(size_t L) { return (L + 7) / 8; }

// Chunks below this are not split further to pipeline a channel.
constexpr size_t kPipeChunk = 32 << 10;

// Chunk size of a stream of L bytes: a channel's share of the stream (L / C), cut into about 4
// pipeline steps once the pieces stay >= kPipeChunk (so a receiver starts on the first piece
// while later ones are in flight), at most S and at least minChunk bytes, a multiple of 16 (so
// chunks of every element type stay vector aligned). Senders and receivers must compute the same.
MKCCL_HD size_t chunkBytes(size_t L, size_t C, size_t S, size_t minChunk) {
  size_t e = ceilDiv(L, C);
  if (e > kPipeChunk) e = ceilDiv(e, 4) > kPipeChunk ? ceilDiv(e, 4) : kPipeChunk;
  e = (e + 15) & ~(size_t)15;
  if (e < minChunk) e = minChunk;
  if (e > S) e = S;
  return e;
}

// Steps of channel c for a stream of `chunks` chunks with rotation rot (< C): step t carries chunk
// t*C + c - rot when that is in [0, chunks).
MKCCL_HD uint64_t channelSteps(size_t chunks, int C, int c, int rot) {
  const size_t v = chunks + (size_t)rot;
  return v > (size_t)c ? (uint64_t)((v - 1 - (size_t)c) / (size_t)C + 1) : 0;
}

}  // namespace coll
}  // namespace mkccl
