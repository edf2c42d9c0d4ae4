// mkcclRingAttention's host side: the ring's symmetric scratch (its flags and epoch, two receive
// slots of K|V, the fp32 merge state, per-tile flags and per-step counters), the comm-block count,
// the prep kernel (attn_prep.cu) and one persistent launch (attn_kernel.cuh, attn_ring.cuh).
#include <string.h>
#include <algorithm>
#include <cmath>
#include "kernels/attention/attn_layout.h"
#include "ops/attention/attention_ops.h"
#include "runtime/bootstrap.h"
#include "base/check.h"
#include "runtime/comm.h"
#include "base/log.h"
#include "ops/tuner/op_state.h"
#include "runtime/symmem.h"

namespace mkccl {

namespace {

// Control block at the start of the scratch (64-bit words), zeroed when the scratch is allocated:
constexpr int kMaxComm = 32;              // [0, 32): arrive flags, raised by the previous rank
constexpr int kFreeSlot = kMaxComm;       // 32: the next rank's progress (slot reuse)
constexpr int kEpochSlot = kMaxComm + 1;  // 33: this rank's flag epoch (attn_prep.cu)
constexpr size_t kCtrlBytes = 512;
constexpr double kCommCtaBytesPerS = 35e9;  // one comm block's push rate over NVLink (bulk stores)
constexpr double kSmFlops = 4.5e12;         // one SM's attention rate, about 600 TFLOP/s over 132

size_t align256(size_t x) { return (x + 255) & ~size_t(255); }

struct ScratchMap {
  size_t slot[2], oAcc, lseAcc, itemFlags, counters, total;
};

ScratchMap scratchMap(size_t kvBytes, int64_t items, int d) {
  ScratchMap m;
  size_t at = kCtrlBytes;
  for (int i = 0; i < 2; ++i) {
    m.slot[i] = at;
    at += align256(2 * kvBytes);
  }
  m.oAcc = at;
  at += align256(static_cast<size_t>(items) * 2 * 128 * (d / 2) * 4);
  m.lseAcc = at;
  at += align256(static_cast<size_t>(items) * 2 * 256 * 4);
  m.itemFlags = at;
  at += align256(static_cast<size_t>(items) * 2 * 8);
  m.counters = at;
  at += align256(attn::kMaxSteps * 8);
  m.total = at;
  return m;
}

// Comm blocks: enough that a step's chunk (K|V) travels in about half a step's compute time.
int commCtasFor(const mkcclComm* comm, const attn::AttnShape& s, size_t kvBytes, int d, int maxCtas) {
  if (s.ws <= 1) return 0;
  if (comm->cfg.commCtas > 0) return std::max(1, std::min({comm->cfg.commCtas, kMaxComm, maxCtas - 1}));
  const double pairs = static_cast<double>(s.B) * s.Hq * s.sLocal * s.sLocal * (s.causal ? 0.5 : 1.0);
  const double stepS = 4.0 * d * pairs / (kSmFlops * std::max(1, maxCtas - 4));
  const double bytes = 2.0 * static_cast<double>(kvBytes);
  int n = static_cast<int>(std::ceil(bytes / (kCommCtaBytesPerS * 0.5 * stepS)));
  n = std::max(2, std::min(n, 16));
  return std::min(n, std::max(1, maxCtas / 4));
}

}  // namespace

mkcclResult_t ringAttentionOp(OpCtx& ctx, const attn::AttnArgs& a, int layout) {
  using namespace attn;
  mkcclComm* comm = ctx.comm;
  MKCCL_CHECK(checkFault("mkcclRingAttention"));
  const int variant = attnVariant(tuningOf(comm));
  const int ws = comm->nranks, r = comm->rank;
  if (ws > kMaxSteps || comm->nNodes != 1)
    return setError(mkcclInvalidUsage, "mkcclRingAttention: %d ranks on %d nodes: the ring runs over NVLink inside one "
                    "node, at most %d ranks", ws, comm->nNodes, kMaxSteps);

  AttnLaunch l;
  memset(&l.maps, 0, sizeof(l.maps));
  memset(&l.params, 0, sizeof(l.params));
  AttnParams& p = l.params;
  AttnShape& s = p.shape;
  s.B = a.B;
  s.Hq = a.hq;
  s.Hkv = a.hkv;
  s.causal = a.causal;
  s.steps = ws;
  s.ring = 1;
  s.layout = layout;
  s.rank = r;
  s.ws = ws;
  s.sLocal = a.sq;
  s.q = ringSegs(layout, r, ws, a.sq);
  s.kv = s.q;

  const size_t kvBytes = static_cast<size_t>(a.B) * a.skv * a.hkv * a.d * 2;
  const int64_t items = static_cast<int64_t>(a.B) * a.hq * tilesPerHead(s.q);
  const ScratchMap sm = scratchMap(kvBytes, items, a.d);
  const SymRegion* region = nullptr;
  const size_t bytesBefore = comm->scratch[kScratchRingAttention].bytes;
  MKCCL_CHECK(symScratchGet(comm, kScratchRingAttention, sm.total, &region));
  char* mine = region->peer[comm->localRank];
  if (region->bytes != bytesBefore) {
    // A new region (every rank grows it in the same call): its flags start from zero on every rank
    // before any rank's kernel can raise one of them.
    CUDA_CHECK(cudaMemsetAsync(mine, 0, kCtrlBytes, ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    MKCCL_CHECK(comm->bootstrap->barrier());
  }
  uint64_t* ctrl = reinterpret_cast<uint64_t*>(mine);

  const int maxCtas = opMaxCtas(comm);
  const int nComm = commCtasFor(comm, s, kvBytes, a.d, maxCtas);
  const int64_t units = totalUnits(s);
  const int compute = static_cast<int>(std::min<int64_t>(units, maxCtas - nComm));
  if (compute < 1)
    return setError(mkcclInvalidUsage, "mkcclRingAttention: %d CTAs allowed (maxCtas) leave none for compute beside %d "
                    "comm blocks", maxCtas, nComm);
  l.ctas = nComm + compute;
  l.dev = comm->cudaDev;
  l.smCount = comm->smCount;
  l.ring = true;
  l.variant = variant == kVariantSimple ? kVariantSimple : kVariantFast;
  l.stream = ctx.stream;

  p.scaleLog2 = a.scale * 1.4426950408889634f;
  p.lseRows = a.sq;
  p.lse = a.lse;
  p.comm = ctx.dev;
  // Intra-CTA waits must outlast the waits on peers (the producer may wait that long for a chunk).
  p.waitTimeoutNs = ctx.dev.timeoutNs + kWaitTimeoutNs;
  MKCCL_CHECK(faultWord(&p.fault));

  RingArgs& R = p.ring;
  R.nComm = nComm;
  R.commLanes = 4;
  R.srcK = static_cast<const char*>(a.K);
  R.srcV = static_cast<const char*>(a.V);
  R.kvBytes = static_cast<int64_t>(kvBytes);
  R.oAcc = reinterpret_cast<float*>(mine + sm.oAcc);
  R.lseAcc = reinterpret_cast<float*>(mine + sm.lseAcc);
  R.itemFlags = reinterpret_cast<uint64_t*>(mine + sm.itemFlags);
  R.counters = reinterpret_cast<unsigned long long*>(mine + sm.counters);
  R.O = a.O;
  for (int t = 0; t < kMaxSteps; ++t)
    R.doneTarget[t] = t < ws ? static_cast<int32_t>(2 * tilesWithWork(s, t) + (t > 0 ? 1 : 0)) : 0;
  R.epoch = ctrl + kEpochSlot;
  if (ws > 1) {
    const int next = comm->rankLocal[(r + 1) % ws], prev = comm->rankLocal[(r + ws - 1) % ws];
    auto ctrlOf = [&](int local) { return reinterpret_cast<uint64_t*>(region->peer[local]); };
    for (int i = 0; i < 2; ++i) {
      R.slot[i] = mine + sm.slot[i];
      R.nextSlot[i] = region->peer[next] + sm.slot[i];
    }
    R.arrive = ctrl;
    R.nextArrive = ctrlOf(next);
    R.freeFlag = ctrl + kFreeSlot;
    R.prevFree = ctrlOf(prev) + kFreeSlot;
  } else {
    for (int i = 0; i < 2; ++i) R.slot[i] = R.nextSlot[i] = mine + sm.slot[i];
  }

  MKCCL_CHECK(encodeHeadMap(&l.maps.q, a.Q, a.type, a.B, a.sq, a.hq, a.d, kBlockM));
  MKCCL_CHECK(encodeHeadMap(&l.maps.o, a.O, a.type, a.B, a.sq, a.hq, a.d, 64));
  MKCCL_CHECK(encodeHeadMap(&l.maps.k[0], a.K, a.type, a.B, a.skv, a.hkv, a.d, kBlockN));
  MKCCL_CHECK(encodeHeadMap(&l.maps.v[0], a.V, a.type, a.B, a.skv, a.hkv, a.d, kBlockN));
  for (int i = 0; i < 2; ++i) {
    MKCCL_CHECK(encodeHeadMap(&l.maps.k[1 + i], R.slot[i], a.type, a.B, a.skv, a.hkv, a.d, kBlockN));
    MKCCL_CHECK(encodeHeadMap(&l.maps.v[1 + i], R.slot[i] + kvBytes, a.type, a.B, a.skv, a.hkv, a.d, kBlockN));
  }
  // The call's epoch, and per-tile flags and per-step counters from zero (local memory only).
  MKCCL_CHECK(ringPrep(ctrl + kEpochSlot, ctx.dev.seq, mine + sm.itemFlags,
                       sm.total - sm.itemFlags, ctx.stream));
  MKCCL_TRACE("mkcclRingAttention rank %d/%d B %d S %d H %d/%d D %d causal %d layout %d: %d comm + %d compute CTAs, "
              "%lld units", r, ws, a.B, a.sq, a.hq, a.hkv, a.d, a.causal, layout, nComm, compute,
              static_cast<long long>(units));
  return dispatch(l, a.type, a.d);
}

}  // namespace mkccl
