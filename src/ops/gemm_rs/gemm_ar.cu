// mkccl::gemmAllReduceOp: the GEMM+ReduceScatter kernel (gemm_rs.cu) whose owners then push each
// finished tile to every other rank, in the same kernel; or the sequential plan (GEMM, then
// our AllReduce, which itself goes one-shot for small sizes).
#include "ops/gemm_rs/host.h"
#include "runtime/ops.h"

namespace mkccl {

mkcclResult_t gemmAllReduceOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                              mkcclDataType_t t) {
  return rs::gemmReduceOp(ctx, A, W, C, M, N, K, t, rs::kModeAllReduce);
}

}  // namespace mkccl
