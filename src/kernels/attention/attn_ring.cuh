// Ring Attention's communication inside the attention kernel.
//
// Keys/values travel r-1 -> r -> r+1: at step t rank r computes with the chunk of rank r - t,
// which sits in its receive slot t % 2 (step 0: the caller's K, V). Blocks [0, nComm) of the
// kernel forward that chunk to the next rank's slot (t + 1) % 2 while the compute blocks work:
//
//   for t = 0 .. ws-2:  wait until our chunk of step t has arrived (t > 0: arrive[i] >= (E, t),
//                       raised by the previous rank's comm block i after its stores completed);
//                       wait until the next rank no longer reads its slot (t + 1) % 2
//                       (free >= (E, 0) for t + 1 <= 2: it has entered this call; else it
//                       has finished step t - 1, which used that slot);
//                       bulk-copy our share of K|V there (lanes: one thread per warp, 16 KiB
//                       pieces through shared memory); raise next.arrive[i] = (E, t + 1).
//
// Every block uses the same split of the K|V bytes, so block i forwards exactly what block i of
// the previous rank delivered and waits on that one flag only.
//
// "Finished step k": each compute warpgroup adds 1 to counters[k] when it is done with a tile of
// step k; the add that completes a step (2 per tile with work, and 1 from the completion of the
// step before, so they complete in order) reports (E, k + 1) to the previous rank's free flag.
//
// E, the call's epoch, is read from device memory (attn_prep.cu): E = max(E + 1, seq), so it
// grows with every launch, also when a captured CUDA graph replays the same launch (whose
// sequence number is frozen in its parameters), and stays the same on every rank.
#pragma once
#include <stdint.h>
#include "kernels/attention/attn_config.cuh"
#include "kernels/attention/attn_mainloop.cuh"
#include "kernels/attention/attn_params.h"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/signal.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"

namespace mkccl {
namespace attn {

constexpr uint32_t kCommPieceBytes = 16 << 10;
constexpr int kCommMaxLanes = 4;
constexpr uint32_t kBarCommLanes = 5;  // named barrier of the comm warps

template <class Cfg>
struct CommCfg {
  static constexpr int kLanes = kCommMaxLanes;
  // Shared memory below the barrier area, split over the lanes: 3 stages of 16 KiB at most.
  static constexpr int kFitStages = static_cast<int>(Cfg::kOffBar / kLanes / kCommPieceBytes);
  static constexpr int kStages = kFitStages < 3 ? kFitStages : 3;
  static_assert(kStages >= 2, "comm stages");
  static constexpr uint32_t kLaneBytes = kStages * kCommPieceBytes;
};

// Where byte x of this rank's K|V chunk of step t lives.
__device__ __forceinline__ const char* chunkSrc(const RingArgs& R, int t, int64_t x) {
  if (t == 0) return x < R.kvBytes ? R.srcK + x : R.srcV + (x - R.kvBytes);
  return R.slot[t & 1] + x;
}

// One lane (one thread) copies [beg, end) of the step's chunk into the next rank's slot. False if
// a load did not complete in time (the error is recorded).
template <class Cfg>
__device__ __forceinline__ bool commCopy(const AttnParams& p, int t, int64_t beg, int64_t end, uint32_t stages,
                                         uint32_t bars, uint32_t& k, const volatile int* neverSet) {
  using CC = CommCfg<Cfg>;
  const RingArgs& R = p.ring;
  char* dst = R.nextSlot[(t + 1) & 1];
  // The K / V boundary cuts pieces: a piece never straddles it (the sources differ at step 0).
  const int64_t len = end - beg;
  if (len <= 0) return true;
  auto pieceAt = [&](int64_t at, uint32_t* bytes) {
    int64_t n = end - at;
    if (n > kCommPieceBytes) n = kCommPieceBytes;
    if (at < R.kvBytes && at + n > R.kvBytes) n = R.kvBytes - at;
    *bytes = static_cast<uint32_t>(n);
  };
  // Pieces are found in order: each knows where the next starts.
  int64_t loadAt = beg;
  int64_t storeAt = beg;
  uint32_t loaded = 0, stored = 0;  // pieces of this call
  uint32_t sizes[CC::kStages];
  auto load = [&]() {
    const uint32_t s = (k + loaded) % CC::kStages;
    uint32_t bytes;
    pieceAt(loadAt, &bytes);
    sizes[(k + loaded) % CC::kStages] = bytes;
    dev::mbarArriveExpectTx(bars + 8u * s, bytes);
    dev::bulkLoad1d(stages + s * kCommPieceBytes, chunkSrc(R, t, loadAt), bytes, bars + 8u * s);
    loadAt += bytes;
    ++loaded;
  };
  while (loaded < CC::kStages && loadAt < end) load();
  bool ok = true;
  while (storeAt < end) {
    const uint32_t kk = k + stored, s = kk % CC::kStages;
    if (!dev::mbarWait(bars + 8u * s, (kk / CC::kStages) & 1u, p.comm.timeoutNs, neverSet)) {
      dev::recordError(p.comm, /*mkcclTimeout*/ 8, -1, kSiteUser + 3, 0, 0);
      ok = false;
      break;
    }
    const uint32_t bytes = sizes[s];
    dev::bulkStore1d(dst + storeAt, stages + s * kCommPieceBytes, bytes);
    dev::bulkCommit();
    storeAt += bytes;
    ++stored;
    // Reload the stage of the previous piece once its store has read it.
    if (stored >= 2 && loadAt < end) {
      dev::bulkWaitRead<1>();
      load();
    }
  }
  // Loads issued but not waited for (only after a failure) still complete into our stages: wait.
  k += loaded;
  dev::bulkWait<0>();
  return ok;
}

// The comm blocks' role (every thread of the block calls it; warps past the lanes leave).
template <class Cfg>
__device__ __forceinline__ void ringCommRole(const AttnParams& p, uint8_t* smemRaw) {
  using CC = CommCfg<Cfg>;
  const RingArgs& R = p.ring;
  const DevComm& c = p.comm;
  const int i = static_cast<int>(blockIdx.x);
  const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
  const uint64_t E = ringEpoch(p);
  // This rank entered the call: its slots no longer hold anything an earlier call reads.
  if (i == 0 && threadIdx.x == 0) dev::storeMaxRelease(R.prevFree, dev::flagValue(E, 0));
  if (warp >= static_cast<uint32_t>(CC::kLanes)) return;
  const uint32_t raw = dev::smemAddr(smemRaw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t bars = base + Cfg::kOffBar + 8u * CC::kStages * warp;
  const uint32_t stages = base + warp * CC::kLaneBytes;
  __shared__ int neverSet, allOk;
  if (threadIdx.x == 0) {
    neverSet = 0;
    allOk = 1;
  }
  if (lane == 0) {
    for (int s = 0; s < CC::kStages; ++s) dev::mbarInit(bars + 8u * s, 1);
    dev::fenceBarrierInit();
  }
  dev::namedBarrierSync(kBarCommLanes, CC::kLanes * 32);
  // This lane's share of the 2 kvBytes: 16-byte units split evenly over all lanes of all blocks.
  const int64_t units = 2 * R.kvBytes / 16;
  const int64_t lanesAll = static_cast<int64_t>(R.nComm) * CC::kLanes;
  const int64_t me = static_cast<int64_t>(i) * CC::kLanes + warp;
  const int64_t beg = units * me / lanesAll * 16, end = units * (me + 1) / lanesAll * 16;
  uint32_t k = 0;
  bool ok = true;
  for (int t = 0; t + 1 < p.shape.steps && ok; ++t) {
    if (lane == 0) {
      if (t > 0) ok = flagWait(c, R.arrive + i, dev::flagValue(E, static_cast<uint64_t>(t)), kSiteUser + 4);
      const int u = t + 1;
      const uint64_t freeWant = dev::flagValue(E, u <= 2 ? 0 : static_cast<uint64_t>(u - 1));
      if (ok) ok = flagWait(c, R.freeFlag, freeWant, kSiteUser + 5);
      if (ok) {
        dev::fenceProxyAsync();  // flags read by generic loads before bulk reads of the data
        ok = commCopy<Cfg>(p, t, beg, end, stages, bars, k, &neverSet);
        dev::fenceProxyAsyncGlobal();  // the bulk stores (performed) before the generic release
      }
    }
    if (lane == 0 && !ok) allOk = 0;
    // Every lane's stores are done before block i says so (the other warps have left: a named
    // barrier of the lane warps only).
    dev::namedBarrierSync(kBarCommLanes, CC::kLanes * 32);
    ok = *reinterpret_cast<volatile int*>(&allOk) != 0;
    if (!ok) break;
    if (threadIdx.x == 0) {
      __threadfence_system();
      dev::storeRelease(R.nextArrive + i, dev::flagValue(E, static_cast<uint64_t>(t) + 1));
    }
  }
}

// A compute warpgroup is done with a tile of step `step` (one thread per warpgroup).
__device__ __forceinline__ void ringTileDone(const AttnParams& p, int step) {
  const RingArgs& R = p.ring;
  if (R.prevFree == nullptr) return;
  __threadfence();
  int k = step;
  unsigned long long v = atomicAdd(R.counters + k, 1ull) + 1ull;
  if (v != static_cast<unsigned long long>(R.doneTarget[k])) return;
  const uint64_t E = ringEpoch(p);
  while (true) {
    __threadfence();
    dev::storeMaxRelease(R.prevFree, dev::flagValue(E, static_cast<uint64_t>(k) + 1));
    if (k + 1 >= p.shape.steps) return;
    ++k;
    v = atomicAdd(R.counters + k, 1ull) + 1ull;
    if (v != static_cast<unsigned long long>(R.doneTarget[k])) return;
  }
}

}  // namespace attn
}  // namespace mkccl
