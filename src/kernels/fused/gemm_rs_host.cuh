// Host side of GEMM+ReduceScatter / GEMM+AllReduce shared by the ops (gemm_rs_op.cu,
// gemm_ar_op.cu), the planner (gemm_rs_plan.cu) and the per-type kernel files.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "kernels/device/wgmma.cuh"
#include "kernels/fused/gemm_rs_copy.cuh"
#include "kernels/fused/gemm_rs_rule.h"
#include "kernels/gemm/gemm_plan.h"
#include "mkccl.h"
#include "runtime/copy_engines.h"
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

enum class PlanKind : int { Auto = 0, Fused = 1, Sequential = 2, RsThenAg = 3 };  // = planFromEnv's indices

// What the op knows when it plans a call: the rule's inputs (gemm_rs_rule.h), and what only a
// forced tile configuration uses.
struct PlanInputs : RuleInputs {
  Occupancy occ;
  GemmVariant variant = GemmVariant::Auto;  // MKCCL_GEMM_VARIANT (forces the fused kernel's tiles)
};

// The fused configuration of a call: MKCCL_GEMM_VARIANT's if forced, else the rule's
// (autoFusedPlan). ok = false: it cannot run this shape.
FusedPlan planFused(const PlanInputs& in);

// MKCCL_GEMM_RS_PLAN / MKCCL_GEMM_AR_PLAN (mode picks which): fused | sequential | auto (unset);
// for AllReduce also rs_ag (the fused ReduceScatter, then our AllGather; gemm_rs_rule.h).
mkcclResult_t planFromEnv(int mode, PlanKind* out);

// MKCCL_GEMM_RS_PUSH: how the fused kernel (of `mode`, on ws ranks) sends its partials. bulk:
// bulk stores from the epilogue's shared memory; team: staged locally, copied by the push team,
// paced by the GEMM; ce: staged locally, copied by the GPU's copy engines in batches of
// MKCCL_GEMM_RS_CE_BATCH tiles (*ceBatch; gemm_rs_ce.cu). Unset: ce at 2 ranks, bulk for the
// AllReduce from 4 ranks on, else team (*forced: set by the user). bulk and team may differ between
// ranks (both ends' formats and flags are the same); ce and its batch must be the same on every
// rank (one flag per batch).
// MKCCL_GEMM_RS_CE_SLOTS (ce only): the copy engines carry slots j < n (n owners), the push team
// the rest; unset: all. The same on every rank. MKCCL_GEMM_RS_CE_STREAMS (ce only): copy streams
// per slot, batches round-robin over them (unset: 1; at most 16 streams in all); a rank's own.
enum class PushMode : int { Bulk = 0, Team = 1, Ce = 2 };  // the values are the env choices' indices
struct PushChoice {
  PushMode mode = PushMode::Team;
  int ceBatch = 0, ceSlots = 0;  // ce: tiles per copy, slots by copy engine
  int ceStreams = 1;             // ce: copy streams per slot (MKCCL_GEMM_RS_CE_STREAMS)
  bool forced = false;           // MKCCL_GEMM_RS_PUSH set by the user
};
mkcclResult_t pushFromEnv(int mode, int ws, PushChoice* out);

// The copy engines' part of a fused call with MKCCL_GEMM_RS_PUSH=ce, enqueued after the kernel:
// per owner one stream of the communicator's copy engines that waits for each batch's word,
// copies the batch from our staging slots into the owner's receive slots and raises the owner's
// flag; the caller's stream joins them. `fork` was recorded on `stream` before the kernel.
mkcclResult_t ceCopies(const CopyEngines& ce, const ReduceParams& p, int streamsPerSlot, cudaStream_t stream);
// The copy streams per slot ceCopies uses (MKCCL_GEMM_RS_CE_STREAMS, clamped: at most
// kMaxLocalRanks streams in all), and in all.
inline int ceStreamsPerSlot(const Layout& L, int streamsPerSlot) {
  const int cap = kMaxLocalRanks / (L.ceSlots > 0 ? L.ceSlots : 1);
  return streamsPerSlot < 1 ? 1 : streamsPerSlot < cap ? streamsPerSlot : cap;
}
inline int ceStreamCount(const Layout& L, int streamsPerSlot) { return L.ceSlots * ceStreamsPerSlot(L, streamsPerSlot); }
// MKCCL_GEMM_RS_PUBLISH: when a consumer publishes a tile it staged for the push team: late
// (after its next mainloop; the team then paces by the tile after) | early (a few k-blocks into
// the next tile, paced by it). Unset: early with the spread order (Layout::order) or the copy
// engines, else late. A rank's own business: ranks may differ.
mkcclResult_t publishFromEnv(int order, PushMode push, int* early);
// MKCCL_GEMM_RS_ORDER: phases | interleaved | spread (Layout::order; gemm_rs_layout.cuh), and
// MKCCL_GEMM_RS_LAG: spread's lag D in cluster tiles (unset: one wave, numClusters). Both must be
// the same on every rank (a rank's waits assume its senders' order); phases and interleaved may
// differ between ranks (they differ only in the order of the sends). MKCCL_GEMM_RS_REDUCE:
// direct | ring (Layout::ring; phase order only), the same on every rank.
mkcclResult_t orderFromEnv(int ws, int numClusters, Layout* L);


// The op behind mkcclGemmReduceScatter (mode RS) and mkcclGemmAllReduce (mode AR).
mkcclResult_t gemmReduceOp(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                           mkcclDataType_t t, int mode);

}  // namespace rs
}  // namespace mkccl
