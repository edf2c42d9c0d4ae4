// Host side of AllGather+GEMM shared by the op (ag_gemm.cu) and the kernels' launch code: what a
// call needs, the two plans' launchers, the cost model that picks a plan.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "ops/ag_gemm/model.h"
#include "kernels/ag_gemm/push.cuh"
#include "ops/gemm/gemm_plan.h"
#include "mkccl.h"
#include "runtime/copy_engines.h"

namespace mkccl {
namespace ag {

// One call, as the fused kernel's launcher needs it.
struct FusedCall {
  const void* A;
  const void* W;
  void* C;
  int64_t M, N, K;
  mkcclDataType_t type;
  PushArgs push;        // layout, buffers, flags (ownToRegion / gatheredOwn set)
  int commCtas;         // comm CTAs asked for (MKCCL_COMM_CTAS, config, ag_gemm.comm_ctas), -1: the model
  GemmVariant variant;  // gemm.variant
  int dev, smCount;
  uint64_t timeoutNs;   // the communicator's bound on device waits
  int64_t ceGroupBytes; // the ce plan's bytes per copy (ag_gemm.ce_group_kib; 0: the default)
  int ceRing;           // the ce plan's shards travel a ring (ag_gemm.ce=ring)
  // mkcclFusedGemmArgs_t (the first weight's): C's type and pitch, W's pitch, the bias.
  mkcclDataType_t outType;
  int64_t ldw, ldc;
  const void* bias;
  mkcclDataType_t biasType;
  int packedA;          // a strided A was copied into this rank's region slot (push.A, A point there)
  int fullRegion;       // this rank's region must hold the whole gathered A after the call (the
                        // further weights' GEMMs read it): the own shard goes there too
  int directOwn;        // in place (push.direct) with A not inside gatheredA: the own shard goes there
  int orderNodeRanks;   // across nodes numbered node by node: ranks per node (the tile order's, schedule.h)
  // e4m3 inputs (mkcclAllGatherGemmFp8): everything above describes the bytes, as bf16 rows of
  // K / 2 elements (type mkcclBfloat16, K and ldw halved; kernels/ag_gemm/op_fp8.cuh); the fused
  // kernel is the fp8 one (fusedLaunch<dev::E4m3>) and the sequential plan's GEMM mkcclGemmFp8's.
  int fp8;
  const float* scaleA;  // device: per tensor, 1 float each; block, this rank's shard's scale rows
  const float* scaleW;  // [m][ceil(K/128)] (also in push.aScales) and W's [ceil(N/128)][ceil(K/128)]
  int blockScales;      // fp8 block scales: the kernel is fusedLaunch<Fp8Block>, the layout has a
                        // scale area (push.L.scaleRowBytes), the sequential GEMM reads it
};

// The input "type" of the block-scaled e4m3 kernels (launch_fp8_block.cu): e4m3 bytes like
// dev::E4m3, other kernels and planner.
struct Fp8Block {};

struct FusedPlan {
  GemmPlan gemm;        // tile, cluster and compute CTAs of the fused kernel
  GemmPlan full;        // the same GEMM on every SM (what the sequential plan's GEMM gets)
  int commCtas = 0;     // dedicated comm CTAs in the launch (whole clusters)
  int sideTeams = 0;    // the compute CTAs' idle producer warps communicate too
  bool commFromBudget = false;  // the comm CTAs took SMs from the GEMM (else they use spare SMs)
  Estimate est;         // the model's fused time (fusedUs, gemmUs, commUs)
};

// Comm CTAs the heuristic adds on SMs the GEMM leaves idle (small problems have fewer tiles than
// SMs), and the most a configuration may ask for.
constexpr int kMaxFreeCommCtas = 16;

// Plans the fused kernel for In = dev::Bf16 / dev::F16 / dev::E4m3 / Fp8Block (launch_bf16.cu,
// launch_f16.cu, launch_fp8.cu, launch_fp8_block.cu).
template <class In>
mkcclResult_t fusedPlan(const FusedCall& c, FusedPlan* out);
template <class In>
mkcclResult_t fusedLaunch(const FusedCall& c, const FusedPlan& plan, cudaStream_t stream);
// Loads the fused kernels of this input type on `dev` (preload.cu).
template <class In>
mkcclResult_t fusedPreload(int dev, int smCount);

// Across nodes: the network plan of a call (push.net) and the tile order's ranks per node (0 where
// the ranks are not numbered node by node). mkcclInvalidUsage for nodes of different sizes or a
// window too small for one shard per node (ops/ag_gemm/net_plan.cu).
mkcclResult_t netPlanFor(mkcclComm* comm, const Layout& L, const char* op, NetLayout* out, int* orderNodeRanks);

// The sequential plan's first kernel: the AllGather into the regions (gather.cu). It
// returns once every peer's shard has landed here (and gathered A is written, if asked).
mkcclResult_t gatherLaunch(const PushArgs& p, int dev, int ctas, cudaStream_t stream);
mkcclResult_t gatherPreload(int dev);

// The ce plan's copies (ops/ag_gemm/ce.cu), enqueued after the fused kernel was launched with
// push.ce = 1, its go word cleared and an event ce.fork recorded on `stream` before it (every
// value the streams wait for or write is a constant, so the call may be captured in a graph): this rank's shard to every
// receiver by the copy engines, groups of about groupBytes, each completing its chunks' counters;
// `stream` then waits for them (and copies the gathered A out if asked).
// ring (ag_gemm.ce=ring): the shards travel the ring me -> me+1 instead (ops/ag_gemm/ce.cu).
mkcclResult_t ceCopies(const CopyEngines& ce, const FusedCall& c, int64_t groupBytes, bool ring, cudaStream_t stream);
// (Copy sizes: ceGroupChunks, model.h; whether the driver can: copyEnginesUsable.)

}  // namespace ag
}  // namespace mkccl
