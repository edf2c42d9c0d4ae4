// The MoE combine kernel: every expert rank sends each (token, rank) pair's result back once, and
// every token's rank sums its slots in fp32. One persistent grid (all CTAs co-resident).
//
//   1. return  for each pair record a peer s left here at dispatch (s's token with m slots on my
//              experts), a warp sends to s's landing row for the pair: the Y row itself if m == 1,
//              else the fp32 sum of the m rows times their weights (landsAsSum, moe_layout.h).
//              Written only once s has entered this call.
//   2. reduce  a warp per token sums, in slot order, w * Y(row) for slots on my experts, w *
//              landing (a single row) or the landing sum (several) for a remote rank's first
//              slot, and stores out[t] in dtype.
// The whole combine (kCombineWhole) runs both at once on different warps of every CTA: the return
// is bound by NVLink, the reduce by HBM. The return writes a landing row in pieces of kLandChunks
// chunks and raises each piece's ready word at s (landReady, flagValue(seq, 1)) once its stores
// are visible there; the reduce waits for the pieces it sums. Args::part runs step 1 alone, then
// a grid sync and combine flag [me] at every peer (kCombineReturn), or step 2 alone after every
// peer's combine flag (kCombineReduce: a second launch after the first has ended, which peeks the
// call's number instead of taking one), so that the reduce can have more CTAs than the return had
// beside a GEMM.
//
// Fused with the second expert GEMM (mkcclMoeGemmCombine, Args::yDone): Y is being written by the
// GEMM beside this kernel, so before a warp reads rows of Y (a pair's rows in step 1, a token's
// rows on my experts in step 2) each lane waits for one row's 128-row block to be complete
// (yDone[1 + row / 128] >= yWant, bounded), then __syncwarp hands the acquire to the warp. Rows
// of Y are read with ld.cg: they may have been written after this kernel started.
//
// Across nodes (Args::net, the whole combine only; moe_net.cuh): CTA 0 signals "ready" to every
// rank of the other nodes; a pair of a remote node's source is returned into this rank's window
// (out-area, one landing row per pair, moe_net_layout.h) and counted toward its piece, and the
// warp completing a piece puts it to the source (flag kNetPieceFlag + piece); the source's reduce
// reads such a landing row from its window once that piece's flag has arrived. The sums are the
// same fp32 sums as over NVLink. Ranks are global in the counts and pairs, local in the regions.
#include "kernels/moe/moe_common.cuh"
#include "kernels/moe/moe_net.cuh"
#include "ops/moe/moe_kernels.h"

namespace mkccl {
namespace moe {

namespace {

// Every lane passes a row of Y (or -1: none); true when all the rows' blocks are complete. Every
// lane of the warp calls it. A failed wait has recorded the communicator's error.
__device__ __forceinline__ bool waitYRows(const Args& a, const DevComm& c, int row) {
  if (a.yDone == nullptr) return true;
  bool ok = true;
  if (row >= 0) ok = dev::waitGeq(c, a.yDone + 1 + row / kArrivalBlock, a.yWant, -1, kSiteMoeCombine);
  __syncwarp();
  return __all_sync(0xffffffffu, ok);
}

// Step 1 on warps gw of nw. Work items: a pair's row in pieces of G chunks of 256 elements. With
// `announce` (the whole combine, whose reduce starts before every return is done) the pieces are
// the landing pieces (kLandChunks chunks) and each one's ready word at its source is raised once
// its stores are visible there. False once a wait failed (the error is recorded).
template <class T, bool kNet>
__device__ __forceinline__ bool returnPairs(const Args& a, const DevComm& c, int gw, int nw, bool announce,
                                            const NetView& view, Tickets& tk) {
  const Dims D = a.dims;
  const int E = D.experts, K = D.keys(), n = D.ranks, me = c.rank, lme = c.localRank, L = c.localRanks,
            lane = laneId();
  const size_t H = D.hidden, es = D.esize, rowBytes = D.rowBytes(), landPitch = D.landingPitch(), cap = D.cap;
  const int32_t* counts = reinterpret_cast<const int32_t*>(a.region[lme] + a.reg.counts);
  const int32_t* pairs = reinterpret_cast<const int32_t*>(a.region[lme] + a.reg.pairs);
  const int4* info = reinterpret_cast<const int4*>(a.region[lme] + a.reg.rowInfo);
  const int stride = D.pairStride(), LP = D.landPieces();
  const uint64_t readyValue = dev::flagValue(c.seq, 1);
  const PeerPairs peers(counts, K, E, me, n);
  const int total = peers.total();
  const int chunks = (int)((H + 255) / 256);
  const int G = announce ? kLandChunks
                         : (int)max(1ll, min((long long)chunks, (long long)total * chunks / (2ll * nw)));
  const int pieces = (chunks + G - 1) / G;
  for (long long it = gw; it < (long long)total * pieces; it += nw) {
    const int item = (int)(it / pieces), p = (int)(it % pieces);
    const int s = peers.sourceOf(item), i = item - peers.start(s);
    const int32_t* rec = pairs + ((size_t)s * cap + i) * stride;
    const int m = __ldcg(rec);
    // A remote node's source: its landing row is staged in my window and goes in a piece.
    const bool viaNet = kNet && isRemote(a, s);
    const size_t li = viaNet ? 0 : (size_t)peerIndex(a.lidx[s], lme, L) * cap + i;
    char* dst = viaNet ? netWindow(c) + view.out[s] + (uint64_t)i * view.stride
                       : regionOf(a, s) + a.reg.landing + li * landPitch;
    const size_t cBegin = (size_t)p * G * 256;
    const int myRow = lane < m ? __ldcg(rec + 1 + lane) : 0;
    if (!waitYRows(a, c, lane < m ? myRow : -1)) return false;  // the warp is uniform here
    if (!landsAsSum(m)) {  // the row's columns [cBegin, cEnd) as they are (cEnd within the pitch)
      const size_t cEnd = min(D.pitch(), (size_t)(p + 1) * G * 256);
      const size_t row = (size_t)__shfl_sync(0xffffffffu, myRow, 0);
      warpCopy16(dst + cBegin * es, a.y + row * rowBytes + cBegin * es, (cEnd - cBegin) * es / 16);
    } else {
      // Rows and weights of the pair (at most k <= 16), then 4 of its rows' loads in flight per lane.
      const float myW = lane < m ? __int_as_float(__ldcg(&info[myRow].z)) : 0.f;
      const size_t cEnd = min(H, (size_t)(p + 1) * G * 256);
      for (size_t base = cBegin; base < cEnd; base += 256) {  // uniform over the warp (shuffles inside)
        const size_t c0 = base + (size_t)lane * 8;
        const bool on = c0 < cEnd;
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int r0 = 0; r0 < m; r0 += 4) {
          uint4 v[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int row = __shfl_sync(0xffffffffu, myRow, (r0 + u) & 31);
            if (on && r0 + u < m) v[u] = __ldcg(reinterpret_cast<const uint4*>(a.y + (size_t)row * rowBytes + c0 * es));
          }
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const float w = __shfl_sync(0xffffffffu, myW, (r0 + u) & 31);
            if (on && r0 + u < m) fma8<T>(acc, v[u], w);
          }
        }
        if (on && viaNet) {  // a network entry: the sum as one dtype row (moe_net_layout.h)
          *reinterpret_cast<uint4*>(dst + c0 * es) =
              make_uint4(Elem<T>::pack(acc[0], acc[1]), Elem<T>::pack(acc[2], acc[3]), Elem<T>::pack(acc[4], acc[5]),
                         Elem<T>::pack(acc[6], acc[7]));
        } else if (on) {
          float4* o = reinterpret_cast<float4*>(dst + c0 * 4);
          o[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
          o[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
        }
      }
    }
    if (announce || viaNet) {
      // Every lane's stores before the release: __syncwarp orders the warp's accesses, the system
      // fence (one warp instruction) makes them cumulative for the source's acquire (or the put).
      __syncwarp();
      dev::fenceSys();
      if (lane == 0 && viaNet)  // every landing piece of every pair of the network piece counts
        netEntryStaged(a, c, view, s, i, (uint32_t)pieces, kNetStepCombine, kSiteMoeCombine, tk);
      else if (lane == 0)
        dev::storeRelease(reinterpret_cast<uint64_t*>(regionOf(a, s) + a.reg.landReady) + li * LP + p, readyValue);
    }
  }
  return true;
}

// Step 2 on warps gw of nw (`warp` its index in the CTA, for the shared tables). Work items: a
// token's row in pieces of G chunks of 256 elements (a warp's pass each), G chosen so that small T
// still gives every warp work. With `waitLand` each landing row is read only once the pieces it sums are
// announced (the whole combine); otherwise the combine flags said every return is done.
constexpr int kReturnWarps = kWarps / 2;  // of each CTA in the whole combine; the rest reduce
constexpr int kReduceBatch = 8;  // loads in flight per lane and pass (kMaxTopk a multiple of it)

template <class T, bool kNet>
__device__ __forceinline__ void reduceTokens(const Args& a, const DevComm& c, int gw, int nw, int warp, bool waitLand,
                                             const NetView& view) {
  __shared__ const char* s_src[kWarps][kMaxTopk];
  __shared__ float s_w[kWarps][kMaxTopk];
  __shared__ int s_kind[kWarps][kMaxTopk];  // 0 none, 1 a dtype row times w, 2 an fp32 sum
  const Dims D = a.dims;
  const int k = D.topk, me = c.rank, lme = c.localRank, L = c.localRanks, lane = laneId();
  const size_t H = D.hidden, es = D.esize, rowBytes = D.rowBytes(), landPitch = D.landingPitch(), cap = D.cap;
  const int LP = D.landPieces();
  const char* land = a.region[lme] + a.reg.landing;
  const uint64_t* ready = reinterpret_cast<const uint64_t*>(a.region[lme] + a.reg.landReady);
  const uint64_t readyValue = dev::flagValue(c.seq, 1);
  const int chunks = (int)((H + 255) / 256);
  const long long allChunks = (long long)a.T * chunks;
  // Whole combine: at most a landing piece per item, so that the warps follow the return closely
  // and the last pieces to land leave a short tail.
  const int G = (int)max(1ll, min((long long)(waitLand ? kLandChunks : chunks), allChunks / (2ll * nw)));
  const int pieces = (chunks + G - 1) / G;
  for (long long item = gw; item < (long long)a.T * pieces; item += nw) {
    const int t = (int)(item / pieces), p = (int)(item % pieces);
    const size_t cBegin = (size_t)p * G * 256, cEnd = min(H, (size_t)(p + 1) * G * 256);
    // Lane j < k looks up slot j: where its row is, its weight, what it holds.
    int kind = 0, yRow = -1;
    const char* src = nullptr;
    const uint64_t* rd = nullptr;
    const uint64_t* nf = nullptr;  // across nodes: the arrival flag of the piece holding the landing row
    float w = 0.f;
    if (lane < k) {
      const Route rt = a.local.route[(size_t)t * k + lane];
      if (rt.code >= 0) {
        const int d = routeRank(rt.code);
        if (d == me) {
          kind = 1, yRow = rt.idx, w = rt.weight;
          src = a.y + (size_t)rt.idx * rowBytes;
        } else if (kNet && routeFirst(rt.code) && isRemote(a, d)) {
          // A dtype row either way: a weighted sum (m >= 2) counts once, a single row with its weight.
          kind = 1, w = landsAsSum(routeSlots(rt.code)) ? 1.f : rt.weight;
          src = netWindow(c) + view.in[d] + (uint64_t)rt.idx * view.stride;
          nf = netSeenOf(a, d, rt.idx / view.perIn[d]);  // its device copy (netWatch); 32-bit division
        } else if (routeFirst(rt.code)) {
          const size_t li = (size_t)peerIndex(lme, a.lidx[d], L) * cap + rt.idx;
          kind = landsAsSum(routeSlots(rt.code)) ? 2 : 1, w = rt.weight;
          src = land + li * landPitch;
          if (waitLand) rd = ready + li * LP;
        }
      }
      s_kind[warp][lane] = kind, s_src[warp][lane] = src, s_w[warp][lane] = w;
    }
    __syncwarp();
    // Fused: the token's rows on my experts complete in Y. Whole combine: the landing pieces of
    // this item's columns announced (a lane per slot waits for each of its pieces in turn).
    if (!waitYRows(a, c, yRow)) return;  // the warp's result: uniform (the error is recorded)
    bool ok = true;
    if (kNet && nf != nullptr)  // the piece of the expert rank's flow that holds this pair has arrived
      ok = dev::waitGeq(c, nf, dev::netFlagValue(c.seq, kNetStepCombine), -1, kSiteMoeCombine);
    if (rd != nullptr)
      for (int q = (int)(cBegin / (256 * kLandChunks)); ok && q <= (int)((cEnd - 1) / (256 * kLandChunks)); ++q)
        ok = dev::waitGeq(c, rd + q, readyValue, -1, kSiteMoeCombine);
    __syncwarp();
    if (!__all_sync(0xffffffffu, ok)) return;
    char* orow = a.out + (size_t)t * H * es;
    for (size_t c0 = cBegin + (size_t)lane * 8; c0 < cEnd; c0 += 256) {
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      // kReduceBatch slots at a time: every load issued, then the sums in slot order.
      for (int j0 = 0; j0 < k; j0 += kReduceBatch) {
        uint4 v[kReduceBatch], v2[kReduceBatch];
#pragma unroll
        for (int u = 0; u < kReduceBatch; ++u) {
          const int j = j0 + u;
          const int kd = j < k ? s_kind[warp][j] : 0;
          const char* sp = s_src[warp][j];
          if (kd == 1) {
            v[u] = __ldcg(reinterpret_cast<const uint4*>(sp + c0 * es));
          } else if (kd == 2) {
            v[u] = __ldcg(reinterpret_cast<const uint4*>(sp + c0 * 4));
            v2[u] = __ldcg(reinterpret_cast<const uint4*>(sp + c0 * 4) + 1);
          }
        }
#pragma unroll
        for (int u = 0; u < kReduceBatch; ++u) {  // the kinds again from shared memory: registers are short
          const int kd = j0 + u < k ? s_kind[warp][j0 + u] : 0;
          if (kd == 1) {
            fma8<T>(acc, v[u], s_w[warp][j0 + u]);
          } else if (kd == 2) {
            acc[0] += __uint_as_float(v[u].x), acc[1] += __uint_as_float(v[u].y);
            acc[2] += __uint_as_float(v[u].z), acc[3] += __uint_as_float(v[u].w);
            acc[4] += __uint_as_float(v2[u].x), acc[5] += __uint_as_float(v2[u].y);
            acc[6] += __uint_as_float(v2[u].z), acc[7] += __uint_as_float(v2[u].w);
          }
        }
      }
      if (a.outVec) {
        *reinterpret_cast<uint4*>(orow + c0 * es) =
            make_uint4(Elem<T>::pack(acc[0], acc[1]), Elem<T>::pack(acc[2], acc[3]), Elem<T>::pack(acc[4], acc[5]),
                       Elem<T>::pack(acc[6], acc[7]));
      } else {
        uint16_t* o = reinterpret_cast<uint16_t*>(orow) + c0;
#pragma unroll
        for (int i = 0; i < 8; ++i)
          if (c0 + i < H) o[i] = Elem<T>::from(acc[i]);
      }
    }
    __syncwarp();
  }
}

}  // namespace

// kNet: the instantiation for communicators that span nodes (its network branches would cost the
// one-node kernel registers: 44 bytes of spills become ~120 with them).
template <class T, bool kNet>
__global__ void __launch_bounds__(kThreads, 1) combineKernel(const Args a) {
  __shared__ NetPairs s_pairs;  // across nodes: the last dispatch's pairs between every two ranks
  __shared__ NetView s_view;    // and this rank's window view of them (combine entries)
  DevComm c = a.dev;
  // The device's number, as in the dispatch (before any CTA leaves); a reduce-only launch follows
  // the return kernel of its call on the stream and shares that kernel's number.
  c.seq = a.part == kCombineReduce ? dev::peekCallSeq(a.dev) : dev::beginCall(a.dev);
  const int L = c.localRanks, me = c.rank, lme = c.localRank, b = blockIdx.x, warp = warpId();
  const uint64_t seq = c.seq;

  if (a.part == kCombineReduce) {  // step 2 alone, after the return kernel of this call (one node)
    if (!waitRanks(c, moeFlags(a.region[lme]) + kCombFlag, dev::flagValue(seq, 1), false, kSiteMoeCombine)) return;
    reduceTokens<T, kNet>(a, c, b * kWarps + warp, a.ctas * kWarps, warp, false, s_view);
    return;
  }
  __shared__ Tickets tk;
  if (threadIdx.x == 0) tk.init();
  __syncthreads();  // before any put of the block
  if (b == 0) {
    postEntry(c);
    if (kNet) netPostReady(a, c, tk);  // the other nodes' expert ranks may return rows into my window
  }
  if (kNet && a.net) {  // the layout of the last dispatch's counts table (the same on every rank)
    loadNetPairs(a, reinterpret_cast<const int32_t*>(a.region[lme] + a.reg.counts), &s_pairs);
    if (threadIdx.x == 0) netViewFor(s_pairs, true, a.dims, me, &s_view);
  }
  if (waitRanks(c, entryFlags(c), dev::flagValue(seq, 0), false, kSiteMoeCombine)) {
    if (a.part == kCombineReturn) {  // step 1 alone (beside the GEMM), then the combine flags (one node)
      const bool ok = returnPairs<T, kNet>(a, c, b * kWarps + warp, a.ctas * kWarps, false, s_view, tk);
      (void)ok;  // a failed wait recorded the error: the grid sync gives up
      if (!dev::gridSync(c, 0, 1)) return;
      if (b == 0 && (int)threadIdx.x < L && (int)threadIdx.x != lme)
        dev::storeRelease(moeFlags(a.region[threadIdx.x]) + kCombFlag + me, dev::flagValue(seq, 1));
      return;
    }
    // The whole combine: kReturnWarps of each CTA's warps return pairs (NVLink-bound), the others
    // reduce tokens (HBM-bound) as the pieces they sum land, so the two overlap. No grid sync: a
    // token's rank waits for each landing piece's ready word, raised by the warp that wrote it (or,
    // across nodes, for the network piece that holds it).
    // Across nodes the grid's last reduce warp watches the network flags (netWatch: a failure is
    // recorded); the others wait on its copies.
    constexpr int kRet = kReturnWarps, kRed = kWarps - kReturnWarps;
    const bool watch = kNet && a.net;
    const int redW = a.ctas * kRed - (watch ? 1 : 0), redGw = b * kRed + warp - kRet;
    if (warp < kRet) returnPairs<T, kNet>(a, c, b * kRet + warp, a.ctas * kRet, true, s_view, tk);
    else if (watch && redGw == redW) netWatch(a, c, s_view, kNetStepCombine, kSiteMoeCombine);
    else reduceTokens<T, kNet>(a, c, redGw, redW, warp, true, s_view);
  }
  // Across nodes: the block's puts leave the window before the kernel ends, so the next call or op
  // may reuse it.
  if (kNet) {
    __syncthreads();
    tk.drain(c);
  }
}

const void* combineKernelFn(bool fp16, bool net) {
  if (net)
    return fp16 ? reinterpret_cast<const void*>(&combineKernel<__half, true>)
                : reinterpret_cast<const void*>(&combineKernel<__nv_bfloat16, true>);
  return fp16 ? reinterpret_cast<const void*>(&combineKernel<__half, false>)
              : reinterpret_cast<const void*>(&combineKernel<__nv_bfloat16, false>);
}

}  // namespace moe
}  // namespace mkccl
