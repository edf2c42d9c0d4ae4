// mkccl::gemmReduceScatterFp8Op / gemmAllReduceFp8Op: e4m3 inputs with per-tensor or block scales, run by
// gemm_rs.cu's driver as a 16-bit call of the bytes (fp8.h). Arguments were checked by the API
// (api_rs_fp8.cc).
#include "ops/gemm_rs/fp8.h"
#include "runtime/fused_args.h"
#include "runtime/ops_fp8.h"

namespace mkccl {
namespace {

// A [M, K] and W [N, K] e4m3 as 16-bit rows of K / 2 columns; C [M or M / ws, N] of outType
// (bf16 or fp16), which is also the partials' type: no epilogue extras, so never the exact route.
mkcclResult_t run(OpCtx& ctx, int mode, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                  mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW, mkcclDataType_t outType) {
  FusedArgs a;
  a.A = A;
  a.M = M;
  a.K = K / 2;
  a.lda = K / 2;
  a.aRows = M;
  a.cRows = mode == rs::kModeAllReduce ? M : M / static_cast<size_t>(ctx.comm->nranks);
  a.inType = outType;
  a.outType = outType;
  a.biasType = outType;
  a.numWeights = 1;
  a.w[0] = mkcclFusedWeight_t{W, C, nullptr, N, K / 2, N};
  const rs::Fp8Call s{scaleA, scaleW, kind};
  return rs::gemmReduceOp(ctx, a, mode, &s);
}

}  // namespace

mkcclResult_t gemmReduceScatterFp8Op(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N,
                                     size_t K, mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW,
                                     mkcclDataType_t outType) {
  return run(ctx, rs::kModeReduceScatter, A, W, C, M, N, K, kind, scaleA, scaleW, outType);
}

mkcclResult_t gemmAllReduceFp8Op(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                 mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW,
                                 mkcclDataType_t outType) {
  return run(ctx, rs::kModeAllReduce, A, W, C, M, N, K, kind, scaleA, scaleW, outType);
}

}  // namespace mkccl
