// The split route of AllGather+GEMM across nodes (net_split.h). The gathered A (the caller's
// gatheredA, else our scratch) receives this rank's shard first; the collective
// (netAllGatherConsumedOp) sends it in pieces, gathers this node's shards over NVLink, and asks for
// the GEMMs of row ranges as their rows are in place: this node's rows at once, the other nodes'
// piece by piece as they land. Every GEMM is the engine's, with the call's epilogue (bias, output
// type, pitch of C) and every weight, on its rows; each row of C is computed once.
#include "ops/ag_gemm/net_split.h"
#include <algorithm>
#include <atomic>
#include "ops/coll/coll_net.h"
#include "ops/coll/net_pieces.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_fp8.h"
#include "runtime/ops.h"
#include "base/check.h"
#include "base/log.h"
#include "runtime/comm.h"
#include "runtime/symmem.h"

namespace mkccl {
namespace ag {

mkcclResult_t weightGemms(OpCtx& ctx, const FusedArgs& a, const char* gathered, size_t lda, size_t row0, size_t rows,
                          int firstWeight, GemmVariant v) {
  const size_t es = typeSize(a.inType), oes = typeSize(a.outType);
  for (int i = firstWeight; i < a.numWeights; ++i) {
    const mkcclFusedWeight_t& w = a.w[i];
    GemmExtras x;
    x.lda = lda;
    x.ldw = w.ldw;
    x.ldc = w.ldc;
    x.bias = w.bias;
    x.biasType = a.biasType;
    MKCCL_CHECK(gemmRunEx(gathered + row0 * lda * es, w.W, static_cast<char*>(w.C) + row0 * w.ldc * oes, rows, w.N,
                          a.K, a.inType, a.outType, x, v, ctx.stream));
  }
  return mkcclSuccess;
}

mkcclResult_t runNetSplit(OpCtx& ctx, const FusedArgs& a, GemmVariant v, int pieces, const NetFp8* fp8, bool* ran) {
  *ran = false;
  mkcclComm* comm = ctx.comm;
  const size_t ws = size_t(comm->nranks), M = a.M, K = a.K, es = typeSize(a.inType);
  if (M % ws != 0 || M == 0) return mkcclSuccess;
  const size_t R = M / ws;
  bool fits = false;
  MKCCL_CHECK(netPiecedFits(ctx, R * K * es, &fits));
  if (!fits) return mkcclSuccess;
  // Our scratch: the gathered rows (without a gatheredA), then the gathered block scales' rows.
  const bool block = fp8 != nullptr && fp8->kind == mkcclFp8ScaleBlock;
  const size_t kS = block ? (2 * K + 127) / 128 : 0;  // K: 16-bit columns of e4m3 bytes
  const size_t rowsBytes = a.gatheredA == nullptr ? (M * K * es + 255) / 256 * 256 : 0;
  char* gathered = static_cast<char*>(a.gatheredA);
  float* scales = nullptr;
  if (rowsBytes + M * kS * 4 > 0) {
    const SymRegion* region = nullptr;
    MKCCL_CHECK(symScratchGet(comm, kScratchAllGatherGemm, rowsBytes + M * kS * 4, &region));
    if (gathered == nullptr) gathered = region->peer[comm->localRank];
    if (block) scales = reinterpret_cast<float*>(region->peer[comm->localRank] + rowsBytes);
  }
  NetConsumedInput in;
  in.unitElems = K;
  in.units = R;
  in.pieces = pieces > 0 ? int(std::min<size_t>(size_t(pieces), R)) : netSplitPieces(int64_t(R), int64_t(K * es));
  if ((K * es) % 16 != 0) in.pieces = 1;  // pieces on 16-byte boundaries of the slots, or one
  const size_t oes = typeSize(a.outType);
  in.consume = [&](int g0, int n, size_t u0, size_t un) -> mkcclResult_t {
    // Whole consecutive blocks are one range of rows; parts of blocks one GEMM per block.
    const bool whole = u0 == 0 && un == R;
    for (int b = 0; b < (whole ? 1 : n); ++b) {
      const size_t row = (size_t(g0) + size_t(b)) * R + u0, rows = whole ? size_t(n) * R : un;
      if (fp8 != nullptr) {  // one weight, C of pitch N
        const mkcclFusedWeight_t& w = a.w[0];
        const Fp8Problem p{gathered + row * K * es, w.W, static_cast<char*>(w.C) + row * w.ldc * oes, int64_t(rows),
                           int64_t(w.N), int64_t(2 * K), fp8->kind, block ? scales + row * kS : fp8->scaleA,
                           fp8->scaleW, a.outType};
        MKCCL_CHECK(gemmFp8Run(p, v, comm->cudaDev, ctx.stream));
        continue;
      }
      MKCCL_CHECK(weightGemms(ctx, a, gathered, K, row, rows, 0, v));
    }
    return mkcclSuccess;
  };
  // This rank's shard into its place (contiguous).
  char* mine = gathered + size_t(comm->rank) * R * K * es;
  if (static_cast<const char*>(a.A) != mine)
    CUDA_CHECK(cudaMemcpy2DAsync(mine, K * es, a.A, a.lda * es, K * es, R, cudaMemcpyDeviceToDevice, ctx.stream));
  if (block) {
    // Every shard's scale rows first (a few KiB per rank; the hierarchical AllGather), then the
    // rows under the next call number.
    MKCCL_CHECK(allGatherOp(ctx, fp8->scaleA, scales, R * kS, mkcclFloat32));
    opNextKernel(ctx);
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    MKCCL_INFO("mkcclAllGatherGemm across %d nodes: split route (this node's rows while the other nodes' shards "
               "cross, then theirs piece by piece; %zux%zux%zu: %d pieces of a %zu-row shard)",
               comm->nNodes, M, a.w[0].N, K, in.pieces, R);
  return netAllGatherConsumedOp(ctx, in, gathered, a.inType, ran);
}

}  // namespace ag
}  // namespace mkccl
