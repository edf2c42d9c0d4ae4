// GEMM+ReduceScatter / GEMM+AllReduce across nodes, split route (gemm_rs.net / gemm_ar.net = split,
// or auto, the default, as net_route.h's netAutoFusedFirst says): the GEMM cut by rows, the
// other nodes' rows first, so that their sums cross the network while this node's rows are
// computed (net_split.cu; the collective side is netReduceScatterProducedOp, coll_net.h).
#pragma once
#include "ops/gemm_rs/fp8.h"
#include "ops/gemm_rs/host.h"

namespace mkccl {
namespace rs {

// Enqueues the call on the split route (*ran), or leaves *ran false where it does not apply (M not
// a multiple of the ranks; a rank's rows larger than a window slot): the caller runs another route.
// pieces: the tuner's net_pieces (0: netSplitPieces' rule; clamped to the rows per rank). fp8: `a`
// describes the e4m3 bytes as 16-bit rows (fp8.h); each piece's GEMM is mkcclGemmFp8's on its rows
// (block scales: their scale rows).
mkcclResult_t runNetSplit(OpCtx& ctx, const FusedArgs& a, int mode, GemmVariant v, int pieces, const Fp8Call* fp8,
                          bool* ran);

}  // namespace rs
}  // namespace mkccl
