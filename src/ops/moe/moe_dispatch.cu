// The MoE dispatch kernel: routing read on the device, each (token, rank) row pushed once into its
// owner's expert-major receive buffer (symmetric memory), rows duplicated there for the owner's
// other experts. One persistent grid (all CTAs co-resident: it syncs the grid).
//
//   0. entry   CTA 0 restarts every source's queue tail here (seq << 32), then tells the source
//              it may come in.
//   1. count   each warp ranks its tokens' slots per key (expert, or destination rank for the
//              token's first slot there) with __match_any_sync, in a fixed order (warp, token
//              round, slot, lane): the layout is a function of the routing alone.
//   -- grid sync --
//   2. publish CTA 0 turns the per-CTA counts into CTA bases (sums over the CTAs before), waits for
//              every peer's entry and writes this rank's key totals into every rank's counts
//              table, then raises count flag [me] there.
//   3. layout  every CTA waits for every rank's counts and derives the receive layout of every
//              rank (segments padded to `align` rows, sources in rank order inside a segment);
//              a rank that would receive more than `rows` rows stops the call on every rank (all
//              see the same counts), with an error and nothing written.
//   4. send    a warp per token: for each rank d it routes to, the row goes to the position of
//              its first slot on d (or to every slot's position when d is this rank), with the
//              rowInfo of each slot and, for d != me, the pair record; then the pair takes a slot
//              of d's queue for this rank (an atomic add on d's tail) and writes its index there.
//   5. expand  at the same time, on the other half of every CTA's warps: the pairs that peers
//              send here, taken in the order of their queue slots (the order they landed); each
//              pair's row is read once and stored at its other rows (a token's further experts
//              here). The kernel ends when every peer's pair has landed.
//   Across nodes (Args::net; moe_net.cuh): step 0 also signals "ready" to every rank of the other
//              nodes; step 2 exchanges the key totals with them through the network window; step 3
//              also checks that every rank's window holds this call (same verdict everywhere,
//              before any data put); step 4 stages a remote node's pair as one window entry (row,
//              pair record, rowInfos) and the warp completing a piece puts it; step 5 takes a
//              remote source's pairs in pair order, waits for each one's piece and writes the row,
//              rowInfos and pair record here as the NVLink path would have. Ranks are global in
//              keys, counts and pairs; regions, queues and entry flags are a local rank's.
//   Fused (mkcclMoeDispatchGemm): every warp sends, writing the metadata and a send list only;
//   -- grid sync --   then CTA 0 raises done flag [me] at every peer.
//   4b.        every slot's row goes to its own row, walked in the destinations' row order, each
//              raising its 128-row block's arrival counter there (the GEMM waits for those); no
//              expansion. The kernel ends when every peer's done flag has arrived.
#include "kernels/moe/moe_common.cuh"
#include "kernels/moe/moe_net.cuh"
#include "ops/moe/moe_kernels.h"

namespace mkccl {
namespace moe {

namespace {

// A slot's rank among the warp's earlier slots of the same key (key < 0: none, -1 returned), the
// warp's count of the key advanced. Every lane of the warp calls it.
__device__ __forceinline__ int rankInWarp(int32_t* cnt, int key) {
  const unsigned grp = __match_any_sync(0xffffffffu, key);
  int base = 0, r = -1;
  if (key >= 0) base = cnt[key];
  __syncwarp();
  if (key >= 0) {
    r = base + __popc(grp & ((1u << laneId()) - 1u));
    if (laneId() == __ffs(grp) - 1) cnt[key] = base + __popc(grp);
  }
  __syncwarp();
  return r;
}

// An expert id as the kernels use it: -1 (dropped) for -1 and for anything outside [0, E).
__device__ __forceinline__ int validExpert(int e, int E) { return e >= 0 && e < E ? e : -1; }

// Rank q's arrival words (Region::arrivals): [0] the layout flag, [1 + b] block b's counter.
__device__ __forceinline__ uint64_t* arrivalsOf(const Args& a, int q) {
  return reinterpret_cast<uint64_t*>(regionOf(a, q) + a.reg.arrivals);
}

// Block-uniform: every flag base[q] (q < n ranks of the communicator, q != me unless withMe)
// reaches want; the flags are this rank's (raised by local peers, or here for remote sources).
__device__ __forceinline__ bool waitAllRanks(const Args& a, const DevComm& c, const uint64_t* base, uint64_t want,
                                             bool withMe) {
  int ok = 1;
  const int q = threadIdx.x;
  if (q < a.dims.ranks && (withMe || q != c.rank)) ok = dev::waitGeq(c, base + q, want, a.lidx[q], kSiteMoeDispatch);
  return __syncthreads_and(ok) != 0;
}

__device__ __forceinline__ void recordBadId(const DevComm& c, int e, int E) {
  dev::recordError(c, /*mkcclInvalidArgument*/ 4, -1, kSiteMoeExpertId, (uint64_t)(int64_t)e, (uint64_t)E);
}

}  // namespace

// The whole kernel but the drain of its puts (dispatchKernel). Ranks: n, me global; lme, L local.
__device__ __forceinline__ void dispatchBody(const Args& a, const DevComm& c, Tickets& tk) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ long long warpSums[32];
  __shared__ int s_badId, s_bad, s_over, s_netOver;
  __shared__ unsigned long long s_netNeed;
  __shared__ NetPairs s_pairs;  // across nodes: the call's pairs between every two ranks
  __shared__ NetView s_view;    // and this rank's window view of them (dispatch entries)

  const Dims D = a.dims;
  const int E = D.experts, K = D.keys(), k = D.topk, El = D.localExperts();
  const int n = D.ranks, me = c.rank, lme = c.localRank, L = c.localRanks, b = blockIdx.x, warp = warpId(),
            lane = laneId();
  const TokenSplit sp{a.T, a.ctas};
  const uint64_t seq = c.seq;

  int32_t* warpCnt = reinterpret_cast<int32_t*>(smem);  // [kWarps][K]; after the count: warp bases
  int32_t* ctaBase = warpCnt + kWarps * K;                // [K]
  int32_t* sendBase = ctaBase + K;                        // [E]: my first row of expert e at its owner
  int32_t* colSum = sendBase + E;                         // [E]: rows of expert e from every rank
  long long* segScan = reinterpret_cast<long long*>(smem + alignUp((size_t)(kWarps * K + K + 2 * E) * 4, 8));  // [E+1]
  long long* myScan = segScan + E + 1;  // [E+1] fused: my rows of global expert e start at myScan[e] of my send list

  if (b == 0 && (int)threadIdx.x < n && (int)threadIdx.x != me && !isRemote(a, threadIdx.x)) {
    // Source q's queue slots restart for this call, then q may come in (the same thread: the
    // release covers the store).
    const int q = threadIdx.x;
    dev::storeRelaxed(reinterpret_cast<uint64_t*>(a.region[lme] + a.reg.queueTail) + q, seq << 32);
    dev::storeRelease(dev::flagsOf(c, a.lidx[q]) + kBarrierSlot + lme, dev::flagValue(seq, 0));
  }
  if (b == 0) netPostReady(a, c, tk);  // the other nodes' ranks may send into my window

  // ---- 1. count ----
  for (int i = threadIdx.x; i < kWarps * K; i += blockDim.x) warpCnt[i] = 0;
  if (threadIdx.x == 0) s_bad = 0;
  __syncthreads();
  {
    int32_t* cnt = warpCnt + warp * K;
    const int w0 = sp.warpStart(b, warp), w1 = sp.warpStart(b, warp + 1);
    for (int base = w0; base < w1; base += 32) {
      const int t = base + lane;
      const bool act = t < w1;
      int d[kMaxTopk];
#pragma unroll
      for (int j = 0; j < kMaxTopk; ++j) {
        int e = -1;
        if (act && j < k) {
          const int raw = a.topkIdx[(size_t)t * k + j];
          e = validExpert(raw, E);
          if (raw < -1 || raw >= E) {
            s_badId = raw;
            s_bad = 1;
          }
        }
        d[j] = e >= 0 ? e / El : -1;
        bool first = d[j] >= 0;
#pragma unroll
        for (int jj = 0; jj < j; ++jj) first = first && d[jj] != d[j];
        const int r = rankInWarp(cnt, e);
        const int rp = rankInWarp(cnt, first ? E + d[j] : -1);
        if (act && j < k) {
          a.local.slotRank[(size_t)t * k + j] = r;
          a.local.pairRank[(size_t)t * k + j] = rp;
        }
      }
    }
  }
  __syncthreads();
  for (int key = threadIdx.x; key < K; key += blockDim.x) {
    int s = 0;
    for (int w = 0; w < kWarps; ++w) {
      const int v = warpCnt[w * K + key];
      warpCnt[w * K + key] = s;
      s += v;
    }
    a.local.ctaCounts[(size_t)b * K + key] = s;
  }
  if (!dev::gridSync(c, 0, 1)) return;

  // ---- 2. publish ----
  // CTA 0 turns the per-CTA counts into per-CTA bases in place, 16 loads in flight per key (one
  // load at a time over up to 132 CTAs would be a chain of L2 round trips), and publishes the totals.
  if (b == 0) {
    for (int key = threadIdx.x; key < K; key += blockDim.x) {
      int s = 0;
      for (int q0 = 0; q0 < a.ctas; q0 += 16) {
        int v[16];
#pragma unroll
        for (int u = 0; u < 16; ++u) v[u] = q0 + u < a.ctas ? __ldcg(a.local.ctaCounts + (size_t)(q0 + u) * K + key) : 0;
#pragma unroll
        for (int u = 0; u < 16; ++u)
          if (q0 + u < a.ctas) {
            a.local.ctaCounts[(size_t)(q0 + u) * K + key] = s;
            s += v[u];
          }
      }
      ctaBase[key] = s;  // CTA 0's base is 0: its smem holds the totals until step 3
    }
    if (!waitRanks(c, entryFlags(c), dev::flagValue(seq, 0), false, kSiteMoeDispatch)) return;
    for (int key = threadIdx.x; key < K; key += blockDim.x)
      for (int p = 0; p < L; ++p) reinterpret_cast<int32_t*>(a.region[p] + a.reg.counts)[me * K + key] = ctaBase[key];
    __syncthreads();
    if ((int)threadIdx.x < L) {
      dev::fenceSys();
      dev::storeRelease(moeFlags(a.region[threadIdx.x]) + kCountFlag + me, dev::flagValue(seq, 1));
    }
    if (a.net && !netExchangeCounts(a, c, ctaBase, tk)) return;
  }

  // ---- 3. layout ----
  if (!waitAllRanks(a, c, moeFlags(a.region[lme]) + kCountFlag, dev::flagValue(seq, 1), true)) return;
  // This CTA's bases (written by CTA 0 before it raised our own count flag).
  for (int key = threadIdx.x; key < K; key += blockDim.x) ctaBase[key] = __ldcg(a.local.ctaCounts + (size_t)b * K + key);
  {
    const int32_t* counts = reinterpret_cast<const int32_t*>(a.region[lme] + a.reg.counts);
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      int col = 0, before = 0;
      for (int q = 0; q < n; ++q) {
        const int v = __ldcg(counts + q * K + e);
        col += v;
        if (q < me) before += v;
      }
      colSum[e] = col;
      sendBase[e] = before;
      segScan[e] = (long long)alignUp((size_t)col, (size_t)D.align);
      if (a.fused) myScan[e] = __ldcg(counts + me * K + e);
    }
  }
  if (threadIdx.x == 0) s_over = -1, s_netOver = -1, s_netNeed = 0;
  __syncthreads();
  if (a.fused) {
    blockExclusiveScan(myScan, E, warpSums);
    __syncthreads();  // warpSums again below
  }
  blockExclusiveScan(segScan, E, warpSums);
  for (int e = threadIdx.x; e < E; e += blockDim.x) sendBase[e] += (int)(segScan[e] - segScan[e / El * El]);
  if ((int)threadIdx.x < n && segScan[(threadIdx.x + 1) * El] - segScan[threadIdx.x * El] > (long long)D.rows)
    atomicMax(&s_over, (int)threadIdx.x);
  __syncthreads();
  if (s_over >= 0) {
    // Every rank sees the same counts and stops here: no rank writes into another's buffers.
    const int d = s_over;
    if (b == 0 && threadIdx.x == 0)
      dev::recordError(c, /*mkcclInvalidUsage*/ 5, d, kSiteMoeCapacity,
                       (uint64_t)(segScan[(d + 1) * El] - segScan[d * El]), (uint64_t)D.rows);
    return;
  }
  if (a.net) {
    // This call's window layout, and whether every rank's window holds its dispatch and its
    // combine: every rank has the same table, so every rank stops here or none does, before any
    // data put (only the ready signals and the counts have been sent).
    loadNetPairs(a, reinterpret_cast<const int32_t*>(a.region[lme] + a.reg.counts), &s_pairs);
    if (threadIdx.x == 0) netViewFor(s_pairs, false, D, me, &s_view);
    if ((int)threadIdx.x < n) {
      const unsigned long long need = netWindowNeed(s_pairs, D, threadIdx.x);
      if (need > c.net->windowBytes) atomicMax(&s_netNeed, need);
    }
    __syncthreads();
    if ((int)threadIdx.x < n && s_netNeed > 0 && netWindowNeed(s_pairs, D, threadIdx.x) == s_netNeed)
      atomicMax(&s_netOver, (int)threadIdx.x);
    __syncthreads();
    if (s_netOver >= 0) {
      if (b == 0) {
        tk.drain(c);  // CTA 0's signals and counts left first (the error makes every drain give up)
        if (threadIdx.x == 0)
          dev::recordError(c, /*mkcclInvalidUsage*/ 5, s_netOver, kSiteMoeNetWindow, s_netNeed, c.net->windowBytes);
      }
      return;
    }
  }
  const long long myFirst = segScan[me * El];
  if (b == 0) {
    for (int le = threadIdx.x; le < El; le += blockDim.x) {
      a.local.expertOffsets[le] = (int32_t)(segScan[me * El + le] - myFirst);
      a.local.expertCounts[le] = colSum[me * El + le];
    }
    if (threadIdx.x == 0) a.local.expertOffsets[El] = (int32_t)(segScan[(me + 1) * El] - myFirst);
    if (a.fused) {
      // The GEMM running beside this kernel reads the offsets once this flag is up (it was zeroed
      // on the stream before the call, so it names this call).
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        dev::storeRelease(arrivalsOf(a, me), 1);
      }
    }
  }
  {  // padding rows of my segments: no source, no expert
    int4* info = reinterpret_cast<int4*>(a.region[lme] + a.reg.rowInfo);
    for (int le = b; le < El; le += a.ctas) {
      const long long off = segScan[me * El + le] - myFirst;
      const long long end = segScan[me * El + le + 1] - myFirst;
      for (long long r = off + colSum[me * El + le] + threadIdx.x; r < end; r += blockDim.x)
        info[r] = make_int4(-1, -1, 0, -1);
    }
  }

  // ---- 4. send ---- (every warp when fused; else half of them, the other half expands at once)
  const int sendWarps = a.fused ? kWarps : kWarps / 2;
  if (warp < sendWarps) {
    const int t0 = sp.ctaStart(b), t1 = sp.ctaStart(b + 1);
    const size_t H = D.hidden, es = D.esize, rowBytes = D.rowBytes(), cap = D.cap;
    const int stride = D.pairStride();
    for (int t = t0 + warp; t < t1; t += sendWarps) {
      const int w1 = sp.warpOf(t);
      const int j = lane;
      int e = -1;
      float wt = 0.f;
      if (j < k) {
        e = validExpert(a.topkIdx[(size_t)t * k + j], E);
        wt = a.topkW[(size_t)t * k + j];
      }
      const int d = e >= 0 ? e / El : -1;
      int pos = -1, pr = -1;
      if (e >= 0) pos = sendBase[e] + ctaBase[e] + warpCnt[w1 * K + e] + a.local.slotRank[(size_t)t * k + j];
      // The token's slots on d: how many (m), this slot's rank among them (sub), the first one.
      int m = 0, sub = 0, firstLane = -1;
      for (int jj = 0; jj < k; ++jj) {
        const int dd = __shfl_sync(0xffffffffu, d, jj);
        if (d >= 0 && dd == d) {
          if (firstLane < 0) firstLane = jj;
          if (jj < j) ++sub;
          ++m;
        }
      }
      const bool first = d >= 0 && firstLane == j;
      if (first) pr = ctaBase[E + d] + warpCnt[w1 * K + E + d] + a.local.pairRank[(size_t)t * k + j];
      const int src = firstLane >= 0 ? firstLane : j;
      const int pairIdx = __shfl_sync(0xffffffffu, pr, src);
      if (j < k) {
        Route rt;
        rt.code = d >= 0 ? routeCode(d, first, m) : -1;
        rt.idx = d == me ? pos : (first ? pairIdx : -1);
        rt.weight = d >= 0 ? wt : 0.f;
        rt.pad = 0;
        a.local.route[(size_t)t * k + j] = rt;
      }
      // Across nodes a remote node's pair is one window entry (moe_net_layout.h): the row, then
      // the pair record, then the slots' rowInfos; the receiver writes them where they belong.
      const bool viaNet = d >= 0 && isRemote(a, d);
      char* entry = viaNet ? netWindow(c) + s_view.out[d] + (uint64_t)pairIdx * s_view.stride : nullptr;
      if (d >= 0) {
        const int4 ri = make_int4(t, (me & 0xffff) | (j << 16), __float_as_int(wt), e - d * El);
        if (viaNet) {
          reinterpret_cast<int4*>(entry + netEntryInfo(D))[sub] = ri;
          int32_t* rec = reinterpret_cast<int32_t*>(entry + netEntryRecord(D));
          rec[1 + sub] = pos;
          if (first) rec[0] = m;
        } else {
          char* R = regionOf(a, d);
          reinterpret_cast<int4*>(R + a.reg.rowInfo)[pos] = ri;
          if (d != me) {
            int32_t* rec = reinterpret_cast<int32_t*>(R + a.reg.pairs) + ((size_t)me * cap + pairIdx) * stride;
            rec[1 + sub] = pos;
            if (first) rec[0] = m;
          }
        }
      }
      if (a.fused) {  // the rows go after the grid sync, in destination order (step 4b)
        if (d >= 0) a.local.sendList[myScan[e] + (pos - sendBase[e])] = t * 16 + j;
        continue;
      }
      // The row itself: once per remote rank, to every slot's row on this rank; read once.
      const unsigned todo = __ballot_sync(0xffffffffu, d >= 0 && (d == me || first));
      char* dst = viaNet ? entry : d >= 0 ? regionOf(a, d) + a.reg.recvX + (size_t)pos * rowBytes : nullptr;
      const char* xrow = a.x + (size_t)t * H * es;
      if (a.xVec) warpCopy16Multi(dst, todo, xrow, H * es / 16);
      else warpCopy2Multi(dst, todo, xrow, H);
      // Each remote pair joins its destination's queue once its row and metadata are visible
      // there: a slot from the destination's tail for this source, then the slot's entry.
      // A remote node's entry counts toward its piece instead; the lane completing the piece puts
      // it (moe_net.cuh).
      const bool remote = first && d != me && !viaNet, netPair = first && viaNet;
      if (__any_sync(0xffffffffu, remote || netPair)) {
        __syncwarp();
        dev::fenceSys();
        if (remote) {
          char* R = regionOf(a, d);
          const unsigned long long old =
              atomicAdd_system(reinterpret_cast<unsigned long long*>(R + a.reg.queueTail) + me, 1ull);
          const size_t slot = (size_t)(old & 0xffffffffull);
          if (slot < cap)
            dev::storeRelease(
                reinterpret_cast<uint64_t*>(R + a.reg.pairQueue) + (size_t)peerIndex(a.lidx[d], lme, L) * cap + slot,
                (seq << 32) | (uint32_t)pairIdx);
        }
        if (netPair) netEntryStaged(a, c, s_view, d, pairIdx, 1, kNetStepDispatch, kSiteMoeDispatch, tk);
      }
    }
  } else {
    // ---- 5. expand ---- (not fused) a warp per pair a peer sent here, in the order they landed
    // (the peer's queue for this rank): the row is read once from the pair's first row and stored
    // at its other m - 1 (a token's further experts here). Waiting for every pair also covers every
    // row and rowInfo a peer writes here: when this kernel ends, the receive buffer is complete.
    const int32_t* counts = reinterpret_cast<const int32_t*>(a.region[lme] + a.reg.counts);
    int32_t* pairs = reinterpret_cast<int32_t*>(a.region[lme] + a.reg.pairs);
    const uint64_t* queue = reinterpret_cast<const uint64_t*>(a.region[lme] + a.reg.pairQueue);
    char* X = a.region[lme] + a.reg.recvX;
    int4* info = reinterpret_cast<int4*>(a.region[lme] + a.reg.rowInfo);
    const size_t rowBytes = D.rowBytes(), cap = D.cap;
    const int stride = D.pairStride();
    const PeerPairs peers(counts, K, E, me, n);
    const int half = kWarps - sendWarps, gw = b * half + warp - sendWarps;
    // Across nodes the grid's last expand warp watches the network flags (netWatch: a failure is
    // recorded); the others wait on its copies.
    const int nw = a.ctas * half - (a.net ? 1 : 0);
    if (a.net && gw == nw) netWatch(a, c, s_view, kNetStepDispatch, kSiteMoeDispatch);
    else for (int item = gw; item < peers.total(); item += nw) {
      const int s = peers.sourceOf(item);
      if (isRemote(a, s)) {
        // A remote node's pair, in pair order: wait for its piece, then everything the NVLink path
        // would have written here (the row at its m rows, their rowInfos, the pair record for
        // combine), read from the window entry through L2 (the NIC / proxy wrote it).
        const long long i = item - peers.start(s);
        int ok = 1;
        if (lane == 0) ok = netWaitEntry(a, c, s_view, s, i, kNetStepDispatch, kSiteMoeDispatch);
        __syncwarp();  // hands lane 0's acquire to the warp
        if (!__shfl_sync(0xffffffffu, ok, 0)) break;  // the error is recorded
        const char* ent = netWindow(c) + s_view.in[s] + (uint64_t)i * s_view.stride;
        const int32_t* rec = reinterpret_cast<const int32_t*>(ent + netEntryRecord(D));
        const int m = __ldcg(rec);
        const int row = lane < m ? __ldcg(rec + 1 + lane) : 0;
        if (lane < m) info[row] = __ldcg(reinterpret_cast<const int4*>(ent + netEntryInfo(D)) + lane);
        int32_t* mine = pairs + ((size_t)s * cap + i) * stride;
        if (lane < m) mine[1 + lane] = row;
        if (lane == 0) mine[0] = m;
        warpCopy16Multi(X + (size_t)row * rowBytes, __ballot_sync(0xffffffffu, lane < m), ent, rowBytes / 16);
        continue;
      }
      const uint64_t* entry = queue + (size_t)peerIndex(lme, a.lidx[s], L) * cap + (item - peers.start(s));
      int ok = 1;
      uint64_t ent = 0;
      if (lane == 0 && (ok = dev::waitGeq(c, entry, seq << 32, s, kSiteMoeDispatch))) ent = dev::loadAcquire(entry);
      __syncwarp();  // hands lane 0's acquire to the warp
      if (!__shfl_sync(0xffffffffu, ok, 0)) break;  // the error is recorded
      const size_t pi = (size_t)(__shfl_sync(0xffffffffu, ent, 0) & 0xffffffffull);
      if (pi >= cap) continue;
      const int32_t* rec = pairs + ((size_t)s * cap + pi) * stride;
      const int m = __ldcg(rec);
      if (m < 2) continue;  // uniform over the warp
      const int row = lane < m ? __ldcg(rec + 1 + lane) : 0;
      const int first = __shfl_sync(0xffffffffu, row, 0);
      warpCopy16Multi(X + (size_t)row * rowBytes, __ballot_sync(0xffffffffu, lane >= 1 && lane < m),
                      X + (size_t)first * rowBytes, rowBytes / 16);
    }
  }
  if (!a.fused) {
    // Found while counting; reported last, once this rank's part of the protocol is done (an
    // error makes every later wait of the communicator give up).
    if (threadIdx.x == 0 && s_bad) recordBadId(c, s_badId, E);
    return;
  }
  if (!dev::gridSync(c, 0, 2)) return;
  if (b == 0 && (int)threadIdx.x < L && (int)threadIdx.x != lme)
    dev::storeRelease(moeFlags(a.region[threadIdx.x]) + kDoneFlag + me, dev::flagValue(seq, 2));

  // ---- 4b. fused: the rows, in the order of their places at the destinations ----
  // Every rank walks its send list by global expert, so each destination's segments fill from
  // their first 128-row block on and the GEMM beside us (which takes its tiles in that order)
  // starts on a block as soon as every source's rows in it are there. Every slot's row is sent
  // (m rows for a token with m experts on one rank): a row is complete where it lands. The done
  // flags above already cover the metadata (combine's concern); the GEMM waits for the counters.
  // A warp takes 32 consecutive rows of the list (a chunk; chunks go round the warps in order):
  // each lane finds one row's place, the warp copies them four at a time (eight 16-byte loads in
  // flight per lane, not one row's latency after another), then one system fence for the chunk
  // and one counter add per 128-row block it touched (the lanes of a block agree with
  // __match_any_sync), not a fence and an add per row.
  if (a.fused) {
    const size_t H = D.hidden, es = D.esize, rowBytes = D.rowBytes();
    const long long R = myScan[E];
    const long long chunks = (R + 31) / 32;
    const long long gw = (long long)b * kWarps + warp, nw = (long long)a.ctas * kWarps;
    for (long long ch = gw; ch < chunks; ch += nw) {
      const long long i = ch * 32 + lane;
      char* dst = nullptr;
      const char* xrow = nullptr;
      uint64_t* ctr = nullptr;
      if (i < R) {
        const int ent = __ldcg(a.local.sendList + i);
        const int t = ent >> 4, j = ent & 15;
        const int e = validExpert(a.topkIdx[(size_t)t * k + j], E);
        const int d = e / El;
        const long long pos = sendBase[e] + (i - myScan[e]);
        dst = regionOf(a, d) + a.reg.recvX + (size_t)pos * rowBytes;
        xrow = a.x + (size_t)t * H * es;
        ctr = arrivalsOf(a, d) + 1 + pos / kArrivalBlock;
      }
      const unsigned rows = __ballot_sync(0xffffffffu, i < R);
      if (a.xVec) warpCopyRows16(dst, xrow, rows, H * es / 16);
      else
        for (unsigned m = rows; m; m &= m - 1) {
          const int l = __ffs(m) - 1;
          char* d1 = reinterpret_cast<char*>(__shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(dst), l));
          const char* s1 =
              reinterpret_cast<const char*>(__shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(xrow), l));
          warpCopy2Multi(d1, 1u, s1, H);
        }
      // Every lane's stores before the releases: __syncwarp orders the warp's accesses, the
      // system fence (one warp instruction) makes them cumulative for the receiver's acquire.
      __syncwarp();
      if (i < R) {
        const unsigned grp = __match_any_sync(rows, reinterpret_cast<unsigned long long>(ctr));
        dev::fenceSys();
        if (lane == __ffs(grp) - 1) dev::addRelease(ctr, __popc(grp));
      }
    }
  }

  // Fused: the metadata every peer wrote here (combine's concern) is complete.
  if (!waitAllRanks(a, c, moeFlags(a.region[lme]) + kDoneFlag, dev::flagValue(seq, 2), false)) return;
  // Found while counting; reported last, once this rank's part of the protocol is done (an
  // error makes every later wait of the communicator give up).
  if (threadIdx.x == 0 && s_bad) recordBadId(c, s_badId, E);
}

__global__ void __launch_bounds__(kThreads, 1) dispatchKernel(const Args a) {
  // The call's number from the rank's device counter (docs/GRAPHS.md), before any CTA may leave:
  // the host's number in Args is frozen by a graph capture, and every replay needs a fresh one.
  DevComm c = a.dev;
  c.seq = dev::beginCall(a.dev);
  __shared__ Tickets tk;
  if (threadIdx.x == 0) tk.init();
  __syncthreads();
  dispatchBody(a, c, tk);  // its returns are block-uniform: every thread comes back here
  // Across nodes: the block's puts leave the window before the kernel ends (on every path), so the
  // next call or op may reuse it.
  __syncthreads();
  tk.drain(c);
}

const void* dispatchKernelFn() { return reinterpret_cast<const void*>(&dispatchKernel); }

size_t dispatchSmemBytes(const Dims& d) {
  const size_t K = (size_t)d.keys(), E = (size_t)d.experts;
  return alignUp((kWarps * K + K + 2 * E) * 4, 8) + 2 * (E + 1) * 8;
}

}  // namespace moe
}  // namespace mkccl
