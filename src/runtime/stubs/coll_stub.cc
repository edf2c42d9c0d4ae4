// Placeholders until the NVLink collectives land (deleted by them). allGatherOp and barrierOp
// are the runtime's own simple versions (src/kernels/selftest.cu) until then.
#include "runtime/log.h"
#include "runtime/ops.h"
namespace mkccl {
mkcclResult_t reduceScatterOp(OpCtx&, const void*, void*, size_t, mkcclDataType_t, mkcclRedOp_t) {
  return setError(mkcclInvalidUsage, "mkcclReduceScatter: not implemented yet");
}
mkcclResult_t allReduceOp(OpCtx&, const void*, void*, size_t, mkcclDataType_t, mkcclRedOp_t) {
  return setError(mkcclInvalidUsage, "mkcclAllReduce: not implemented yet");
}
mkcclResult_t allToAllvOp(OpCtx&, const void*, const size_t*, const size_t*, void*, const size_t*, const size_t*,
                          mkcclDataType_t) {
  return setError(mkcclInvalidUsage, "mkcclAllToAll(v): not implemented yet");
}
}  // namespace mkccl
