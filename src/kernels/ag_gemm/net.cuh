// AllGather+GEMM across nodes: the network roles of the communication teams (push.cuh's commTeam
// runs them around its NVLink push). Plan, window slots and flags: net_layout.h. Included by
// push.cuh after PushArgs and the copy helpers, before commTeam.
//
//   send    teams claim pieces of the own shard (work queue netSendClaimSlot), copy each into the
//           window's slot[node], and put it to the counterpart of every other node, once that
//           counterpart said its window is free for this call (kNetReadyFlag). Sends come before
//           the NVLink push: the network is the slowest link, so it starts first.
//   spread  teams claim (piece, node) items in piece-major order (netSpreadClaimSlot), wait for
//           the piece's arrival from that node's counterpart, and copy it from the window into the
//           gathered-A region of every rank of this node (this one included), then add to their
//           counters of the counterpart's chunks exactly as the counterpart's own NVLink push would
//           inside its node: the GEMM's producers cannot tell a spread piece from a pushed one.
//   drain   a team that put waits until its puts have left the window (netWaitSent), so the next
//           call (or a collective) may overwrite slot[node] once this kernel is over.
// Every wait is bounded (dev::waitGeq; a failed one records the call's error and the team stops,
// so the peers' waits fail too). The leader raises kNetReadyFlag at every counterpart when it
// enters: every earlier reader of this rank's window is an earlier kernel of its stream.
#pragma once
#include <stdint.h>
#include "kernels/abi/net_dev.h"
#include "kernels/device/net.cuh"

namespace mkccl {
namespace ag {

// Puts this rank's shard to the other nodes' counterparts. *ticket: the last put's FIFO ticket
// (thread 0), *put: whether there was one.
__device__ __forceinline__ bool netSend(const PushArgs& p, Team t, bool leader, uint64_t* ticket, bool* put) {
  const Layout& L = p.L;
  const NetLayout& nl = p.net;
  const NetDevComm* n = p.dev.net;
  const uint64_t s = p.callSeq();
  const uint64_t F = dev::flagValue(s, 0), v = dev::netFlagValue(s);
  bool ok = true;
  if (leader && t.tid == 0)
    for (int m = 0; m < nl.nodes && ok; ++m)
      if (m != nl.node) ok = dev::netSignal(p.dev, n->nodePeer[m], kNetReadyFlag, v);
  if (dev::teamBroadcast(t, ok ? 1 : 0) == 0) return false;
  uint64_t* mine = p.counters[p.lme];
  char* slot = n->window + nl.slotOff(nl.node);
  while (true) {
    const int piece = static_cast<int>(dev::teamBroadcast(t, t.tid == 0 ? dev::claim(mine + L.netSendClaimSlot(), F, 1) : 0));
    if (piece >= nl.nPieces) return true;
    const int64_t off = static_cast<int64_t>(nl.pieceRowBegin(piece)) * L.rowBytes;
    const int64_t len = static_cast<int64_t>(nl.pieceRowEnd(piece, L) - nl.pieceRowBegin(piece)) * L.rowBytes;
    dev::teamCopy<kCopyUnroll>(t, reinterpret_cast<uint4*>(slot + off), reinterpret_cast<const uint4*>(p.A + off),
                               len / 16);
    __threadfence_system();  // every thread's stores to the window before the put is queued
    t.sync();
    if (t.tid == 0) {
      const uint64_t at = static_cast<uint64_t>(nl.slotOff(nl.node) + off);
      for (int m = 0; m < nl.nodes && ok; ++m) {
        if (m == nl.node) continue;
        const int peer = n->nodePeer[m];
        ok = dev::netWaitArrival(p.dev, peer, kNetReadyFlag, v) &&
             dev::netPut(p.dev, peer, at, at, static_cast<uint64_t>(len), kNetPieceFlag + piece, v, ticket);
        *put = *put || ok;
      }
    }
    if (dev::teamBroadcast(t, ok ? 1 : 0) == 0) return false;
  }
}

// Spreads the pieces that arrive over NVLink into every local rank's region.
__device__ __forceinline__ bool netSpread(const PushArgs& p, Team t) {
  const Layout& L = p.L;
  const NetLayout& nl = p.net;
  const NetDevComm* n = p.dev.net;
  const uint64_t s = p.callSeq();
  const uint64_t F = dev::flagValue(s, 0), v = dev::netFlagValue(s);
  uint64_t* mine = p.counters[p.lme];
  const int others = nl.nodes - 1;
  const int items = others * nl.nPieces;
  char* dsts[kMaxLocalRanks];
  while (true) {
    const int i = static_cast<int>(dev::teamBroadcast(t, t.tid == 0 ? dev::claim(mine + L.netSpreadClaimSlot(), F, 1) : 0));
    if (i >= items) return true;
    const int piece = i / others;
    int m = nl.node + 1 + (i - piece * others);
    if (m >= nl.nodes) m -= nl.nodes;
    const int g = n->nodePeer[m];  // the counterpart there: its shard is g's
    const bool ok = t.tid == 0 ? dev::netWaitArrival(p.dev, g, kNetPieceFlag + piece, v) : true;
    if (dev::teamBroadcast(t, ok ? 1 : 0) == 0) return false;
    const int64_t off = static_cast<int64_t>(nl.pieceRowBegin(piece)) * L.rowBytes;
    const int64_t len = static_cast<int64_t>(nl.pieceRowEnd(piece, L) - nl.pieceRowBegin(piece)) * L.rowBytes;
    const int64_t at = static_cast<int64_t>(g) * L.shardBytes();
    for (int q = 0; q < p.lws; ++q) dsts[q] = p.region[q] + at;
    dev::teamCopyMulti<kCopyUnroll>(t, dsts, p.lws, off, n->window + nl.slotOff(m) + off, len);
    __threadfence_system();  // this thread's stores reach every receiver before the counters move
    t.sync();
    if (t.tid < static_cast<uint32_t>(p.lws)) {
      const int g0 = nl.sliceBegin(piece, L), g1 = nl.sliceEnd(piece, L);
      uint64_t* counters = p.counters[t.tid];
      for (int c = L.chunkOfSlice(g0); c <= L.chunkOfSlice(g1 - 1); ++c)
        dev::addRelease(counters + L.chunkSlot(g, c), static_cast<uint64_t>(L.slicesIn(c, g0, g1)));
    }
  }
}

}  // namespace ag
}  // namespace mkccl
