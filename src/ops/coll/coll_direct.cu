// The collectives' in-place paths over registered buffers (mkcclCommRegister): AllGather into a
// registered receive buffer (kernels/coll/coll_direct.cuh). The caller (coll_ops.cc) decides.
#include "ops/coll/coll_direct.h"
#include <algorithm>
#include "base/check.h"
#include "kernels/coll/coll_direct.cuh"
#include "runtime/comm.h"

namespace mkccl {
namespace coll {

const void* directAllGatherKernelPtr() { return reinterpret_cast<const void*>(&directAllGatherKernel); }

bool directAllGatherFits(const OpCtx& ctx, const Registration* g, const void* send, const void* recv, size_t bytes) {
  const int n = ctx.dev.localRanks;
  if (g == nullptr || n < 2 || n > kMaxLocalRanks || ctx.comm->nNodes != 1) return false;
  const uintptr_t s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  return ((s | r | bytes) & 15) == 0 && bytes > 0;
}

mkcclResult_t directAllGather(OpCtx& ctx, Registration* g, const void* send, void* recv, size_t bytes) {
  const int n = ctx.dev.localRanks, me = ctx.dev.localRank;
  const size_t off = static_cast<size_t>(static_cast<char*>(recv) - g->base) + static_cast<size_t>(ctx.dev.rank) * bytes;
  DirectArgs a;
  a.dev = ctx.dev;
  a.send = static_cast<const char*>(send);
  for (int q = 0; q < kMaxLocalRanks; ++q) a.dst[q] = q < n ? g->peer[q] + off : nullptr;
  a.bytes = bytes;
  a.skipSelf = a.dst[me] == a.send ? 1 : 0;
  // Enough CTAs to keep the stores in flight (64 KiB of the block per CTA), within the SM budget.
  const size_t perCta = 64 << 10;
  int grid = static_cast<int>(std::min<size_t>((bytes + perCta - 1) / perCta, kDirectMaxCtas));
  grid = std::max(1, std::min(grid, opMaxCtas(ctx.comm)));
  directAllGatherKernel<<<grid, kDirectThreads, 0, ctx.stream>>>(a);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

}  // namespace coll
}  // namespace mkccl
