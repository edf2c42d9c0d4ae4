// mkccl::gemmAllReduceOp: the GEMM+ReduceScatter ring (gemm_rs_op.cu) followed, in the same
// kernel, by the finished tiles travelling the ring once more; or the sequential plan (GEMM, then
// our AllReduce, which itself goes one-shot for small sizes).
#include "kernels/fused/gemm_rs_host.cuh"
#include "runtime/ops.h"

namespace mkccl {

mkcclResult_t gemmAllReduceOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                              mkcclDataType_t t) {
  return rs::gemmReduceOp(ctx, A, W, C, M, N, K, t, rs::kModeAllReduce);
}

}  // namespace mkccl
