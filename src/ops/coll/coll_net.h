// Collectives across nodes (hierarchical): NVLink inside a node through the NVLink collective
// kernel (src/kernels/coll), the network between counterpart ranks (the same local rank in every
// node) through FIFO -> proxy -> transport (src/ops/coll/net_coll.h). Called by coll_ops.cc
// when the communicator spans several nodes. Arguments are checked by the API (api_coll.cc).
#pragma once
#include <stdint.h>
#include <string>
#include <vector>
#include "runtime/net_coll_info.h"
#include "runtime/ops.h"

namespace mkccl {

mkcclResult_t netAllGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t);
mkcclResult_t netReduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                                 mkcclRedOp_t op);
mkcclResult_t netAllReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                             mkcclRedOp_t op);


}  // namespace mkccl
