// The LL ("low latency") protocol of the NVLink collectives: small and medium calls.
//
// ---- Why ------------------------------------------------------------------------------------
// The simple protocol (coll_kernel.cuh) publishes a chunk with a system-scope release of a
// separate flag (a fence that waits for the chunk's NVLink writes) and, for a slot's first use in a
// call, first waits for the receiver to have entered the call (an NVLink round trip): most of a
// small call's time. Here every 8 data bytes travel with their call's 32-bit flag in one 16-byte
// store of two 64-bit words (4 data bytes | flag), each written atomically: a receiver that sees
// the flag in both words has the data. No fence, no separate flag, no handshake in the call; the
// price is twice the bytes on NVLink, so the planner uses LL only up to a few hundred KiB per peer.
//
// ---- Layout (llLayout in coll_args.h) ---------------------------------------------------------
// Receiver p's LL area holds, per half h = seq & 1, set (0: the streams; 1: the reduced blocks of
// AllReduce two-shot) and sender q, a region of llLines lines; line i of (h, set, q) carries bytes
// [8i, 8i + 8) of q's stream to p. The lines of call seq carry the flag llFlagOf(seq).
//
// ---- Why a line is never overwritten before it is read ---------------------------------------
// Call seq uses half seq & 1, last used by call seq - 2 (or earlier). A sender writes into p's area
// only after p's entry flag (the barrier slot every collective kernel posts when it starts) holds
// at least flagValue(seq - 1, 0): p has started call seq - 1 or a later one, so its kernels of call
// seq - 2 have finished reading. In back-to-back calls that flag landed a whole call earlier: the
// check is a local load, not a round trip. A line left by an earlier call carries another flag
// (llFlagOf differs for calls less than 2^32 - 1 apart and is never 0, untouched memory's value),
// so it cannot pass for this call's.
//
// ---- Work split ------------------------------------------------------------------------------
// Thread g of the grid (T threads) handles units g, g + T, ... (8-byte units) of every stream,
// kLLUnroll of them per pass, in three phases:
//   A. push: my units of every stream to its receiver (AllGather / one-shot: one load, n-1
//      stores); my own block (AllGather out of place, AllToAll) straight to recv.
//   B. consume set 0: copy each peer's unit out; or (reductions) reduce unit i of my block over
//      every rank in rank order (bit-identical on every rank, and the same order as the simple
//      protocol), write it, and for two-shot push the result into every peer's set 1.
//   C. two-shot: copy the reduced units of the other blocks out of set 1.
// Sends never wait (after the entry check) and precede the thread's own waits; a wait needs only
// a peer's phase A or B send: every wait ends (all CTAs co-resident, as in the simple protocol).
// In place: the thread that reads unit i of an input block writes unit i of the output blocks,
// after that read, and no other thread touches unit i.
// Waits are bounded: past the communicator's timeout the thread records mkcclTimeout and leaves;
// the other threads see the recorded error at their next check.
#pragma once
#include "kernels/coll/coll_kernel.cuh"
#include "kernels/device/vec.cuh"

namespace mkccl {
namespace coll {

// ---- lines -----------------------------------------------------------------------------------

__device__ __forceinline__ void llStore(uint64_t* line, uint64_t v, uint32_t flag) {
  const uint64_t f = (uint64_t)flag << 32;
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(line), "l"((v & 0xffffffffull) | f),
               "l"((v >> 32) | f)
               : "memory");
}
__device__ __forceinline__ void llLoad(const uint64_t* line, uint64_t& lo, uint64_t& hi) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(line) : "memory");
}
__device__ __forceinline__ bool llHas(uint64_t lo, uint64_t hi, uint32_t flag) {
  return (uint32_t)(lo >> 32) == flag && (uint32_t)(hi >> 32) == flag;
}
__device__ __forceinline__ uint64_t llData(uint64_t lo, uint64_t hi) { return (lo & 0xffffffffull) | (hi << 32); }

// Spins until the line holds this call's flag (the caller's first look found it missing): its
// data, or ok = false on timeout (recorded) or once the communicator has an error or was aborted.
// Returned by value: pointers into the caller's registers would put them on the stack.
struct LLGot {
  uint64_t data;
  bool ok;
};
static __device__ __noinline__ LLGot llWait(const Args& a, const uint64_t* line, int peer) {
  uint64_t lo = 0, hi = 0;
  dev::WaitClock clock;
  for (unsigned spins = 1;; ++spins) {
    llLoad(line, lo, hi);
    if (llHas(lo, hi, llFlag())) return {llData(lo, hi), true};
    if ((spins & 1023) == 0) {
      const int r = clock.check(a.dev);
      if (r == 2) dev::recordError(a.dev, /*mkcclTimeout*/ 8, peer, siteOf(a), (uint32_t)(lo >> 32), llFlag());
      if (r != 0) return {0, false};
    }
  }
}

// Region (half of this call, set, sender) of receiver's LL area.
__device__ __forceinline__ uint64_t* llRegion(const Args& a, int receiver, int set, int sender) {
  const int n = a.dev.localRanks;
  const size_t r = ((size_t)(callSeq() & 1) * 2 + (size_t)set) * (size_t)(n - 1) + (size_t)peerIndex(receiver, sender, n);
  return reinterpret_cast<uint64_t*>(dev::dataOf(a.dev, receiver) + a.llBase + r * a.llLines * kLLLineBytes);
}

__device__ __forceinline__ size_t unitBytes(size_t L, size_t i) { return L - 8 * i < 8 ? L - 8 * i : 8; }

// Units i of a pass: i0 + u * T.
struct Pass {
  size_t i0, T;
  __device__ __forceinline__ size_t at(int u) const { return i0 + (size_t)u * T; }
};

// Receives units of a pass from one region (those below `units`) into v. False when a wait failed.
__device__ __forceinline__ bool llRecv(const Args& a, const uint64_t* region, const Pass& ps, size_t units,
                                       uint64_t (&v)[kLLUnroll], int peer) {
  uint64_t lo[kLLUnroll], hi[kLLUnroll];
#pragma unroll
  for (int u = 0; u < kLLUnroll; ++u)
    if (ps.at(u) < units) llLoad(region + 2 * ps.at(u), lo[u], hi[u]);
#pragma unroll
  for (int u = 0; u < kLLUnroll; ++u) {
    if (ps.at(u) >= units) continue;
    if (llHas(lo[u], hi[u], llFlag())) {
      v[u] = llData(lo[u], hi[u]);
    } else {
      const LLGot got = llWait(a, region + 2 * ps.at(u), peer);
      if (!got.ok) return false;
      v[u] = got.data;
    }
  }
  return true;
}

// ---- entry -----------------------------------------------------------------------------------

// Block 0's last warp tells every peer that this rank has entered the call (a small call's work
// sits in the first threads: this stays off its critical path).
__device__ __forceinline__ void llPostEntry(const Args& a) {
  const int n = a.dev.localRanks, me = a.dev.localRank;
  const int lane = (int)threadIdx.x - ((int)blockDim.x - 32);
  if (blockIdx.x == 0 && lane >= 0 && lane < n - 1)
    dev::storeRelease(entryFlag(a, peerAt(me, lane, n), me), dev::flagValue(callSeq(), 0));
}

// Every lane of a warp: may the warp write into the peers' areas (this call's half)? Lane j checks
// peer j's entry flag; __syncwarp orders the lanes' later stores after those acquires.
__device__ __forceinline__ bool llRoom(const Args& a) {
  const int n = a.dev.localRanks, me = a.dev.localRank;
  const int lane = threadIdx.x & 31;
  int fail = 0;
  if (lane < n - 1 && callSeq() > 1) {
    const int p = peerAt(me, lane, n);
    fail = !waitFlag(a, entryFlag(a, me, p), dev::flagValue(callSeq() - 1, 0), p);
  }
  __syncwarp();
  return !__any_sync(0xffffffffu, fail);
}

// ---- phases ----------------------------------------------------------------------------------

// A: my streams, to their receivers' set 0 (and my own block to recv).
__device__ __forceinline__ void llPush(const Args& a, size_t g, size_t T) {
  const int n = a.dev.localRanks, me = a.dev.localRank;
  const uint32_t flag = llFlag();
  size_t units = 0;
  for (int q = 0; q < n; ++q) units = llUnits(a.outLen[q]) > units ? llUnits(a.outLen[q]) : units;
  // AllGather and one-shot push the same bytes (offset 0) to every peer: one load, n-1 stores.
  const bool bcast = a.kind == kAllGather || a.kind == kAllReduceOneShot;
  const size_t bL = a.outLen[peerAt(me, 0, n)], bUnits = llUnits(bL);
  const char* bSrc = a.send + a.outOff[peerAt(me, 0, n)];
  for (size_t i0 = g; i0 < units; i0 += (size_t)kLLUnroll * T) {
    const Pass ps{i0, T};
    if (bcast) {
      uint64_t v[kLLUnroll];
#pragma unroll
      for (int u = 0; u < kLLUnroll; ++u)
        if (ps.at(u) < bUnits) v[u] = dev::loadUnit(bSrc + 8 * ps.at(u), unitBytes(bL, ps.at(u)));
      for (int j = 0; j < n - 1; ++j) {
        uint64_t* region = llRegion(a, peerAt(me, j, n), 0, me);
#pragma unroll
        for (int u = 0; u < kLLUnroll; ++u)
          if (ps.at(u) < bUnits) llStore(region + 2 * ps.at(u), v[u], flag);
      }
    } else {
      for (int j = 0; j < n - 1; ++j) {
        const int p = peerAt(me, j, n);
        const size_t L = a.outLen[p], pu = llUnits(L);
        if (i0 >= pu) continue;
        const char* src = a.send + a.outOff[p];
        uint64_t v[kLLUnroll];
#pragma unroll
        for (int u = 0; u < kLLUnroll; ++u)
          if (ps.at(u) < pu) v[u] = dev::loadUnit(src + 8 * ps.at(u), unitBytes(L, ps.at(u)));
        uint64_t* region = llRegion(a, p, 0, me);
#pragma unroll
        for (int u = 0; u < kLLUnroll; ++u)
          if (ps.at(u) < pu) llStore(region + 2 * ps.at(u), v[u], flag);
      }
    }
    // My own block (AllGather out of place, AllToAll): a local copy.
    const size_t L = a.outLen[me], su = llUnits(L);
    if (i0 < su) {
      const char* src = a.send + a.outOff[me];
      char* dst = a.recv + a.inOff[me];
#pragma unroll
      for (int u = 0; u < kLLUnroll; ++u)
        if (ps.at(u) < su) {
          const size_t nb = unitBytes(L, ps.at(u));
          dev::storeUnit(dst + 8 * ps.at(u), dev::loadUnit(src + 8 * ps.at(u), nb), nb);
        }
    }
  }
}

// B/C: every peer's stream in `set` of my area, copied to recv + inOff[q].
__device__ __forceinline__ bool llCopyOut(const Args& a, int set, size_t g, size_t T) {
  const int n = a.dev.localRanks, me = a.dev.localRank;
  size_t units = 0;
  for (int q = 0; q < n; ++q)
    if (q != me) units = llUnits(a.inLen[q]) > units ? llUnits(a.inLen[q]) : units;
  for (size_t i0 = g; i0 < units; i0 += (size_t)kLLUnroll * T) {
    const Pass ps{i0, T};
    for (int j = 0; j < n - 1; ++j) {
      const int q = peerAt(me, j, n);
      const size_t L = a.inLen[q], qu = llUnits(L);
      if (i0 >= qu) continue;
      uint64_t v[kLLUnroll];
      if (!llRecv(a, llRegion(a, me, set, q), ps, qu, v, q)) return false;
      char* dst = a.recv + a.inOff[q];
#pragma unroll
      for (int u = 0; u < kLLUnroll; ++u)
        if (ps.at(u) < qu) dev::storeUnit(dst + 8 * ps.at(u), v[u], unitBytes(L, ps.at(u)));
    }
  }
  return true;
}

// An 8-byte unit of T elements, reduced in T's accumulator type (reduce.cuh's Elem / operators).
template <typename T, typename Op>
struct UnitAcc {
  using E = dev::Elem<T>;
  using A = typename E::Acc;
  static constexpr int V = 8 / (int)sizeof(T);
  A acc[V];

  __device__ __forceinline__ static T elem(uint64_t u, int e) {
    const uint64_t b = u >> (8 * sizeof(T) * e);
    T x;
    memcpy(&x, &b, sizeof(T));
    return x;
  }
  __device__ __forceinline__ void first(uint64_t u) {
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = E::toAcc(elem(u, e));
  }
  __device__ __forceinline__ void add(uint64_t u) {
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = Op::apply(acc[e], E::toAcc(elem(u, e)));
  }
  __device__ __forceinline__ uint64_t result(int avgDiv) const {
    uint64_t r = 0;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const T x = E::fromAcc(avgDiv > 0 ? dev::divideBy<A>(acc[e], avgDiv) : acc[e]);
      uint64_t b = 0;
      memcpy(&b, &x, sizeof(T));
      r |= b << (8 * sizeof(T) * e);
    }
    return r;
  }
};

// B (reductions): unit i of my block over every rank, in rank order; two-shot also pushes it.
template <typename T, typename Op>
__device__ __forceinline__ bool llReduce(const Args& a, size_t g, size_t Tn) {
  const int n = a.dev.localRanks, me = a.dev.localRank;
  const size_t L = a.redLen, units = llUnits(L);
  const bool push = a.kind == kAllReduceTwoShot;
  const char* own = a.send + a.redInOff;
  char* out = a.recv + a.redOutOff;
  for (size_t i0 = g; i0 < units; i0 += (size_t)kLLUnroll * Tn) {
    const Pass ps{i0, Tn};
    UnitAcc<T, Op> acc[kLLUnroll];
    for (int r = 0; r < n; ++r) {
      const int q = a.localOfRank[r];
      uint64_t v[kLLUnroll];
      if (q == me) {
#pragma unroll
        for (int u = 0; u < kLLUnroll; ++u)
          if (ps.at(u) < units) v[u] = dev::loadUnit(own + 8 * ps.at(u), unitBytes(L, ps.at(u)));
      } else if (!llRecv(a, llRegion(a, me, 0, q), ps, units, v, q)) {
        return false;
      }
#pragma unroll
      for (int u = 0; u < kLLUnroll; ++u)
        if (ps.at(u) < units) {
          if (r == 0) acc[u].first(v[u]);
          else acc[u].add(v[u]);
        }
    }
#pragma unroll
    for (int u = 0; u < kLLUnroll; ++u) {
      if (ps.at(u) >= units) continue;
      const uint64_t res = acc[u].result(a.avgDiv);
      dev::storeUnit(out + 8 * ps.at(u), res, unitBytes(L, ps.at(u)));
      if (push)
        for (int j = 0; j < n - 1; ++j) llStore(llRegion(a, peerAt(me, j, n), 1, me) + 2 * ps.at(u), res, llFlag());
    }
  }
  return true;
}

// ---- the kernel ------------------------------------------------------------------------------

// kReduce = false: AllGather / AllToAll (T and Op unused).
template <typename T, typename Op, bool kReduce>
__global__ void __launch_bounds__(kLLThreads, 1) collLLKernel(const __grid_constant__ Args a) {
  beginCollCall(a);
  llPostEntry(a);
  if (!llRoom(a)) return;
  const size_t Tn = (size_t)gridDim.x * blockDim.x;
  const size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  llPush(a, g, Tn);
  if constexpr (kReduce) {
    if (!llReduce<T, Op>(a, g, Tn)) return;
    if (a.kind == kAllReduceTwoShot) llCopyOut(a, 1, g, Tn);
  } else {
    llCopyOut(a, 0, g, Tn);
  }
}

}  // namespace coll
}  // namespace mkccl
