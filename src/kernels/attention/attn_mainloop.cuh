// Producer and consumer halves of the attention mainloop.
//
// Barriers: Q full (1 arrival + the tile's TMA bytes) / Q empty (one arrival per consumer warp,
// once its last QK^T of the tile has completed); per stage K full / K empty and V full / V empty,
// the same way. Keys and values have separate stages so that S = Q K_j^T can start before V_j
// has landed.
//
// Consumer order per tile (kVariant fast / overlap), blocks 0 .. n-1:
//   S = Q K_0^T; softmax -> P_0
//   for j = 1 .. n-1: issue S = Q K_j^T, issue O += P_{j-1} V_{j-1}; wait for S (P V may still
//                     run); softmax of S on the CUDA cores while the tensor cores do P V; wait
//                     for P V; rescale O; P_j
//   O += P_{n-1} V_{n-1}
// With ping-pong (fast), the two consumer warpgroups issue their GEMMs in turns (named barriers
// kTurn0 / kTurn1), so one warpgroup's softmax overlaps the other's GEMMs.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include <type_traits>
#include "kernels/attention/attn_config.cuh"
#include "kernels/attention/attn_layout.h"
#include "kernels/attention/attn_params.h"
#include "kernels/attention/attn_sched.cuh"
#include "kernels/attention/attn_softmax.cuh"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/signal.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/device/wgmma.cuh"

namespace mkccl {
namespace attn {

// Named barriers: 1, 2 = each consumer warpgroup (128 threads); 3, 4 = the GEMM turns (256).
constexpr uint32_t kBarConsumer0 = 1;
constexpr uint32_t kBarTurn0 = 3;

__device__ __forceinline__ volatile int* smemFlags(uint32_t addr) {
  return reinterpret_cast<volatile int*>(__cvta_shared_to_generic(addr));
}

// A wait gave up (a bug, or a role that left): every wait of this CTA gives up, and the host hears.
__device__ __forceinline__ void attnFault(const AttnParams& p, uint32_t flagsAddr, int site) {
  smemFlags(flagsAddr)[0] = 1;
  if (p.fault != nullptr) {
    *reinterpret_cast<volatile int*>(p.fault) = static_cast<int>((blockIdx.x + 1) << 8) | site;
    __threadfence_system();
  }
}

// dev::waitGeq inlined: a call out of line from the consumer warpgroups (224 registers, wgmma
// accumulators live) or the comm blocks makes ptxas fail to allocate registers. Spins until
// *flag >= want; false on timeout (recorded as mkcclTimeout) or when the communicator failed.
__device__ __forceinline__ bool flagWait(const DevComm& c, const uint64_t* flag, uint64_t want, int site) {
  if (dev::loadAcquire(flag) >= want) return true;
  dev::WaitClock clock;
  uint32_t spins = 0;
  while (true) {
    const uint64_t v = dev::loadAcquire(flag);
    if (v >= want) return true;
    if ((++spins & 63u) == 0) {
      const int r = clock.check(c);
      if (r == 2) dev::recordError(c, /*mkcclTimeout*/ 8, -1, site, v, want);
      if (r != 0) return false;
    }
    __nanosleep(64);
  }
}

// Step whose keys/values the ring's receive slots hold when `step` runs: 0 = the caller's.
__device__ __forceinline__ int kvSource(int step) { return step == 0 ? 0 : 1 + (step & 1); }

// Ring: this call's flag epoch, written by the prep kernel that ran just before (attn_prep.cu).
__device__ __forceinline__ uint64_t ringEpoch(const AttnParams& p) {
  return *reinterpret_cast<const volatile uint64_t*>(p.ring.epoch);
}

// Ring: true once every comm block of the previous rank has delivered step `step`'s chunk.
__device__ __forceinline__ bool waitChunk(const AttnParams& p, int step) {
  const uint64_t want = dev::flagValue(ringEpoch(p), static_cast<uint64_t>(step));
  for (int i = 0; i < p.ring.nComm; ++i)
    if (!flagWait(p.comm, p.ring.arrive + i, want, kSiteUser + 1)) return false;
  dev::fenceProxyAsync();  // the flags were read by generic loads; TMA reads the data
  return true;
}

// One thread: every TMA load of the CTA's tiles.
template <class Cfg, bool kRing>
__device__ __forceinline__ void attnProducer(const AttnMaps& maps, const AttnParams& p, const AttnSmem<Cfg>& sm,
                                             AttnSched& sched) {
  const volatile int* abortFlag = smemFlags(sm.flags());
  dev::PipeState<Cfg::kStages> pipe;
  uint32_t qPhase = 0;
  int readyStep = 0;
  bool drain = false;
  const int group = p.shape.Hq / p.shape.Hkv;
  TileWork w;
  while (sched.next(w)) {
    if (w.total == 0) continue;
    if (!dev::mbarWait(sm.qEmpty(), qPhase ^ 1u, p.waitTimeoutNs, abortFlag)) {
      attnFault(p, sm.flags(), kAttnFaultProducer);
      return;
    }
    dev::mbarArriveExpectTx(sm.qFull(), Cfg::kQBytes);
#pragma unroll
    for (int c = 0; c < Cfg::kBoxes; ++c)
      dev::tmaLoad4d(sm.q() + c * Cfg::kQBoxBytes, &maps.q, sm.qFull(), c * 64, w.h, w.qRow0, w.b);
    qPhase ^= 1u;
    int src = 0;
    if constexpr (kRing) {
      if (w.step > readyStep) {
        if (!drain && !waitChunk(p, w.step)) {
          drain = true;  // the error is recorded; load on so that no barrier is left waiting
          smemFlags(sm.flags())[1] = 1;
        }
        readyStep = w.step;
      }
      src = kvSource(w.step);
    }
    const CUtensorMap* mk = &maps.k[src];
    const CUtensorMap* mv = &maps.v[src];
    const int hk = w.h / group;
    for (int it = 0; it < w.total; ++it) {
      int seg, j;
      blockAt(w, it, &seg, &j);
      const int32_t row = pick2(w.kv.s, seg).row0 + j * Cfg::BN;
      const uint32_t s = pipe.stage;
      if (!dev::mbarWait(sm.kEmpty(s), pipe.phase ^ 1u, p.waitTimeoutNs, abortFlag)) {
        attnFault(p, sm.flags(), kAttnFaultProducer);
        return;
      }
      dev::mbarArriveExpectTx(sm.kFull(s), Cfg::kKvBytes);
#pragma unroll
      for (int c = 0; c < Cfg::kBoxes; ++c)
        dev::tmaLoad4d(sm.k(s) + c * Cfg::kKvBoxBytes, mk, sm.kFull(s), c * 64, hk, row, w.b);
      if (!dev::mbarWait(sm.vEmpty(s), pipe.phase ^ 1u, p.waitTimeoutNs, abortFlag)) {
        attnFault(p, sm.flags(), kAttnFaultProducer);
        return;
      }
      dev::mbarArriveExpectTx(sm.vFull(s), Cfg::kKvBytes);
#pragma unroll
      for (int c = 0; c < Cfg::kBoxes; ++c)
        dev::tmaLoad4d(sm.v(s) + c * Cfg::kKvBoxBytes, mv, sm.vFull(s), c * 64, hk, row, w.b);
      pipe.advance();
    }
  }
}

// Lane 0 of every consumer warp arrives: the stage (or Q) may be overwritten.
__device__ __forceinline__ void release(uint32_t bar, uint32_t lane) {
  if (lane == 0) dev::mbarArrive(bar);
}

// S (64 x BN) = Q_half (64 x D) . K_s^T: D/16 k-steps, K-major operands in 64-column boxes.
template <class Cfg>
__device__ __forceinline__ void issueQK(float (&s)[Cfg::kAccS], const AttnSmem<Cfg>& sm, int consumer, uint32_t stage) {
  using Mma = dev::Wgmma<Cfg::BN, typename Cfg::In>;
  const uint32_t qBase = sm.q() + static_cast<uint32_t>(consumer) * 64u * 128u;
  const uint32_t kBase = sm.k(stage);
#pragma unroll
  for (int kk = 0; kk < Cfg::D / 16; ++kk) {
    const uint64_t dq = dev::smemDescSw128(qBase + (kk / 4) * Cfg::kQBoxBytes) + (kk % 4) * dev::kDescK16Step;
    const uint64_t dk = dev::smemDescSw128(kBase + (kk / 4) * Cfg::kKvBoxBytes) + (kk % 4) * dev::kDescK16Step;
    Mma::mma(s, dq, dk, kk == 0 ? 0u : 1u);
  }
}

// O (64 x D) (+)= P (64 x BN, registers) . V_s (BN x D, MN-major): BN/16 k-steps.
template <class Cfg>
__device__ __forceinline__ void issuePV(float (&o)[Cfg::kAccO], const uint32_t (&pk)[Cfg::kP], const AttnSmem<Cfg>& sm,
                                        uint32_t stage, bool accumulate) {
  using Mma = dev::WgmmaRs<Cfg::D, typename Cfg::In>;
  const uint64_t dv = dev::smemDescSw128Mn(sm.v(stage), Cfg::kKvBoxBytes);
#pragma unroll
  for (int kk = 0; kk < Cfg::BN / 16; ++kk) {
    const uint32_t a[4] = {pk[4 * kk], pk[4 * kk + 1], pk[4 * kk + 2], pk[4 * kk + 3]};
    Mma::mma(o, a, dv + kk * dev::kDescMnK16Step, (accumulate || kk > 0) ? 1u : 0u);
  }
}

// Per-thread view of a tile: its two rows' positions and block masks.
struct RowsView {
  int32_t qpos[2];  // positions of this thread's two rows
  int32_t colBase;  // 2 (l % 4)
};

// Column limits (block-relative, minus colBase) of block j of segment k for this thread's rows.
__device__ __forceinline__ void blockLimits(const TileWork& w, const RowsView& rv, int causal, int seg, int j,
                                            int (&lim)[2]) {
  const Seg& k = pick2(w.kv.s, seg);
  const int32_t first = j * kBlockN + rv.colBase;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int32_t n = k.len;
    if (causal && rv.qpos[h] - k.pos0 + 1 < n) n = rv.qpos[h] - k.pos0 + 1;
    lim[h] = n - first;  // maskScores compares columns 0 .. BN-1 against it
  }
}

// Waits on a full barrier of the pipeline. A wait that gives up records the fault (every later
// wait of the CTA then gives up at once) and the warpgroup goes on with whatever shared memory
// holds: no early exit between wgmma instructions (ptxas serialises wgmma when accumulators are
// live on a divergent path), and the kernel still ends.
template <class Cfg>
__device__ __forceinline__ void waitFull(const AttnParams& p, const AttnSmem<Cfg>& sm, uint32_t bar, uint32_t parity) {
  if (!dev::mbarWait(bar, parity, p.waitTimeoutNs, smemFlags(sm.flags()))) attnFault(p, sm.flags(), kAttnFaultConsumer);
}

// The turn of consumer `c` to issue GEMMs (fast variant), and handing it to the other one.
template <bool kOn>
__device__ __forceinline__ void turnTake(int c) {
  if constexpr (kOn) dev::namedBarrierSync(kBarTurn0 + static_cast<uint32_t>(c), 256);
}
template <bool kOn>
__device__ __forceinline__ void turnGive(int c) {
  if constexpr (kOn) asm volatile("bar.arrive %0, %1;" ::"r"(kBarTurn0 + static_cast<uint32_t>(1 - c)), "r"(256) : "memory");
}

// One tile of one consumer warpgroup: on return o holds O / l and lse the rows' LSE.
template <class Cfg, int kVariant>
__device__ __forceinline__ void consumeTile(float (&o)[Cfg::kAccO], float (&lse)[2], const TileWork& w,
                                            const AttnParams& p, const AttnSmem<Cfg>& sm,
                                            dev::PipeState<Cfg::kStages>& pipe, uint32_t& qPhase, int consumer,
                                            uint32_t tid) {
  constexpr bool kBf16 = std::is_same<typename Cfg::In, dev::Bf16>::value;
  constexpr bool kTurns = kVariant == kVariantFast;
  const uint32_t lane = tid & 31u, warp = tid >> 5;
  const float c = p.scaleLog2;
  const int causal = p.shape.causal;
  RowsView rv;
  const int row0 = consumer * 64 + static_cast<int>(warp) * 16 + static_cast<int>(lane >> 2);
  rv.qpos[0] = w.qPos0 + row0;
  rv.qpos[1] = w.qPos0 + row0 + 8;
  rv.colBase = 2 * static_cast<int>(lane & 3u);

  float s[Cfg::kAccS];
  uint32_t pk[Cfg::kP];
  RowState st;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.0f;
  float corr[2];

  waitFull<Cfg>(p, sm, sm.qFull(), qPhase);
  qPhase ^= 1u;

  // Block 0.
  int seg, j;
  blockAt(w, 0, &seg, &j);
  turnTake<kTurns>(consumer);
  waitFull<Cfg>(p, sm, sm.kFull(pipe.stage), pipe.phase);
  dev::wgmmaFence();
  issueQK<Cfg>(s, sm, consumer, pipe.stage);
  dev::wgmmaCommit();
  turnGive<kTurns>(consumer);
  dev::wgmmaWait<0>();
  dev::fenceAccumulators(s);
  release(sm.kEmpty(pipe.stage), lane);
  if (w.total == 1) release(sm.qEmpty(), lane);
  if (blockNeedsMask(pick2(w.kv.s, seg), j, causal, w.qPos0)) {
    int lim[2];
    blockLimits(w, rv, causal, seg, j, lim);
    maskScores(s, lim);
  }
  softmaxBlock(s, st, c, corr);
  packP<kBf16>(s, pk);
  uint32_t vStage = pipe.stage;
  pipe.advance();

  for (int it = 1; it < w.total; ++it) {
    blockAt(w, it, &seg, &j);
    const uint32_t kStage = pipe.stage;
    // vStage is the stage before kStage: its phase is ours unless kStage wrapped to 0.
    const uint32_t vPhase = kStage == 0 ? (pipe.phase ^ 1u) : pipe.phase;
    if constexpr (kVariant == kVariantSimple) {
      waitFull<Cfg>(p, sm, sm.vFull(vStage), vPhase);
      dev::wgmmaFence();
      issuePV<Cfg>(o, pk, sm, vStage, it > 1);
      dev::wgmmaCommit();
      dev::wgmmaWait<0>();
      dev::fenceAccumulators(o);
      release(sm.vEmpty(vStage), lane);
      waitFull<Cfg>(p, sm, sm.kFull(kStage), pipe.phase);
      dev::wgmmaFence();
      issueQK<Cfg>(s, sm, consumer, kStage);
      dev::wgmmaCommit();
      dev::wgmmaWait<0>();
      dev::fenceAccumulators(s);
      release(sm.kEmpty(kStage), lane);
      if (it == w.total - 1) release(sm.qEmpty(), lane);
      if (blockNeedsMask(pick2(w.kv.s, seg), j, causal, w.qPos0)) {
        int lim[2];
        blockLimits(w, rv, causal, seg, j, lim);
        maskScores(s, lim);
      }
      softmaxBlock(s, st, c, corr);
      scaleRows(o, corr);
      packP<kBf16>(s, pk);
    } else {
      turnTake<kTurns>(consumer);
      waitFull<Cfg>(p, sm, sm.kFull(kStage), pipe.phase);
      waitFull<Cfg>(p, sm, sm.vFull(vStage), vPhase);
      dev::wgmmaFence();
      issueQK<Cfg>(s, sm, consumer, kStage);
      dev::wgmmaCommit();
      issuePV<Cfg>(o, pk, sm, vStage, it > 1);
      dev::wgmmaCommit();
      turnGive<kTurns>(consumer);
      dev::wgmmaWait<1>();  // S is ready; P V may still run
      dev::fenceAccumulators(s);
      release(sm.kEmpty(kStage), lane);
      if (it == w.total - 1) release(sm.qEmpty(), lane);
      if (blockNeedsMask(pick2(w.kv.s, seg), j, causal, w.qPos0)) {
        int lim[2];
        blockLimits(w, rv, causal, seg, j, lim);
        maskScores(s, lim);
      }
      softmaxBlock(s, st, c, corr);
      dev::wgmmaWait<0>();
      dev::fenceAccumulators(o);
      fenceRegs(pk);
      release(sm.vEmpty(vStage), lane);
      scaleRows(o, corr);
      packP<kBf16>(s, pk);
    }
    vStage = kStage;
    pipe.advance();
  }

  // O += P_{n-1} V_{n-1}.
  {
    const uint32_t vPhase = pipe.stage == 0 ? (pipe.phase ^ 1u) : pipe.phase;
    turnTake<kTurns>(consumer);
    waitFull<Cfg>(p, sm, sm.vFull(vStage), vPhase);
    dev::wgmmaFence();
    issuePV<Cfg>(o, pk, sm, vStage, w.total > 1);
    dev::wgmmaCommit();
    turnGive<kTurns>(consumer);
    dev::wgmmaWait<0>();
    dev::fenceAccumulators(o);
    release(sm.vEmpty(vStage), lane);
  }
  finishRows(o, st, c, lse);
}

}  // namespace attn
}  // namespace mkccl
