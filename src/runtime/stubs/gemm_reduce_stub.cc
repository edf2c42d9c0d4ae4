// Placeholders until the fused GEMM+ReduceScatter / GEMM+AllReduce land (deleted by them).
#include "runtime/log.h"
#include "runtime/ops.h"
namespace mkccl {
mkcclResult_t gemmReduceScatterOp(OpCtx&, const void*, const void*, void*, size_t, size_t, size_t, mkcclDataType_t) {
  return setError(mkcclInvalidUsage, "mkcclGemmReduceScatter: not implemented yet");
}
mkcclResult_t gemmAllReduceOp(OpCtx&, const void*, const void*, void*, size_t, size_t, size_t, mkcclDataType_t) {
  return setError(mkcclInvalidUsage, "mkcclGemmAllReduce: not implemented yet");
}
}  // namespace mkccl
