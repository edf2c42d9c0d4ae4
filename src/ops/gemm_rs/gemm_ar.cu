// mkccl::gemmAllReduceOp: the GEMM+ReduceScatter kernel (gemm_rs.cu) whose owners then push each
// finished tile to every other rank, in the same kernel; or the sequential plan (GEMM, then
// our AllReduce, which itself goes one-shot for small sizes).
#include "ops/gemm_rs/host.h"
#include "runtime/fused_args.h"
#include "runtime/ops.h"

namespace mkccl {

mkcclResult_t gemmAllReduceOp(OpCtx& ctx, const FusedArgs& a) { return rs::gemmReduceOp(ctx, a, rs::kModeAllReduce); }

}  // namespace mkccl
