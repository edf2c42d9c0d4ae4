// The NVLink collective kernel of the "simple" protocol: AllGather, AllToAll(v), ReduceScatter and
// AllReduce (one-shot and two-shot) as one persistent kernel whose CTAs push chunks into peers'
// symmetric workspaces. It carries the large calls; small and medium ones take the LL protocol
// (coll_ll.cuh), which shares the push structure and the streams (Args) but not the flags.
//
// ---- Why push ------------------------------------------------------------------------------
// User buffers are not peer-mapped; only the symmetric workspace is. A sender reads its user
// buffer and stores into the receiver's workspace (SM stores to a peer reach ~46 GB/s per CTA,
// twice what peer loads do); the receiver then copies or reduces out of its own workspace into its
// user buffer at local HBM speed.
//
// ---- Streams, chunks, channels, rings --------------------------------------------------------
// For every ordered pair (sender q -> receiver p) of local ranks there is a stream of bytes (its
// length is known to both ends: it derives from arguments that every rank passes the same). A
// stream of L bytes is cut into chunks of E = chunkBytes(L, C, S, minChunk) (coll_args.h). Chunk k belongs to
// channel c = (k + rot) % C and is carried by that channel's step t = (k + rot) / C (rot = 0 except
// for AllToAll, where rot = (q + p) % C spreads small pairs over channels).
// The receiver's workspace data region holds (from its start; the LL area is at its end, see
// llLayout), per ring set (set 0: the main ring; set 1: the reduced blocks of AllReduce two-shot),
// per channel c and per sender q, a ring of NB slots of S bytes: step t of (q -> p, c) goes to
// slot t % NB of ring (set, c, q) in p's workspace.
//
// ---- Flags (64-bit, in the flags region, never reset) --------------------------------------
//   data   (set, c, q) in p's flags: the last step of (q -> p, c) whose data has landed in p
//   credit (set, c, p) in q's flags: the last step of (q -> p, c) that p has consumed
//   entry  barrier slot [q] in p's flags: q has started this call (barrier slots of signal.cuh,
//          value flagValue(seq, 0), the same value a phase-0 node barrier posts)
// Values are flagValue(seq, t + 1) for step t of call seq. Every wait is "flag >= value of this
// call", and every value of an earlier call is smaller than every value of this one, so a stale
// flag from any earlier call (of any op, whatever layout it used) can never satisfy a wait.
//
// ---- The protocol ----------------------------------------------------------------------------
// Sender q, step t of (q -> p, c), chunk k:
//   1. room: if k < NB*C (the slot's first use in this call), wait entry[q] in q's flags (p has
//      started this call, so p is done with every earlier call's use of its workspace); else wait
//      credit(set, c, p) >= flagValue(seq, t + 1 - NB) (p has consumed the step that last used the
//      slot).
//   2. store the chunk into the slot; __syncthreads; st.release.sys data(set, c, q) at p = flagValue(seq, t+1).
// Receiver p, step t of (q -> p, c):
//   1. ld.acquire.sys data(set, c, q) >= flagValue(seq, t + 1); __syncthreads.
//   2. copy/reduce the slot out (L2-only loads); __syncthreads; st.release.sys credit(set, c, p) at q.
// Why this is safe:
//   - back-to-back calls: a sender writes into p's workspace only after p has entered this call
//     (step 1), i.e. after p's kernel of the previous call has finished (stream order on p);
//     credits and data flags of this call are posted only by ranks that are in this call.
//   - a slow peer: a slot is rewritten only after its consumer posted the credit of the step that
//     last used it, so staged data is never overwritten before it is read.
//   - publication: every thread's stores are ordered before the release store by __syncthreads;
//     the release at system scope makes them visible on the peer before the flag; the waiter's
//     acquire (plus __syncthreads) orders the block's later loads after it.
//   - every wait is a short spin on a local flag, then dev::waitGeq (bounded by the communicator's
//     timeout; on timeout or abort it records the error and returns false); a failed wait makes
//     the CTA return at once; the other CTAs notice the recorded error within their next wait.
//   - deadlock freedom: a send of step t needs only consumption of step t - NB; a receive of step t
//     needs only sends of step t. In the fused mode (one CTA runs every role of its channels) a
//     CTA does all sends of step t, then all receives, then all gathers; by induction on t every
//     step completes. In the split mode every role has its own CTA (all co-resident).
//   - AllReduce two-shot: the reducer of block p waits the RS data of step t from every peer and
//     the room of step t in set 1 at every peer, reduces, and stores the result both to its recv
//     and into every peer's set-1 ring; then posts set-1 data and set-0 credits.
//   - in place: AllReduce one-shot runs fused only, so a chunk is pushed before it is overwritten
//     by its reduction; in the other kinds a rank never writes a region its own sender still reads
//     (its own block is reduced only from its own inputs, and other blocks are written only with
//     data that peers could produce only after this rank's sender had read them).
//
// The reduction order is rank order on every rank, so AllReduce results are bit-identical on all ranks.
#pragma once
#include "kernels/coll/coll_args.h"
#include "kernels/device/reduce.cuh"
#include "kernels/device/signal.cuh"
#include "kernels/device/vec.cuh"

namespace mkccl {
namespace coll {

// Local rank of my j-th peer (j < n-1): me+1, me+2, ... wrapping, so peers start at different ranks.
__device__ __forceinline__ int peerAt(int me, int j, int n) {
  const int q = me + 1 + j;
  return q >= n ? q - n : q;
}
// Index of `other` among `owner`'s peers (the inverse of peerAt).
__device__ __forceinline__ int peerIndex(int owner, int other, int n) {
  const int d = other - owner - 1;
  return d < 0 ? d + n : d;
}

__device__ __forceinline__ uint64_t maxU64(uint64_t x, uint64_t y) { return x > y ? x : y; }

// The call's number and its LL flag, taken from the device's counter when the kernel starts
// (dev::takeCallSeq): the number frozen in Args is the host's, which a replayed graph repeats.
struct CallState {
  uint64_t seq;
  uint32_t llFlag;
};
__device__ __forceinline__ CallState& callState() {
  __shared__ CallState s;
  return s;
}
// Every thread, first thing in the kernel (no CTA may leave before it).
__device__ __forceinline__ void beginCollCall(const Args& a) {
  if (threadIdx.x == 0) {
    const uint64_t s = a.sharedSeq ? dev::peekCallSeq(a.dev) : dev::takeCallSeq(a.dev);
    callState().seq = s;
    callState().llFlag = llFlagOf(s);
  }
  __syncthreads();
}
__device__ __forceinline__ uint64_t callSeq() { return callState().seq; }
__device__ __forceinline__ uint32_t llFlag() { return callState().llFlag; }

__device__ __forceinline__ int siteOf(const Args& a) {
  switch (a.kind) {
    case kAllGather: return kSiteAllGather;
    case kAllToAll: return kSiteAllToAll;
    case kReduceScatter: return kSiteReduceScatter;
    default: return kSiteAllReduce;
  }
}

__device__ __forceinline__ uint64_t stepValue(const Args& a, uint64_t t) { return dev::flagValue(callSeq(), t + 1); }

__device__ __forceinline__ uint64_t* flagAt(const Args& a, int owner, int set, int credit, int c, int other) {
  const int n = a.dev.localRanks;
  const size_t idx = ((size_t)(set * 2 + credit) * a.channels + c) * (n - 1) + peerIndex(owner, other, n);
  return dev::flagsOf(a.dev, owner) + a.flagBase + idx;
}
// data(set, c, sender) in receiver's flags
__device__ __forceinline__ uint64_t* dataFlag(const Args& a, int receiver, int set, int c, int sender) {
  return flagAt(a, receiver, set, 0, c, sender);
}
// credit(set, c, receiver) in sender's flags
__device__ __forceinline__ uint64_t* creditFlag(const Args& a, int sender, int set, int c, int receiver) {
  return flagAt(a, sender, set, 1, c, receiver);
}
__device__ __forceinline__ uint64_t* entryFlag(const Args& a, int owner, int from) {
  return dev::flagsOf(a.dev, owner) + kBarrierSlot + from;
}
// Slot of step t of (sender -> receiver, c) in the receiver's workspace.
__device__ __forceinline__ char* ringSlot(const Args& a, int receiver, int set, int c, int sender, uint64_t t) {
  const int n = a.dev.localRanks;
  const size_t ring = (size_t)c * (n - 1) + peerIndex(receiver, sender, n);
  return dev::dataOf(a.dev, receiver) + (size_t)set * a.setBytes +
         (ring * a.slots + (size_t)(t % (uint64_t)a.slots)) * a.slotBytes;
}

__device__ __forceinline__ int rotOf(const Args& a, int sender, int receiver) {
  return a.rotate ? (sender + receiver) % a.channels : 0;
}

// Chunk of a stream carried by step t of channel c, or -1.
__device__ __forceinline__ int64_t chunkAt(const Args& a, size_t chunks, int c, uint64_t t, int rot) {
  const int64_t k = (int64_t)(t * (uint64_t)a.channels) + c - rot;
  return k >= 0 && (size_t)k < chunks ? k : -1;
}

// One stream's chunk at step t: where it starts and how long it is (len 0: none).
struct Piece {
  size_t off = 0, len = 0;
  int64_t k = -1;
};
__device__ __forceinline__ Piece pieceAt(const Args& a, size_t L, int c, uint64_t t, int rot) {
  Piece pc;
  if (L == 0) return pc;
  const size_t E = chunkBytes(L, a.channels, a.slotBytes, a.minChunk);
  pc.k = chunkAt(a, ceilDiv(L, E), c, t, rot);
  if (pc.k >= 0) {
    pc.off = (size_t)pc.k * E;
    pc.len = L - pc.off < E ? L - pc.off : E;
  }
  return pc;
}

__device__ __forceinline__ uint64_t streamSteps(const Args& a, size_t L, int c, int rot) {
  if (L == 0) return 0;
  const size_t E = chunkBytes(L, a.channels, a.slotBytes, a.minChunk);
  return channelSteps(ceilDiv(L, E), a.channels, c, rot);
}

// Tells every peer that this rank has entered the call (block 0, at the start).
__device__ __forceinline__ void postEntry(const Args& a) {
  const int n = a.dev.localRanks, me = a.dev.localRank;
  if ((int)threadIdx.x < n - 1) {
    const int p = peerAt(me, threadIdx.x, n);
    dev::storeRelease(entryFlag(a, p, me), dev::flagValue(callSeq(), 0));
  }
}

// One thread: waits until *flag >= want. Flags polled here are in this rank's own memory, so a
// short tight spin (a few microseconds) catches the common case without waitGeq's sleeps; then
// waitGeq's bounded wait (timeout -> recorded error, false).
__device__ __forceinline__ bool waitFlag(const Args& a, const uint64_t* flag, uint64_t want, int peer) {
#pragma unroll 1
  for (int i = 0; i < 512; ++i)
    if (dev::loadAcquire(flag) >= want) return true;
  return dev::waitGeq(a.dev, flag, want, peer, siteOf(a));
}

// One thread: may chunk k (step t) of my stream to p be written into p's ring of `set`?
__device__ __forceinline__ bool waitRoom(const Args& a, int set, int c, int p, int64_t k, uint64_t t) {
  const int me = a.dev.localRank;
  if (k < (int64_t)a.channels * a.slots) return waitFlag(a, entryFlag(a, me, p), dev::flagValue(callSeq(), 0), p);
  return waitFlag(a, creditFlag(a, me, set, c, p), stepValue(a, t - a.slots), p);
}

// ---- roles -----------------------------------------------------------------------------------

// Pushes step t of channel c of my streams to every peer (set 0). AllGather and AllReduce
// one-shot push the same bytes to every peer: one read, n-1 (+1 local) stores.
__device__ __forceinline__ bool sendStep(const Args& a, int c, uint64_t t) {
  __shared__ const char* s_src[kMaxLocalRanks];
  __shared__ char* s_dst[kMaxLocalRanks + 1];
  __shared__ size_t s_len[kMaxLocalRanks];
  const int n = a.dev.localRanks, me = a.dev.localRank, m = n - 1;
  int fail = 0;
  if ((int)threadIdx.x < m) {
    const int j = threadIdx.x, p = peerAt(me, j, n);
    const Piece pc = pieceAt(a, a.outLen[p], c, t, rotOf(a, me, p));
    s_len[j] = pc.len;
    if (pc.len > 0) {
      s_src[j] = a.send + a.outOff[p] + pc.off;
      s_dst[j] = ringSlot(a, p, 0, c, me, t);
      fail = !waitRoom(a, 0, c, p, pc.k, t);
    }
  }
  if (__syncthreads_or(fail)) return false;

  // My own block (AllGather out of place, AllToAll): a local copy.
  const Piece self = pieceAt(a, a.outLen[me], c, t, rotOf(a, me, me));
  const char* selfSrc = a.send + a.outOff[me] + self.off;
  char* selfDst = a.recv + a.inOff[me] + self.off;
  bool selfDone = self.len == 0;

  const bool broadcast = a.kind == kAllGather || a.kind == kAllReduceOneShot;
  if (broadcast) {
    // Every stream has the same length (and no rotation): all peers are active together.
    const size_t len = s_len[0];
    if (len > 0) {
      const char* src = s_src[0];
      if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
        int nd = m;
        // My own copy joins the broadcast when it is the same chunk and equally aligned.
        if (!selfDone && selfSrc == src && self.len == len && (reinterpret_cast<uintptr_t>(selfDst) & 15) == 0) {
          if (threadIdx.x == 0) s_dst[m] = selfDst;
          __syncthreads();
          nd = m + 1;
          selfDone = true;
        }
        dev::blockCopyMulti16(s_dst, nd, src, len);
      } else {
        for (int j = 0; j < m; ++j) dev::blockCopy(s_dst[j], src, len);
      }
    }
  } else {
    // Each channel starts at a different peer: the channels run about in step, and if every one
    // pushed to peer 0 first, one NVLink pair would carry the whole step while the others idle.
    for (int jj = 0; jj < m; ++jj) {
      const int j = (jj + c) % m;
      if (s_len[j] > 0) dev::blockCopy(s_dst[j], s_src[j], s_len[j]);
    }
  }
  if (!selfDone) dev::blockCopy(selfDst, selfSrc, self.len);

  __syncthreads();
  if ((int)threadIdx.x < m && s_len[threadIdx.x] > 0)
    dev::storeRelease(dataFlag(a, peerAt(me, threadIdx.x, n), 0, c, me), stepValue(a, t));
  return true;
}

// Copies step t of channel c out of ring `set` (from every peer) into recv, then returns credits.
__device__ __forceinline__ bool copyOutStep(const Args& a, int set, int c, uint64_t t) {
  __shared__ const char* s_src[kMaxLocalRanks];
  __shared__ char* s_dst[kMaxLocalRanks];
  __shared__ size_t s_len[kMaxLocalRanks];
  const int n = a.dev.localRanks, me = a.dev.localRank, m = n - 1;
  int fail = 0;
  if ((int)threadIdx.x < m) {
    const int j = threadIdx.x, q = peerAt(me, j, n);
    const Piece pc = pieceAt(a, a.inLen[q], c, t, rotOf(a, q, me));
    s_len[j] = pc.len;
    if (pc.len > 0) {
      s_src[j] = ringSlot(a, me, set, c, q, t);
      s_dst[j] = a.recv + a.inOff[q] + pc.off;
      fail = !waitFlag(a, dataFlag(a, me, set, c, q), stepValue(a, t), q);
    }
  }
  if (__syncthreads_or(fail)) return false;
  for (int j = 0; j < m; ++j)
    if (s_len[j] > 0) dev::blockCopy(s_dst[j], s_src[j], s_len[j]);
  __syncthreads();
  if ((int)threadIdx.x < m && s_len[threadIdx.x] > 0)
    dev::storeRelease(creditFlag(a, peerAt(me, threadIdx.x, n), set, c, me), stepValue(a, t));
  return true;
}

// Reduces step t of channel c of my block: my own input and every peer's slot, in rank order.
// Two-shot: the result also goes into every peer's set-1 ring.
template <typename T, typename Op>
__device__ __forceinline__ bool reduceStep(const Args& a, int c, uint64_t t) {
  __shared__ const char* s_in[kMaxLocalRanks];
  __shared__ char* s_out[kMaxLocalRanks];
  const Piece pc = pieceAt(a, a.redLen, c, t, 0);
  if (pc.len == 0) return true;
  const int n = a.dev.localRanks, me = a.dev.localRank, m = n - 1;
  const bool push = a.kind == kAllReduceTwoShot;
  int fail = 0;
  if ((int)threadIdx.x < n) {
    const int q = a.localOfRank[threadIdx.x];
    s_in[threadIdx.x] = q == me ? a.send + a.redInOff + pc.off : ringSlot(a, me, 0, c, q, t);
  }
  if (threadIdx.x == 0) s_out[0] = a.recv + a.redOutOff + pc.off;
  if ((int)threadIdx.x < m) {
    const int q = peerAt(me, threadIdx.x, n);
    fail = !waitFlag(a, dataFlag(a, me, 0, c, q), stepValue(a, t), q);
    if (push) {
      s_out[1 + threadIdx.x] = ringSlot(a, q, 1, c, me, t);
      if (!fail) fail = !waitRoom(a, 1, c, q, pc.k, t);
    }
  }
  if (__syncthreads_or(fail)) return false;
  dev::blockReduce<T, Op>(s_in, n, s_out, push ? n : 1, pc.len / sizeof(T), a.avgDiv);
  __syncthreads();
  if ((int)threadIdx.x < m) {
    const int q = peerAt(me, threadIdx.x, n);
    dev::storeRelease(creditFlag(a, q, 0, c, me), stepValue(a, t));
    if (push) dev::storeRelease(dataFlag(a, q, 1, c, me), stepValue(a, t));
  }
  return true;
}

// ---- the kernel ------------------------------------------------------------------------------

__device__ __forceinline__ uint64_t roleSteps(const Args& a, int role, int c, bool reduce) {
  const int n = a.dev.localRanks, me = a.dev.localRank;
  uint64_t s = 0;
  if (role == kRoleSend) {
    for (int q = 0; q < n; ++q) s = maxU64(s, streamSteps(a, a.outLen[q], c, rotOf(a, me, q)));
  } else if (role == kRoleRecv && reduce) {
    s = streamSteps(a, a.redLen, c, 0);
  } else {
    for (int q = 0; q < n; ++q)
      if (q != me) s = maxU64(s, streamSteps(a, a.inLen[q], c, rotOf(a, q, me)));
  }
  return s;
}

// The r-th role (bit) of a role mask.
__device__ __forceinline__ int nthRole(int roles, int r) {
  for (int bit = 1; bit <= kRoleGather; bit <<= 1)
    if (roles & bit) {
      if (r == 0) return bit;
      --r;
    }
  return 0;
}

// kReduce = false: AllGather / AllToAll (T and Op unused).
template <typename T, typename Op, bool kReduce>
__global__ void __launch_bounds__(kThreads, 1) collKernel(const __grid_constant__ Args a) {
  beginCollCall(a);
  if (blockIdx.x == 0) postEntry(a);
  int roles, c0, cstep;
  if (a.split) {
    roles = nthRole(a.roles, blockIdx.x / a.channels);
    c0 = blockIdx.x % a.channels;
    cstep = a.channels;
  } else {
    roles = a.roles;
    c0 = blockIdx.x;
    cstep = gridDim.x;
  }
  uint64_t steps = 0;
  for (int c = c0; c < a.channels; c += cstep)
    for (int bit = 1; bit <= kRoleGather; bit <<= 1)
      if (roles & bit) steps = maxU64(steps, roleSteps(a, bit, c, kReduce));

  for (uint64_t t = 0; t < steps; ++t) {
    if (roles & kRoleSend)
      for (int c = c0; c < a.channels; c += cstep)
        if (!sendStep(a, c, t)) return;
    if (roles & kRoleRecv)
      for (int c = c0; c < a.channels; c += cstep) {
        bool ok;
        if constexpr (kReduce) ok = reduceStep<T, Op>(a, c, t);
        else ok = copyOutStep(a, 0, c, t);
        if (!ok) return;
      }
    if (roles & kRoleGather)
      for (int c = c0; c < a.channels; c += cstep)
        if (!copyOutStep(a, 1, c, t)) return;
  }
}

}  // namespace coll
}  // namespace mkccl
