// Host side of GEMM+ReduceScatter / GEMM+AllReduce shared by the ops (gemm_rs.cu, gemm_ar.cu), the
// planner (plan.cu) and the per-type launch files.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "kernels/device/wgmma.cuh"
#include "kernels/gemm_rs/push.cuh"
#include "ops/gemm_rs/rule.h"
#include "ops/gemm/gemm_plan.h"
#include "ops/tuner/tuning.h"
#include "mkccl.h"
#include "runtime/copy_engines.h"
#include "runtime/enqueue.h"
#include "runtime/fused_args.h"

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
  int64_t lda, ldw;      // their row pitches (elements)
  int64_t cRows;         // rows of C (RS: M / ws; AR: M)
  mkcclDataType_t type;
  int ctas;              // compute CTAs, a multiple of the cluster size
  uint64_t waitTimeoutNs;
  ReduceParams params;   // layout, buffers, flags (params.C is C)
};

// Per input type (dev::Bf16 in launch_bf16.cu, dev::F16 in launch_f16.cu).
template <class In>
mkcclResult_t reduceOccupancy(int dev, int smCount, Occupancy* out);
template <class In>
mkcclResult_t reduceLaunch(const FusedLaunch& f, cudaStream_t stream);

// What the op knows when it plans a call: the rule's inputs (rule.h), and what only a forced tile
// configuration uses.
struct PlanInputs : RuleInputs {
  Occupancy occ;
  GemmVariant variant = GemmVariant::Auto;  // the tuner's gemm.variant (forces the fused kernel's tiles)
};

// The fused configuration of a call: gemm.variant's if forced, else the rule's (autoFusedPlan).
// ok = false: it cannot run this shape.
FusedPlan planFused(const PlanInputs& in);

// How the fused kernel sends its partials. Bulk: bulk stores from the epilogue's shared memory;
// team: staged locally, copied by the push team, paced by the GEMM; ce: staged locally, copied by
// the GPU's copy engines in batches of `ceBatch` tiles (ce.cu).
enum class PushMode : int { Bulk = 0, Team = 1, Ce = 2 };  // Tuning::Reduce::Push's values

// The push, order, reduction and publication of a fused call: the tuner's overrides (`over`), else
// the rules (plan.cu). `forcedPush`: the push was set by the user (an error where it cannot run,
// instead of falling back).
struct FusedChoices {
  PushMode push = PushMode::Team;
  bool forcedPush = false;
  int ceBatch = 0, ceStreams = 1;  // ce: tiles per copy, copy streams per peer
  int earlyPublish = 0;
};
mkcclResult_t fusedChoices(int mode, int ws, const Tuning::Reduce& over, Layout* L, FusedChoices* out);

// The copy engines' part of a fused call with the ce push, enqueued after the kernel: per owner one
// stream of the communicator's copy engines that waits for each batch's word, copies the batch from
// our staging slots into the owner's receive slots and raises the owner's flag; the caller's stream
// joins them. `fork` was recorded on `stream` before the kernel.
mkcclResult_t ceCopies(const CopyEngines& ce, const ReduceParams& p, int streamsPerSlot, cudaStream_t stream);
// The copy streams per slot ceCopies uses (clamped: at most kMaxLocalRanks streams in all), and
// in all.
inline int ceStreamsPerSlot(const Layout& L, int streamsPerSlot) {
  const int cap = kMaxLocalRanks / (L.ws > 1 ? L.ws - 1 : 1);
  return streamsPerSlot < 1 ? 1 : streamsPerSlot < cap ? streamsPerSlot : cap;
}
inline int ceStreamCount(const Layout& L, int streamsPerSlot) {
  return (L.ws - 1) * ceStreamsPerSlot(L, streamsPerSlot);
}

// The op behind mkcclGemmReduceScatter(Ex) (mode RS) and mkcclGemmAllReduce(Ex) (mode AR).
mkcclResult_t gemmReduceOp(OpCtx& ctx, const FusedArgs& a, int mode);

// The exact route's last step: C[r, j] (pitch ldc, outType) = S[r, j] + bias[j] from the fp32 sum
// S [rows, N] (finish.cu).
mkcclResult_t finishLaunch(const float* S, int64_t rows, int64_t N, void* C, int64_t ldc, mkcclDataType_t outType,
                           const void* bias, mkcclDataType_t biasType, int smCount, cudaStream_t stream);
mkcclResult_t finishPreload();  // loads finish.cu's kernels (preload.cu)

}  // namespace rs
}  // namespace mkccl
