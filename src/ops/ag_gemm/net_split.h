// AllGather+GEMM across nodes, split route (ag_gemm.net = split, or auto, the default, with one rank
// per node; netAutoSplit): this node's rows are computed while the other nodes' shards cross the network, and each
// piece of those is computed as soon as it has landed (net_split.cu; the collective side is
// netAllGatherConsumedOp, coll_net.h).
#pragma once
#include "ops/gemm/gemm_plan.h"
#include "runtime/enqueue.h"
#include "runtime/fused_args.h"

namespace mkccl {
namespace ag {

// ag_gemm.net = auto: the split route with one rank per node, and over tcp (windowOnHost), where it
// was at or below the fused kernel in 16 of 19 shape-runs at 2 x 1, 2 x 2 and 4 x 1 (docs/INTERNODE.md 6.1);
// with several ranks per node on an RDMA transport, the fused kernel, which overlaps the node's
// NVLink gather with the GEMM where the split route gathers the node's shards (and spreads each
// remote piece) before their GEMMs (the 2 x 8 H200 model, docs/INTERNODE_MODEL.md; not measured).
inline bool netAutoSplit(int ranksPerNode, bool windowOnHost) { return ranksPerNode == 1 || windowOnHost; }

// The GEMM engine on rows [row0, row0 + rows) of the gathered A (`gathered`, pitch lda elements)
// for weights firstWeight.. of the call, into the same rows of each weight's C, with the call's
// bias, output type and pitches (ag_gemm.cu; also the further weights of the fused calls).
mkcclResult_t weightGemms(OpCtx& ctx, const FusedArgs& a, const char* gathered, size_t lda, size_t row0, size_t rows,
                          int firstWeight, GemmVariant v);

// An fp8 call's scales (mkcclAllGatherGemmFp8; `a` then describes the e4m3 bytes as 16-bit rows):
// per tensor, scaleA is the same on every rank; block, this rank's shard's [rows][ceil(K/128)],
// gathered over the network before the rows (into our scratch).
struct NetFp8 {
  mkcclFp8ScaleKind_t kind = mkcclFp8ScaleTensor;
  const float* scaleA = nullptr;
  const float* scaleW = nullptr;
};

// Enqueues the call on the split route (*ran), or leaves *ran false where it does not apply (a
// rank's rows larger than a window slot): the caller runs the fused kernel. pieces: the tuner's
// ag_gemm.net_pieces (0: netSplitPieces' rule; clamped to the rows per rank).
mkcclResult_t runNetSplit(OpCtx& ctx, const FusedArgs& a, GemmVariant v, int pieces, const NetFp8* fp8, bool* ran);

}  // namespace ag
}  // namespace mkccl
