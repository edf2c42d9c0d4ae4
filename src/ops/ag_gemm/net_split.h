// AllGather+GEMM across nodes, split route (ag_gemm.net = split, or auto, the default, wherever it
// applies): this node's rows are computed while the other nodes' shards cross the network, and each
// piece of those is computed as soon as it has landed (net_split.cu; the collective side is
// netAllGatherConsumedOp, coll_net.h).
#pragma once
#include "ops/gemm/gemm_plan.h"
#include "runtime/enqueue.h"
#include "runtime/fused_args.h"

namespace mkccl {
namespace ag {

// Enqueues the call on the split route (*ran), or leaves *ran false where it does not apply (a
// rank's rows larger than a window slot): the caller runs the fused kernel. pieces: the tuner's
// ag_gemm.net_pieces (0: netSplitPieces' rule; clamped to the rows per rank).
mkcclResult_t runNetSplit(OpCtx& ctx, const FusedArgs& a, GemmVariant v, int pieces, bool* ran);

}  // namespace ag
}  // namespace mkccl
