// The MoE combine kernel: every expert rank sends each (token, rank) pair's result back once, and
// every token's rank sums its slots in fp32. One persistent grid (all CTAs co-resident).
//
//   1. return  for each pair record a peer s left here at dispatch (s's token with m slots on my
//              experts), a warp sends to s's landing row for the pair: the Y row itself if m == 1,
//              else the fp32 sum of the m rows times their weights (landsAsSum, moe_layout.h).
//              Written only once s has entered this call.
//   -- grid sync --   then CTA 0 raises combine flag [me] at every peer.
//   2. reduce  every CTA waits for every peer's combine flag; a warp per token sums, in slot order,
//              w * Y(row) for slots on my experts, w * landing (a single row) or the landing sum
//              (several) for a remote rank's first slot, and stores out[t] in dtype.
// Args::part runs step 1 and the flags alone (kCombineReturn), or step 2 alone (kCombineReduce: a
// second launch after the first has ended, which peeks the call's number instead of taking one),
// so that the reduce can have more CTAs than the return had beside a GEMM.
//
// Fused with the second expert GEMM (mkcclMoeGemmCombine, Args::yDone): Y is being written by the
// GEMM beside this kernel, so before a warp reads rows of Y (a pair's rows in step 1, a token's
// rows on my experts in step 2) each lane waits for one row's 128-row block to be complete
// (yDone[1 + row / 128] >= yWant, bounded), then __syncwarp hands the acquire to the warp. Rows
// of Y are read with ld.cg: they may have been written after this kernel started.
#include "kernels/moe/moe_common.cuh"
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

}  // namespace

template <class T>
__global__ void __launch_bounds__(kThreads, 1) combineKernel(const Args a) {
  __shared__ Route s_route[kWarps][kMaxTopk];
  DevComm c = a.dev;
  // The device's number, as in the dispatch (before any CTA leaves); a reduce-only launch follows
  // the return kernel of its call on the stream and shares that kernel's number.
  c.seq = a.part == kCombineReduce ? dev::peekCallSeq(a.dev) : dev::beginCall(a.dev);
  const Dims D = a.dims;
  const int E = D.experts, K = D.keys(), k = D.topk;
  const int n = c.localRanks, me = c.localRank, b = blockIdx.x, warp = warpId(), lane = laneId();
  const uint64_t seq = c.seq;
  const size_t H = D.hidden, es = D.esize, rowBytes = D.rowBytes(), landPitch = D.landingPitch(), cap = D.cap;
  const int gw = b * kWarps + warp, nw = a.ctas * kWarps;

  if (a.part != kCombineReduce) {
    if (b == 0) postEntry(c);
    if (!waitRanks(c, entryFlags(c), dev::flagValue(seq, 0), false, kSiteMoeCombine)) return;

    // ---- 1. return ----
    {
      const int32_t* counts = reinterpret_cast<const int32_t*>(a.region[me] + a.reg.counts);
      const int32_t* pairs = reinterpret_cast<const int32_t*>(a.region[me] + a.reg.pairs);
      const int4* info = reinterpret_cast<const int4*>(a.region[me] + a.reg.rowInfo);
      const int stride = D.pairStride();
      int pre[kMaxRanks + 1];
      pre[0] = 0;
#pragma unroll
      for (int s = 0; s < kMaxRanks; ++s)
        pre[s + 1] = pre[s] + (s < n && s != me ? __ldcg(counts + s * K + E + me) : 0);
      const int total = pre[kMaxRanks];
      // Work items: a pair's row in pieces of G chunks of 256 elements (as in step 2).
      const int chunks = (int)((H + 255) / 256);
      const int G = (int)max(1ll, min((long long)chunks, (long long)total * chunks / (2ll * nw)));
      const int pieces = (chunks + G - 1) / G;
      bool failed = false;
      for (long long it = gw; it < (long long)total * pieces; it += nw) {
        const int item = (int)(it / pieces), p = (int)(it % pieces);
        int s = 0;
#pragma unroll
        for (int q = 1; q < kMaxRanks; ++q) s += item >= pre[q] ? 1 : 0;
        const int i = item - pre[s];
        const int32_t* rec = pairs + ((size_t)s * cap + i) * stride;
        const int m = __ldcg(rec);
        char* dst = a.region[s] + a.reg.landing + ((size_t)peerIndex(s, me, n) * cap + i) * landPitch;
        const size_t cBegin = (size_t)p * G * 256;
        const int myRow = lane < m ? __ldcg(rec + 1 + lane) : 0;
        if (failed || !waitYRows(a, c, lane < m ? myRow : -1)) {  // the warp is uniform here
          failed = true;  // the error is recorded: skip the rest, the grid sync gives up
          continue;
        }
        if (!landsAsSum(m)) {  // the row's columns [cBegin, cEnd) as they are (cEnd within the pitch)
          const size_t cEnd = min(D.pitch(), (size_t)(p + 1) * G * 256);
          const size_t row = (size_t)__shfl_sync(0xffffffffu, myRow, 0);
          warpCopy16(dst + cBegin * es, a.y + row * rowBytes + cBegin * es, (cEnd - cBegin) * es / 16);
          continue;
        }
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
              if (on && r0 + u < m)
                v[u] = __ldcg(reinterpret_cast<const uint4*>(a.y + (size_t)row * rowBytes + c0 * es));
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              const float w = __shfl_sync(0xffffffffu, myW, (r0 + u) & 31);
              if (on && r0 + u < m) fma8<T>(acc, v[u], w);
            }
          }
          if (on) {
            float4* o = reinterpret_cast<float4*>(dst + c0 * 4);
            o[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            o[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
          }
        }
      }
    }
    if (!dev::gridSync(c, 0, 1)) return;
    if (b == 0 && (int)threadIdx.x < n && (int)threadIdx.x != me)
      dev::storeRelease(moeFlags(a.region[threadIdx.x]) + kCombFlag + me, dev::flagValue(seq, 1));
    if (a.part == kCombineReturn) return;
  }  // a.part != kCombineReduce

  // ---- 2. reduce ----
  if (!waitRanks(c, moeFlags(a.region[me]) + kCombFlag, dev::flagValue(seq, 1), false, kSiteMoeCombine)) return;
  const char* land = a.region[me] + a.reg.landing;
  // Work items: a token's row in pieces of G chunks of 256 elements (a warp's pass), G chosen so
  // that small T still gives every warp work (one token's chunks in a row are a chain of waits).
  const int chunks = (int)((H + 255) / 256);
  const long long allChunks = (long long)a.T * chunks;
  const int G = (int)max(1ll, min((long long)chunks, allChunks / (2ll * nw)));
  const int pieces = (chunks + G - 1) / G;
  for (long long item = gw; item < (long long)a.T * pieces; item += nw) {
    const int t = (int)(item / pieces), p = (int)(item % pieces);
    if (lane < k) s_route[warp][lane] = a.local.route[(size_t)t * k + lane];
    __syncwarp();
    {  // fused: the token's rows on my experts (one slot per lane) complete in Y
      int row = -1;
      if (lane < k) {
        const Route rt = s_route[warp][lane];
        if (rt.code >= 0 && routeRank(rt.code) == me) row = rt.idx;
      }
      if (!waitYRows(a, c, row)) return;  // the warp's result: uniform (the error is recorded)
    }
    char* orow = a.out + (size_t)t * H * es;
    const size_t cEnd = min(H, (size_t)(p + 1) * G * 256);
    for (size_t c0 = (size_t)p * G * 256 + (size_t)lane * 8; c0 < cEnd; c0 += 256) {
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      // 4 slots at a time (16 KB of loads in flight per 32 lanes x 16 warps; 8 spilled): every load issued, then the sums in slot order.
      for (int j0 = 0; j0 < k; j0 += 4) {
        uint4 v[4], v2[4];
        int kind[4];  // 0 none, 1 a dtype row times w, 2 an fp32 sum
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          kind[u] = 0;
          const int j = j0 + u;
          if (j >= k) continue;
          const Route rt = s_route[warp][j];
          if (rt.code < 0) continue;
          const int d = routeRank(rt.code);
          if (d == me) {
            kind[u] = 1;
            v[u] = __ldcg(reinterpret_cast<const uint4*>(a.y + (size_t)rt.idx * rowBytes + c0 * es));
          } else if (routeFirst(rt.code)) {
            const char* l = land + ((size_t)peerIndex(me, d, n) * cap + rt.idx) * landPitch;
            if (landsAsSum(routeSlots(rt.code))) {
              kind[u] = 2;
              v[u] = __ldcg(reinterpret_cast<const uint4*>(l + c0 * 4));
              v2[u] = __ldcg(reinterpret_cast<const uint4*>(l + c0 * 4) + 1);
            } else {
              kind[u] = 1;
              v[u] = __ldcg(reinterpret_cast<const uint4*>(l + c0 * es));
            }
          }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          if (kind[u] == 1) {
            fma8<T>(acc, v[u], s_route[warp][j0 + u].weight);
          } else if (kind[u] == 2) {
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

const void* combineKernelFn(bool fp16) {
  return fp16 ? reinterpret_cast<const void*>(&combineKernel<__half>)
              : reinterpret_cast<const void*>(&combineKernel<__nv_bfloat16>);
}

}  // namespace moe
}  // namespace mkccl
