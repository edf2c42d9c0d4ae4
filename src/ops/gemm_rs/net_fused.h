// GEMM+ReduceScatter across nodes, fused: the launch (net_fused.cu) of a plan of net_plan.h.
// The default across nodes (gemm_rs.net / gemm_ar.net); run on one H200 on emulated nodes
// (gemm_rs_net_test), not on a real NIC.
#pragma once
#include "ops/gemm_rs/host.h"
#include "ops/gemm_rs/net_plan.h"

namespace mkccl {
namespace rs {

// The kernel's launch per input type (dev::Bf16 in launch_net_bf16.cu, dev::F16 in launch_net_f16.cu).
template <class In>
mkcclResult_t netReduceLaunch(const FusedLaunch& f, int dev, int smCount, cudaStream_t stream);

// Enqueues the fused kernel for this rank (the node's ranks by local index; the counterparts by
// the node map). C: this rank's M / nranks rows.
mkcclResult_t netFusedLaunch(OpCtx& ctx, const NetFusedPlan& plan, const void* A, const void* W, void* C,
                             int64_t M, int64_t N, int64_t K, mkcclDataType_t t, int64_t lda, int64_t ldw,
                             bool earlyPublish);

// gemm_rs.net=fused / gemm_ar.net=fused: plans this call and, where the fused kernel can run it,
// enqueues it (*ran); else leaves *ran false (the caller runs the sequential route; said once per
// process and op at INFO). AllReduce (mode kModeAllReduce): the fused ReduceScatter into this rank's rows
// of C, then the hierarchical AllGather of the rows, in place.
mkcclResult_t runNetFused(OpCtx& ctx, const FusedArgs& a, int mode, GemmVariant v, const Tuning::Reduce& over,
                          bool* ran);

}  // namespace rs
}  // namespace mkccl
