// GEMM+ReduceScatter across nodes, fused (gemm_rs.net=fused, or auto, the default, beyond one wave of tiles): whether the kernel
// can run a call and its layout, from what every rank knows alike (the call's shape, the node map,
// the flag area, the network's flags per sender and its window), so every rank takes the same route
// without talking. Host arithmetic, checked on the CPU (tests/fused/gemm_rs_net_layout_test.cc).
// The kernel side: kernels/gemm_rs/net_layout.h, net.cuh.
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/gemm_rs/net_layout.h"

namespace mkccl {
namespace rs {

struct NetFusedInputs {
  int mode = kModeReduceScatter;
  int nodes = 1, perNode = 1, node = 0;
  bool nodeMajor = false;      // rank = node * perNode + local index, on every node
  int64_t M = 0, N = 0;
  int64_t es = 2;              // bytes per element of C
  int ctaBudget = 0;           // compute CTAs allowed
  int clusters256 = 0, clusters128 = 0;  // clusters of 2 that fit (forced cluster variants)
  int bn = 256, cs = 1;         // tile width and cluster (gemm.variant; else 256 x 1)
  int64_t flagSlots = 0;       // the flag area past kOpFlagSlot
  int flagsPerPeer = 0;        // network arrival flags per sender
  uint64_t windowBytes = 0;    // the network window (the same on every rank)
  bool autoRoute = false;      // gemm_rs.net=auto: refuse a GEMM of one wave of tiles
};

struct NetFusedPlan {
  bool ok = false;
  const char* why = nullptr;  // why not (ok == false)
  Layout L;
  int ctas = 0;
};

inline NetFusedPlan netFusedPlan(const NetFusedInputs& in) {
  NetFusedPlan out;
  const auto no = [&out](const char* why) {
    out.why = why;
    return out;
  };
  if (in.mode != kModeReduceScatter) return no("only GEMM+ReduceScatter is fused across nodes");
  if (in.nodes < 2 || in.perNode < 1) return no("one node");
  if (in.nodes > kMaxNetNodes) return no("too many nodes");
  if (!in.nodeMajor) return no("ranks are not numbered node by node");
  if (in.N % 8 != 0) return no("N is not a multiple of 8");
  const int64_t ws = int64_t(in.nodes) * in.perNode;
  if (in.M % ws != 0) return no("M is not a multiple of the ranks");
  const int bn = in.bn, cs = in.cs;
  if ((bn != 128 && bn != 256) || (cs != 1 && cs != 2)) return no("no such tiles");
  int ctas = in.ctaBudget;
  if (cs == 2) ctas = std::min(in.ctaBudget / 2, bn == 256 ? in.clusters256 : in.clusters128) * 2;
  if (ctas < cs) return no("no CTA budget");
  Layout L = makeLayout(kModeReduceScatter, in.perNode, in.M, in.N, bn, cs, std::max(1, 16 / cs));
  applyNetLayout(&L, in.nodes, in.node, in.M);
  L.order = in.perNode > 2 ? kOrderInterleaved : kOrderPhases;
  if (netFlagSlots(L) > in.flagSlots) return no("its flags do not fit the flag area");
  // A data flag per 128-row piece of a sub-chunk, in the fixed budget of flags per sender.
  if (netFlagsNeeded(L) > in.flagsPerPeer)
    return no("a rank's rows need more 128-row pieces than the network has arrival flags per peer");
  if (L.orderLength() >= (int64_t(1) << 30)) return no("too many tiles");
  if (uint64_t(netWindowBytes(L, in.es)) > in.windowBytes) return no("the network window is too small");
  // One wave: every tile, foreign or own, ends with the whole GEMM, so no piece leaves earlier and
  // the overlap is gone (2 x H200, one GPU per emulated node: 1024x2048x65536 took 1.33-1.41x the
  // sequential route's time fused, docs/INTERNODE.md 7.1): auto runs the split route (net_split.h), or
  // where that does not apply the sequential one.
  if (in.autoRoute && L.orderLength() <= ctas / cs)
    return no("the GEMM is one wave of tiles, so nothing would leave for the network before it ends");
  out.ok = true;
  out.L = L;
  out.ctas = int(std::min<int64_t>(ctas / cs, L.orderLength())) * cs;
  return out;
}

}  // namespace rs
}  // namespace mkccl
