// GEMM+ReduceScatter / GEMM+AllReduce on a communicator spanning nodes: what runs, decided from
// what every rank knows alike (the tuner's plan, the call's epilogue arguments, the node map, the
// stream's capture state), so every rank takes the same route without talking.
//
// Across nodes the one-node fused kernel does not run (its partials and finished tiles travel by
// NVLink stores into the peers' scratch); gemm_rs.net=fused (or auto, the default, for a GEMM of more than one wave of tiles) runs the ReduceScatter in
// a kernel of its own design instead (net_plan.h; run on one H200 on emulated nodes only), falling
// back to the sequential route where its plan refuses a shape. gemm_rs.net=sequential: the
// hierarchical collectives (src/ops/coll/coll_net.cc): the GEMM engine writes this rank's partial
// product, then the inter-node ReduceScatter (an NVLink ReduceScatter inside the node into the
// share of each counterpart, one put per node pair and round between counterparts, the nodes'
// partials added in node order) or AllReduce (the same, then an NVLink AllGather: bit-identical on
// every rank). The exact route (bias, output type, pitch of C) runs as in one node, its fp32
// collective crossing nodes the same way. Host arithmetic, checked on the CPU
// (tests/fused/gemm_rs_layout_test.cc, GemmRsNet.*).
#pragma once
#include <stdint.h>
#include "kernels/gemm_rs/layout.h"
#include "ops/coll/net_pieces.h"

namespace mkccl {
namespace rs {

enum class NetVerdict : int {
  Run = 0,     // runs (route below)
  NotUniform,  // nodes of different sizes: counterparts do not exist (mkcclInvalidUsage)
  Capturing,   // captured into a CUDA graph: the collectives across nodes cannot be (mkcclInvalidUsage)
};

struct NetRoute {
  NetVerdict verdict = NetVerdict::Run;
  bool exact = false;    // the exact route (fp32 partial, fp32 collective, finish kernel)
  bool demoted = false;  // the tuner asked for fused or rs_ag: the sequential route runs instead
};

// planKnob: Tuning::Reduce::plan (0 auto, 1 fused, 2 sequential, 3 rs_ag).
inline NetRoute netRouteFor(int planKnob, bool epilogueExtras, bool uniform, bool capturing) {
  NetRoute r;
  if (!uniform) r.verdict = NetVerdict::NotUniform;
  else if (capturing) r.verdict = NetVerdict::Capturing;
  r.exact = epilogueExtras;
  r.demoted = !epilogueExtras && (planKnob == 1 || planKnob == 3);
  return r;
}

// Bytes one rank puts on the network in a call of the sequential route, N nodes of L ranks, C of
// M x n elements of es bytes (the model in docs/INTERNODE_MODEL.md): ReduceScatter, this node's
// partial of each other node's counterpart's rows (M / (N L) rows to each of N - 1 nodes);
// AllReduce, this rank's share of C (M n / L elements, 16-byte aligned shares; the largest, the
// first local rank's) to each of N - 1 nodes. The receiving side is the same by symmetry.
inline int64_t netBytesPerRank(int mode, int nodes, int perNode, int64_t M, int64_t n, int64_t es) {
  if (nodes < 2) return 0;
  const int64_t ws = int64_t(nodes) * perNode;
  if (mode == kModeAllReduce) {
    // The largest share (the first): ceil(count / L) elements, rounded up to 16-byte vectors.
    const int64_t count = M * n, per = 16 / es, blk = (count + perNode - 1) / perNode;
    const int64_t share = (blk + per - 1) / per * per;
    return int64_t(nodes - 1) * (share < count ? share : count) * es;
  }
  return int64_t(nodes - 1) * (M / ws) * n * es;
}

// gemm_rs.net / gemm_ar.net = auto: whether the fused kernel is tried before the split route. The
// split route beat it on every shape measured: one rank per node (no NVLink stage) and two, over
// tcp (windowOnHost: a socket, where the wire bounds the call; docs/INTERNODE.md 7.2). With
// several ranks per node on an RDMA transport the fused kernel goes first where its tiles make
// more than one wave: it overlaps the node's NVLink reduction with the GEMM, while the split route
// runs them one after the other (the 2 x 8 H200 model, docs/INTERNODE_MODEL.md: ~355-380 against
// ~430 us at RS 8192^3) — modelled, not measured (no NIC here).
inline bool netAutoFusedFirst(int ranksPerNode, bool windowOnHost) { return ranksPerNode > 1 && !windowOnHost; }

}  // namespace rs
}  // namespace mkccl
