// The split route across nodes (net_split.h). Each rank's partial product P = A W^T (M x N, in the
// symmetric scratch, as the sequential route's) is written by GEMMs of row ranges in the order the
// collective asks for them (netReduceScatterProducedOp): for each piece of rows, the rows of every
// other node's ranks, which the collective reduces over NVLink and puts on the network at once;
// then this node's rows, computed while the pieces cross. Each GEMM is the engine's plan for its
// rows (split K where they are few, so a piece takes every SM). Rounding as on the sequential
// route: each partial rounded once, the sums in fp32 (node sums, then the nodes' sum in node order).
#include "ops/gemm_rs/net_split.h"
#include <algorithm>
#include "ops/coll/coll_net.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_fp8.h"
#include "ops/gemm_rs/net_route.h"
#include "base/check.h"
#include "base/log.h"
#include "runtime/comm.h"
#include "runtime/ops.h"
#include "runtime/symmem.h"

namespace mkccl {
namespace rs {

mkcclResult_t runNetSplit(OpCtx& ctx, const FusedArgs& a, int mode, GemmVariant v, int pieces, const Fp8Call* fp8,
                          bool* ran) {
  *ran = false;
  mkcclComm* comm = ctx.comm;
  const mkcclFusedWeight_t& w = a.w[0];
  const size_t ws = size_t(comm->nranks), M = a.M, N = w.N, es = typeSize(a.inType);
  if (M % ws != 0 || M == 0) return mkcclSuccess;  // AllReduce rows not divisible: no equal blocks
  const size_t R = M / ws;
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchGemmReduce, M * N * es, &region));
  char* partial = region->peer[comm->localRank];
  const char* A = static_cast<const char*>(a.A);
  GemmExtras x;
  x.lda = a.lda;
  x.ldw = w.ldw;
  NetProducedInput in;
  in.unitElems = N;
  in.units = R;
  // Pieces start on 16-byte boundaries of the window slots (the copies' vectors) or are one.
  in.pieces = pieces > 0 ? int(std::min<size_t>(size_t(pieces), R)) : netSplitPieces(int64_t(R), int64_t(N * es));
  if ((N * es) % 16 != 0) in.pieces = 1;
  in.produce = [&](int g0, int n, size_t u0, size_t un) -> mkcclResult_t {
    // Whole consecutive blocks are one range of rows; parts of blocks one GEMM per block.
    const bool whole = u0 == 0 && un == R;
    for (int i = 0; i < (whole ? 1 : n); ++i) {
      const size_t row = (size_t(g0) + size_t(i)) * R + u0, rows = whole ? size_t(n) * R : un;
      if (fp8 != nullptr) {
        // e4m3 rows of 2 a.K bytes; block scales: row `row`'s scales at row * ceil(2 a.K / 128).
        const size_t kS = fp8->kind == mkcclFp8ScaleBlock ? (2 * a.K + 127) / 128 : 0;
        const Fp8Problem p{A + row * a.lda * es, w.W, partial + row * N * es, int64_t(rows), int64_t(N),
                           int64_t(2 * a.K), fp8->kind, fp8->scaleA + row * kS, fp8->scaleW, a.inType};
        MKCCL_CHECK(gemmFp8Run(p, v, comm->cudaDev, ctx.stream));
        continue;
      }
      MKCCL_CHECK(gemmRunEx(A + row * a.lda * es, w.W, partial + row * N * es, rows, N, a.K, a.inType, a.inType, x, v,
                            ctx.stream));
    }
    return mkcclSuccess;
  };
  char* out = static_cast<char*>(w.C) + (mode == kModeAllReduce ? size_t(comm->rank) * R * N * es : 0);
  MKCCL_CHECK(netReduceScatterProducedOp(ctx, in, partial, out, a.inType, ran));
  if (!*ran || mode != kModeAllReduce) return mkcclSuccess;
  // AllReduce: the hierarchical AllGather of this rank's rows into C, in place (next call number).
  opNextKernel(ctx);
  return allGatherOp(ctx, out, w.C, R * N, a.inType);
}

}  // namespace rs
}  // namespace mkccl
