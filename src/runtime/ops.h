// Internal entry points of the operations. The public functions (api_ops.cc) check arguments and
// the communicator, then call these with a prepared OpCtx (device set, sequence number taken).
#pragma once
#include "runtime/enqueue.h"

namespace mkccl {

// Device barrier among the ranks of the node (and, with several nodes, the network).
mkcclResult_t barrierOp(OpCtx& ctx);

// Collectives (src/kernels/coll, src/runtime/coll_*.cc). Counts are elements; bytes never 0 here.
mkcclResult_t allGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t);
mkcclResult_t reduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                              mkcclRedOp_t op);
mkcclResult_t allReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                          mkcclRedOp_t op);
// All-to-all(v): counts/displacements in elements, host arrays of nranks entries.
mkcclResult_t allToAllvOp(OpCtx& ctx, const void* send, const size_t* sendcounts, const size_t* sdispls,
                          void* recv, const size_t* recvcounts, const size_t* rdispls, mkcclDataType_t t);

// GEMM engine on one GPU (src/kernels/gemm). Arguments already checked.
mkcclResult_t gemmOp(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                     mkcclDataType_t outType, cudaStream_t stream);

// Fused ops (src/kernels/fused).
mkcclResult_t allGatherGemmOp(OpCtx& ctx, const void* A, const void* W, void* C, void* gatheredA, size_t M,
                              size_t N, size_t K, mkcclDataType_t t);
mkcclResult_t gemmReduceScatterOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N,
                                  size_t K, mkcclDataType_t t);
mkcclResult_t gemmAllReduceOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                              mkcclDataType_t t);

}  // namespace mkccl
