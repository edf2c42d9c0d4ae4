// Placeholder until the fused AllGather+GEMM lands (deleted by it).
#include "runtime/log.h"
#include "runtime/ops.h"
namespace mkccl {
mkcclResult_t allGatherGemmOp(OpCtx&, const void*, const void*, void*, void*, size_t, size_t, size_t,
                              mkcclDataType_t) {
  return setError(mkcclInvalidUsage, "mkcclAllGatherGemm: not implemented yet");
}
}  // namespace mkccl
