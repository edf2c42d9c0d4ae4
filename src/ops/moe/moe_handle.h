// The MoE handle (host side): what mkcclMoeCreate sizes and allocates once, so that dispatch and
// combine allocate nothing and never wait for the host.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "kernels/moe/moe_args.h"
#include "mkccl.h"
#include "runtime/enqueue.h"
#include "runtime/symmem.h"

struct mkcclMoe {
  uint64_t magic = 0;                 // kMoeMagic while alive
  mkcclComm* comm = nullptr;
  mkcclDataType_t dtype = mkcclBfloat16;
  mkccl::moe::Dims dims;
  mkccl::moe::Region reg;             // offsets in every rank's region
  mkccl::SymRegion region;            // reg.bytes per rank, mapped from every local rank
  mkccl::moe::LocalBufs local{};
  void* localBlock = nullptr;         // the one cudaMalloc behind `local`
  int ctas = 1;                       // grid of both kernels
  size_t smemBytes = 0;               // dispatch's dynamic shared memory
  bool dispatched = false;            // a dispatch was enqueued: combine has a layout to use
  size_t lastT = 0;                   // T of the last dispatch (combine's out has T rows)
};

namespace mkccl {
namespace moe {

// The second stream of the fused calls (mkcclMoeDispatchGemm, mkcclMoeGemmCombine: one grid there,
// one on the caller's stream), with the events that fork it from the caller's stream and join it
// back (capturable; nothing made per call): the communicator's first copy-engine stream
// (runtime/copy_engines.h), made once per communicator, not one per handle. Where ranks share a
// GPU in one process (tests), streams made and destroyed with every handle can come to share a
// hardware queue with another rank's stream, and a rank's dispatch queued there behind that
// rank's GEMM (which waits for every rank's dispatch) would hang until the timeout: the likely
// cause of one such timeout (2xH200, 4 ranks, moe_test's fused layer), not proven.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};
mkcclResult_t sideStreamOf(mkcclComm* comm, SideStream* out);

constexpr uint64_t kMoeMagic = 0x6d6b63636c4d6f45ull;  // "mkcclMoE"

// Checks the config against the communicator and resolves it (defaults filled in).
mkcclResult_t resolveDims(const mkcclComm* comm, const mkcclMoeConfig_t* cfg, Dims* out, mkcclDataType_t* dtype,
                          int* ctas);
// Collective over the communicator's ranks: every rank passes the same config.
mkcclResult_t handleCreate(mkcclComm* comm, const mkcclMoeConfig_t* cfg, mkcclMoe** out);
mkcclResult_t handleDestroy(mkcclMoe* h);
// A handle from the user: made by handleCreate, not destroyed, its communicator alive.
mkcclResult_t handleLookup(const mkcclMoe* h, const char* caller);

// The enqueues (arguments checked by the API, src/ops/moe/moe_api.cc).
mkcclResult_t dispatchOp(OpCtx& ctx, mkcclMoe* h, const void* X, const int32_t* topkIdx, const float* topkW, size_t T);
mkcclResult_t combineOp(OpCtx& ctx, mkcclMoe* h, const void* Y, void* out, size_t T);
// The fused dispatch + first expert GEMM (src/ops/moe/moe_dispatch_gemm.cu); W1 and act as
// mkcclMoeDispatchGemm takes them.
mkcclResult_t dispatchGemmOp(OpCtx& ctx, mkcclMoe* h, const void* X, const int32_t* topkIdx, const float* topkW,
                             size_t T, const void* W1, void* act, size_t N, int mode);
// The fused second expert GEMM + combine (src/ops/moe/moe_gemm_combine.cu); act, W2, Y and out as
// mkcclMoeGemmCombine takes them.
mkcclResult_t gemmCombineOp(OpCtx& ctx, mkcclMoe* h, const void* act, const void* W2, void* Y, void* out, size_t I,
                            size_t T);

// Shared by the enqueues: the kernels' arguments for a call of T tokens, and a launch of the
// dispatch or combine kernel (a.ctas CTAs) on `stream`.
Args argsFor(const OpCtx& ctx, const mkcclMoe* h, size_t T);
mkcclResult_t launchMoeKernel(const void* fn, const Args& a, size_t smem, cudaStream_t stream, const char* what);
// Across nodes the MoE calls run eagerly only: mkcclInvalidUsage naming `what` while ctx's stream
// is being captured (the fused calls check it before their first launch, so nothing is captured).
mkcclResult_t netCaptureCheck(const OpCtx& ctx, const char* what);
// How mkcclMoeDispatchGemm splits the handle's CTAs: the dispatch's share (the GEMM gets the rest).
int fusedDispatchCtas(int total);

}  // namespace moe
}  // namespace mkccl
