// Host side of GEMM+ReduceScatter / GEMM+AllReduce shared by the ops (gemm_rs_op.cu,
// gemm_ar_op.cu), the planner (gemm_rs_plan.cu) and the per-type kernel files.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "kernels/device/wgmma.cuh"
#include "kernels/fused/gemm_rs_copy.cuh"
#include "kernels/gemm/gemm_plan.h"
#include "mkccl.h"
#include "runtime/enqueue.h"

namespace mkccl {
namespace rs {

// How many clusters of 2 CTAs of each tile width fit on the GPU at once (0: none).
struct Occupancy {
  int clusters256 = 0, clusters128 = 0;
};

// One fused launch.
struct FusedLaunch {
  const void* A;
  const void* W;
  int64_t M, N, K;       // A [M, K], W [N, K] (K: this rank's share)
  int64_t cRows;         // rows of C (RS: M / ws; AR: M)
  mkcclDataType_t type;
  int ctas;              // compute CTAs, a multiple of the cluster size
  uint64_t waitTimeoutNs;
  ReduceParams params;   // layout, buffers, flags (params.C is C)
};

// Per input type (dev::Bf16 in gemm_rs_bf16.cu, dev::F16 in gemm_rs_f16.cu).
template <class In>
mkcclResult_t reduceOccupancy(int dev, int smCount, Occupancy* out);
template <class In>
mkcclResult_t reduceLaunch(const FusedLaunch& f, cudaStream_t stream);

enum class PlanKind : int { Auto = 0, Fused = 1, Sequential = 2 };

// The fused plan of a call: tile configuration, CTAs, layout. ok = false when the fused kernel
// cannot run this shape (flags or scratch would not fit).
struct FusedPlan {
  bool ok = false;
  int bn = 256, cs = 2, ctas = 0;
  Layout L;
  double estUs = 0;  // the model's estimate
};

struct PlanInputs {
  int mode;                 // kModeReduceScatter / kModeAllReduce
  int ws;
  int64_t M, N, K;
  int ctaBudget;            // SMs a kernel of the comm may use
  Occupancy occ;
  GemmVariant variant;      // MKCCL_GEMM_VARIANT (forces the tile configuration)
  int64_t flagSlots;        // 64-bit slots from kOpFlagSlot in the flags region
};

// The best fused configuration by the model (ok = false: none can run this shape).
FusedPlan planFused(const PlanInputs& in);
// The model's estimate of the sequential plan (GEMM on every SM, then the collective).
double estimateSequentialUs(const PlanInputs& in);

// The auto plan of one call (gemm_rs_auto.cu): the model's choice or, on the first calls of a shape,
// a timed trial of both plans, then the faster one (decided alike on every rank).
struct AutoCall {
  bool fused = false;
  void* trial = nullptr;  // set when this call is a timed trial call
  int index = -1;
};
// Before the launch (records the trial call's start event; may wait for earlier trial calls and
// exchange their times over the bootstrap). modelUs: the model's estimate of its choice.
mkcclResult_t autoPlanBegin(mkcclComm* comm, cudaStream_t stream, const char* name, int mode, int64_t M, int64_t N,
                            int64_t K, mkcclDataType_t t, bool modelFused, double modelUs, AutoCall* call);
// After the launch, whatever its result (every rank must count the same calls).
void autoPlanEnd(const AutoCall& call, cudaStream_t stream);

// MKCCL_GEMM_RS_PLAN / MKCCL_GEMM_AR_PLAN: fused | sequential | auto (unset).
mkcclResult_t planFromEnv(const char* var, PlanKind* out);

// The op behind mkcclGemmReduceScatter (mode RS) and mkcclGemmAllReduce (mode AR).
mkcclResult_t gemmReduceOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                           mkcclDataType_t t, int mode);

}  // namespace rs
}  // namespace mkccl
