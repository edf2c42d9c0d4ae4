// Internal entry points of the operations. The public functions (api_ops.cc) check arguments and
// the communicator, then call these with a prepared OpCtx (device set, sequence number taken).
#pragma once
#include <memory>
#include "runtime/enqueue.h"

namespace mkccl {

// The ops' per-communicator state (src/ops/tuner): the tuning overrides of config->tuning (from
// version 2 of the struct), else the process's (MKCCL_TUNING or mkcclSetTuning(NULL, ...)).
mkcclResult_t opStateCreate(const mkcclConfig_t* config, std::shared_ptr<OpState>* out);
// mkcclSetTuning: a communicator's overrides (its cached plans dropped), or the process's (comm NULL).
mkcclResult_t setTuning(mkcclComm* comm, const char* text);

// Device barrier among the ranks of the node (and, with several nodes, the network).
mkcclResult_t barrierOp(OpCtx& ctx);
// Advances the device's call counter to this call's number (dev::takeCallSeq): launched before the
// kernels of a call that read the number with dev::peekCallSeq (src/ops/barrier.cu).
mkcclResult_t seqBumpOp(OpCtx& ctx);

// Collectives (src/kernels/coll, src/ops/coll). Counts are elements; bytes never 0 here.
mkcclResult_t allGatherOp(OpCtx& ctx, const void* send, void* recv, size_t sendcount, mkcclDataType_t t);
mkcclResult_t reduceScatterOp(OpCtx& ctx, const void* send, void* recv, size_t recvcount, mkcclDataType_t t,
                              mkcclRedOp_t op);
mkcclResult_t allReduceOp(OpCtx& ctx, const void* send, void* recv, size_t count, mkcclDataType_t t,
                          mkcclRedOp_t op);
// All-to-all(v): counts/displacements in elements, host arrays of nranks entries. uniform: the
// call is mkcclAllToAll (every count the same on every rank), so a size rule may choose its path.
mkcclResult_t allToAllvOp(OpCtx& ctx, const void* send, const size_t* sendcounts, const size_t* sdispls,
                          void* recv, const size_t* recvcounts, const size_t* rdispls, mkcclDataType_t t,
                          bool uniform = false);

// GEMM engine on one GPU (src/kernels/gemm). Arguments already checked.
mkcclResult_t gemmOp(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                     mkcclDataType_t outType, cudaStream_t stream);

// The engine over G stacked problems (MoE experts): rows of group g are [rowOffsets[g],
// rowOffsets[g + 1]) of A and C (device memory), its weights rows [g * N, (g + 1) * N) of W.
mkcclResult_t groupedGemmOp(const void* A, const void* W, void* C, const int* rowOffsets, int groups, size_t maxRows,
                            size_t N, size_t K, mkcclDataType_t inType, mkcclDataType_t outType, cudaStream_t stream);
mkcclResult_t groupedGemmPreload(int dev, int smCount);
mkcclResult_t groupedSwigluPreload(int dev, int smCount);  // mkcclGroupedGemmSwiglu (ops/gemm/grouped_swiglu.cu)

// Fused ops (src/kernels/<op> device code, src/ops/<op> host side), with their arguments checked
// and resolved (runtime/fused_args.h).
struct FusedArgs;
mkcclResult_t allGatherGemmOp(OpCtx& ctx, const FusedArgs& a);
mkcclResult_t gemmReduceScatterOp(OpCtx& ctx, const FusedArgs& a);
mkcclResult_t gemmAllReduceOp(OpCtx& ctx, const FusedArgs& a);

}  // namespace mkccl
