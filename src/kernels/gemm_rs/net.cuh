// GEMM+ReduceScatter across nodes, fused (gemm_rs.net=fused, or auto, the default, beyond one wave of tiles; net_layout.h has the
// plan): the network roles of the kernel's existing teams. Run on one H200 on emulated nodes
// (gemm_rs_net_test), not on a real NIC.
//   netStart     block 0's thread 0, when the kernel starts: tells every counterpart that this
//                rank's window in slots are free for this call (every earlier reader of them is an
//                earlier kernel of this rank's stream).
//   netFinalTile the push team, for each final tile of its CTA (the node's sum of a sub-chunk
//                tile, TMA-stored into the scratch's net area): once the consumers published it,
//                copy it (sub-chunks of other nodes) into the window's out slot, count it in its
//                M-block's count; the count that completes a foreign M-block puts that piece (its
//                rows) to the counterpart there.
//   netDrain     the thread that put waits until its puts left the window (the next call, or a
//                collective, may overwrite the out slots once this kernel is over). FIFO tickets
//                complete in order, so waiting for its last put covers its earlier ones.
//   netAddWorker warps of the push teams and of the consumers (after their tiles): claim items of
//                kNetAddRows rows of this rank's C, wait for the piece they lie in (our M-block's
//                count, every other node's arrival) and add the node sums of them in node order.
// Every wait is bounded (dev::waitGeq); a failed one records the call's error and the CTA drains,
// so nothing more is counted or put and the peers' waits fail too.
// No calls: every function here, and the waits and the FIFO push they use, is inlined. Any call
// out of line in this kernel (a __noinline__ function, dev::waitGeq, dev::fifoPush) makes ptxas
// fail to allocate the consumers' registers at their budget of 216 (op.cuh: kConsumerRegs), where
// the kernel spills already. So the FIFO push is written out here (fifoPushInline, the protocol of
// kernels/device/fifo.cuh) and the waits are dev::waitGeqInline.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include "kernels/abi/net_dev.h"
#include "kernels/device/net.cuh"
#include "kernels/device/wgmma.cuh"
#include "kernels/gemm_rs/net_layout.h"
#include "kernels/gemm_rs/push.cuh"

namespace mkccl {
namespace rs {

constexpr int64_t kNetEs = 2;  // bytes per element of the node sums (bf16 / fp16, as C)

// dev::fifoPush (kernels/device/fifo.cuh), inlined, one thread: claims a ticket, waits (bounded)
// while the FIFO is full, publishes the command. The caller fenced its data at system scope.
__device__ __forceinline__ bool fifoPushInline(const DevComm& c, uint64_t hdr, uint64_t srcOff, uint64_t dstOff,
                                               uint64_t bytes, uint64_t* ticket) {
  const FifoDev& f = c.net->fifo;
  const uint64_t t = atomicAdd((unsigned long long*)f.head, 1ull);
  *ticket = t;
  if (t >= dev::loadAcquire(f.tailCache) + f.size) {
    if (!dev::waitGeqInline(c, &f.ctl->tail, t - f.size + 1, -1, kSiteFifo)) return false;
    atomicMax((unsigned long long*)f.tailCache, (unsigned long long)dev::loadAcquire(&f.ctl->tail));
  }
  FifoCmd* cmd = f.slots + (t & (f.size - 1));
  volatile uint64_t* body = &cmd->srcOff;
  body[0] = srcOff;
  body[1] = dstOff;
  body[2] = bytes;
  dev::storeRelease(&cmd->hdr, hdr);
  return true;
}

// dev::netPut / netWaitArrival / netWaitSent, inlined.
__device__ __forceinline__ bool netPutInline(const DevComm& c, int peer, uint64_t srcOff, uint64_t dstOff,
                                             uint64_t bytes, uint32_t flag, uint64_t value, uint64_t* ticket) {
  dev::fenceSys();
  return fifoPushInline(c, fifoHeader(kFifoPut, uint32_t(peer), flag, value), srcOff, dstOff, bytes, ticket);
}
__device__ __forceinline__ bool netArrivedInline(const DevComm& c, int src, uint32_t flag, uint64_t value) {
  return dev::waitGeqInline(c, dev::netFlag(c, src, flag), value, -1, kSiteNet);
}

__device__ __forceinline__ void netStart(const ReduceParams& p) {
  const NetDevComm* n = p.comm.net;
  const uint64_t v = dev::netFlagValue(p.callSeq());
  uint64_t ticket;
  for (int m = 0; m < p.L.subs; ++m)
    if (m != p.L.node && !netPutInline(p.comm, n->nodePeer[m], 0, 0, 0, kRsNetReadyFlag, v, &ticket)) return;
}

// All threads of the push team (gemm_rs.push=team: the only push across nodes), tile #index of
// the CTA's sequence, a final one (M-block mb, N-block nb). Returns 1 + the FIFO ticket of the put
// it made (thread 0), else 0.
template <int kBN>
__device__ __forceinline__ uint64_t netFinalTile(const ReduceParams& p, Team t, uint32_t words, int mb, int nb,
                                                     uint32_t index, uint64_t timeoutNs) {
  const Layout& L = p.L;
  const int s = netSubOf(L, mb);
  const int piece = netPieceOf(L, mb);
  const int rows = netPieceRows(L, piece);  // 0: a cluster's padding M-block (counted, never put)
  bool ok = false;
  if (t.tid == 0) {
    // Published: the consumers' TMA stores of both halves completed (bulkWait, proxy fence).
    ok = !draining(words) && waitConsumers(p.comm, words, index, timeoutNs, false);
    if (!ok) setDrain(words);
  }
  const bool go = teamVerdict(t, words, CtaWords::kPushOk, ok);
  if (go && s != L.node && rows > 0) {
    const int64_t col0 = int64_t(nb) * kBN;
    const int vpr = int(min64(kBN, L.N - col0) / 8);
    const int64_t ldv = L.N / 8;
    const int64_t at = netPieceOffset(L, piece, kNetEs) + col0 * kNetEs;  // bytes into the slot
    const uint4* src = reinterpret_cast<const uint4*>(p.netArea + netSubOffset(L, s, kNetEs) + at);
    uint4* dst = reinterpret_cast<uint4*>(p.comm.net->window + netOutOffset(L, s, kNetEs) + at);
    const int total = rows * vpr;
    for (int e = int(t.tid); e < total; e += int(t.n)) {
      const int r = e / vpr, c = e - r * vpr;
      dst[r * ldv + c] = __ldcg(src + r * ldv + c);
    }
    dev::fenceSys();  // this thread's window stores before the count (cumulative through the sync)
  }
  t.sync();  // also: kPushOk is read by every thread before thread 0 may rewrite it
  if (!go || t.tid != 0) return 0;
  uint64_t* count = p.opFlags(p.rank) + netCountSlot(L, mb);
  dev::fenceSys();  // the tile (the consumers' stores, our copy) before the count
  const unsigned long long seen = atomicAdd(reinterpret_cast<unsigned long long*>(count), 1ull);
  if (s == L.node || rows == 0 || seen + 1 != static_cast<unsigned long long>(netBlockTiles(L))) return 0;
  dev::fenceSys();  // every counted tile of the M-block before the put
  const int peer = p.comm.net->nodePeer[s];
  const uint64_t v = dev::netFlagValue(p.callSeq());
  const uint64_t at = uint64_t(netPieceOffset(L, piece, kNetEs));
  uint64_t ticket = 0;
  const bool sent = netArrivedInline(p.comm, peer, kRsNetReadyFlag, v) &&
                    netPutInline(p.comm, peer, uint64_t(netOutOffset(L, s, kNetEs)) + at,
                                 uint64_t(netInOffset(L, L.node, kNetEs)) + at,
                                 uint64_t(netPieceBytes(L, piece, kNetEs)), netDataFlag(piece), v, &ticket);
  if (!sent) {
    setDrain(words);
    return 0;
  }
  return ticket + 1;
}

template <int kBN>
__device__ __forceinline__ void netDrain(const ReduceParams& p, uint64_t ticket) {
  dev::waitGeqInline(p.comm, &p.comm.net->fifo.ctl->done, ticket + 1, -1, kSiteFifo);
}

template <class In>
struct NetElem;
template <>
struct NetElem<dev::Bf16> {
  __device__ __forceinline__ static float get(const uint32_t w, int hi) {
    return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16));
  }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};
template <>
struct NetElem<dev::F16> {
  __device__ __forceinline__ static float get(const uint32_t w, int hi) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(hi ? w >> 16 : w & 0xffffu)));
  }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};

// One warp. The sum of node sums 0..subs-1 (in that order, fp32, rounded once): the same bits
// whichever warp or rank computes it. Items are claimed in increasing order, so a warp's pieces
// only grow: it waits once per piece it meets (lane 0; the acquires pass on through the warp sync).
template <class In>
__device__ __forceinline__ void netAddWorker(const ReduceParams& p, uint32_t lane, uint32_t words) {
  const Layout& L = p.L;
  const int64_t items = netAddItems(L);
  uint64_t* own = p.opFlags(p.rank);
  const int64_t ldv = L.N / 8;
  int ready = -1;  // the piece whose inputs this warp has seen complete
  while (true) {
    long long item = 0;
    if (lane == 0) item = static_cast<long long>(atomicAdd(reinterpret_cast<unsigned long long*>(own + netClaimSlot(L)), 1ull));
    item = __shfl_sync(0xffffffffu, item, 0);
    if (item >= items) return;
    const int piece = netPieceOfItem(item);
    if (piece != ready) {
      // This node's sum of the piece (our CTAs' final tiles of its M-block of sub-chunk node), then
      // the other nodes'.
      bool ok = true;
      if (lane == 0) {
        ok = !draining(words) &&
             dev::waitGeqInline(p.comm, own + netCountSlot(L, L.node * L.mbs + piece), uint64_t(netBlockTiles(L)),
                                p.localOf[p.rank], kSiteFusedTile);
        const uint64_t v = dev::netFlagValue(p.callSeq());
        for (int m = 0; ok && m < L.subs; ++m)
          if (m != L.node) ok = netArrivedInline(p.comm, p.comm.net->nodePeer[m], netDataFlag(piece), v);
        if (!ok) setDrain(words);
      }
      __syncwarp();  // lane 0's acquires before every lane's reads
      if (__shfl_sync(0xffffffffu, ok ? 1 : 0, 0) == 0) return;
      ready = piece;
    }
    const int64_t r0 = item * kNetAddRows;
    const int rows = int(min64(kNetAddRows, L.subRows - r0));
    const int total = rows * int(ldv);
    for (int e = int(lane); e < total; e += 32) {
      const int64_t off = r0 * ldv + e;  // vector e of the item (rows are contiguous: pitch N)
      float acc[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] = 0.f;
      for (int m = 0; m < L.subs; ++m) {
        uint4 w;
        if (m == L.node)
          w = __ldcg(reinterpret_cast<const uint4*>(p.netArea + netSubOffset(L, m, kNetEs)) + off);
        else
          w = __ldcv(reinterpret_cast<const uint4*>(p.comm.net->window + netInOffset(L, m, kNetEs)) + off);
        const uint32_t ws4[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          acc[2 * k] += NetElem<In>::get(ws4[k], 0);
          acc[2 * k + 1] += NetElem<In>::get(ws4[k], 1);
        }
      }
      uint4 o;
      o.x = NetElem<In>::pack(acc[0], acc[1]);
      o.y = NetElem<In>::pack(acc[2], acc[3]);
      o.z = NetElem<In>::pack(acc[4], acc[5]);
      o.w = NetElem<In>::pack(acc[6], acc[7]);
      reinterpret_cast<uint4*>(p.netOut)[off] = o;
    }
  }
}

}  // namespace rs
}  // namespace mkccl
