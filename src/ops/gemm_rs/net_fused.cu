// GEMM+ReduceScatter across nodes as one persistent kernel (gemm_rs.net=fused, or auto, the default, beyond one wave of tiles): the
// plan (kernels/gemm_rs/net_layout.h) and the launch. Run on one H200 on emulated nodes
// (gemm_rs_net_test), per-piece puts included; not on a real NIC.
// The node level is the one-node fused kernel over this node's ranks (by local index), with the
// push team (the copy engines and bulk stores are one node's designs), its final tiles' node sums
// in our scratch's net area; net.cuh puts them to the counterparts and adds the nodes' sums.
#include <string.h>
#include <atomic>
#include "ops/gemm_rs/net_fused.h"
#include "base/check.h"
#include "base/log.h"
#include "runtime/comm.h"
#include "runtime/net_coll_info.h"
#include "runtime/ops.h"
#include "runtime/symmem.h"
#include "kernels/abi/fifo.h"

namespace mkccl {
namespace rs {

mkcclResult_t netFusedLaunch(OpCtx& ctx, const NetFusedPlan& plan, const void* A, const void* W, void* C,
                             int64_t M, int64_t N, int64_t K, mkcclDataType_t t, int64_t lda, int64_t ldw,
                             bool earlyPublish) {
  mkcclComm* comm = ctx.comm;
  NetCollInfo* info = netCollInfo(comm);
  const Layout& L = plan.L;
  const int es = int(typeSize(t));
  const SymRegion* region = nullptr;
  MKCCL_CHECK(symScratchGet(comm, kScratchGemmReduce, size_t(netScratchBytes(L, es)), &region));
  FusedLaunch f;
  f.A = A;
  f.W = W;
  f.M = M;
  f.N = N;
  f.K = K;
  f.lda = lda;
  f.ldw = ldw;
  f.cRows = netAreaRows(L);  // C's map: the net area
  f.type = t;
  f.ctas = plan.ctas;
  f.waitTimeoutNs = ctx.dev.timeoutNs + kGemmWaitTimeoutNs;
  ReduceParams& p = f.params;
  memset(&p, 0, sizeof(p));
  p.comm = ctx.dev;
  p.L = L;
  p.rank = comm->localRank;
  for (int q = 0; q < L.ws; ++q) {
    const int g = info->rankAt[size_t(info->node) * L.ws + q];
    const int local = comm->rankLocal[g];
    p.localOf[q] = local;
    p.scratchOf[q] = region->peer[local];
    p.wsOf[q] = reinterpret_cast<uint64_t*>(comm->ws.peer[local]);
  }
  p.seqCtr = p.wsOf[p.rank] + kSeqSlot;
  p.netArea = p.scratchOf[p.rank] + netAreaOffset(L);
  p.netOut = static_cast<char*>(C);
  p.C = p.netArea;
  p.rxFlags = p.wsOf[p.rank] + kOpFlagSlot;
  p.earlyPublish = earlyPublish ? 1 : 0;
  // The net counts and the claim count from 0: cleared before our kernel, after our last one.
  uint64_t* own = p.wsOf[p.rank] + kOpFlagSlot;
  CUDA_CHECK(cudaMemsetAsync(own + L.flagSlots(), 0, size_t(netFlagSlots(L) - L.flagSlots()) * 8, ctx.stream));
  MKCCL_CHECK(seqBumpOp(ctx));  // the kernel reads the call's number from the device (peekCallSeq)
  if (t == mkcclBfloat16) return netReduceLaunch<dev::Bf16>(f, comm->cudaDev, comm->smCount, ctx.stream);
  return netReduceLaunch<dev::F16>(f, comm->cudaDev, comm->smCount, ctx.stream);
}

mkcclResult_t runNetFused(OpCtx& ctx, const FusedArgs& a, int mode, GemmVariant v, const Tuning::Reduce& over,
                          bool* ran) {
  *ran = false;
  v = gemmVariantWide(v);  // the fused kernel has no 128 x 192 tiles
  mkcclComm* comm = ctx.comm;
  const char* name = mode == kModeAllReduce ? "mkcclGemmAllReduce" : "mkcclGemmReduceScatter";
  NetCollInfo* info = netCollInfo(comm);
  const mkcclFusedWeight_t& w = a.w[0];
  if (info == nullptr || (a.inType != mkcclBfloat16 && a.inType != mkcclFloat16)) return mkcclSuccess;
  NetFusedInputs in;
  in.mode = kModeReduceScatter;  // AllReduce: the ReduceScatter's plan (then an AllGather)
  in.nodes = info->nNodes;
  in.perNode = info->localRanks;
  in.node = info->node;
  in.nodeMajor = info->uniform && int(info->rankAt.size()) == comm->nranks;
  for (size_t i = 0; in.nodeMajor && i < info->rankAt.size(); ++i) in.nodeMajor = info->rankAt[i] == int(i);
  in.M = int64_t(a.M);
  in.N = int64_t(w.N);
  in.es = int64_t(typeSize(a.inType));
  in.ctaBudget = opMaxCtas(comm);
  in.bn = v == GemmVariant::F128C1 || v == GemmVariant::F128C2 ? 128 : 256;
  in.cs = v == GemmVariant::F256C2 || v == GemmVariant::F128C2 ? 2 : 1;
  if (in.cs == 2) {
    Occupancy occ;
    if (a.inType == mkcclBfloat16) MKCCL_CHECK(reduceOccupancy<dev::Bf16>(comm->cudaDev, comm->smCount, &occ));
    else MKCCL_CHECK(reduceOccupancy<dev::F16>(comm->cudaDev, comm->smCount, &occ));
    in.clusters256 = occ.clusters256;
    in.clusters128 = occ.clusters128;
  }
  in.flagSlots = int64_t(comm->ws.flagsBytes / 8) - kOpFlagSlot;
  in.flagsPerPeer = kFifoMaxFlags;
  in.windowBytes = info->windowBytes;
  in.autoRoute = over.net == Tuning::Reduce::kNetAuto;
  const NetFusedPlan plan = netFusedPlan(in);
  if (!plan.ok) {
    static std::atomic<bool> warned[2] = {{false}, {false}};
    if (!warned[mode == kModeAllReduce ? 1 : 0].exchange(true))
      MKCCL_INFO("%s: %s.net=%s does not fuse %zux%zux%zu on %d nodes of %d ranks (%s): the split or the sequential route runs",
                 name, mode == kModeAllReduce ? "gemm_ar" : "gemm_rs", in.autoRoute ? "auto" : "fused", a.M, w.N,
                 a.K, in.nodes, in.perNode, plan.why);
    return mkcclSuccess;
  }
  MKCCL_TRACE("%s call #%llu: across %d nodes, fused ReduceScatter%s (tile 128x%d, cluster %d, %d CTAs, %d tiles per "
              "M-block, %d pieces of at most %lld bytes per counterpart)",
              name, (unsigned long long)ctx.dev.seq, in.nodes, mode == kModeAllReduce ? ", then AllGather" : "",
              plan.L.bn, plan.L.cs, plan.ctas, netBlockTiles(plan.L), netPieces(plan.L),
              (long long)netPieceBytes(plan.L, 0, in.es));
  *ran = true;
  if (mode != kModeAllReduce)
    return netFusedLaunch(ctx, plan, a.A, w.W, w.C, int64_t(a.M), int64_t(w.N), int64_t(a.K), a.inType,
                          int64_t(a.lda), int64_t(w.ldw), over.publish > 0);
  // AllReduce: the fused ReduceScatter into this rank's rows of C, then the hierarchical AllGather of
  // those rows into C, in place (a kernel with a protocol of its own: the next sequence number).
  const size_t rows = a.M / size_t(comm->nranks), es = typeSize(a.inType);
  char* mine = static_cast<char*>(w.C) + size_t(comm->rank) * rows * w.N * es;
  MKCCL_CHECK(netFusedLaunch(ctx, plan, a.A, w.W, mine, int64_t(a.M), int64_t(w.N), int64_t(a.K), a.inType,
                             int64_t(a.lda), int64_t(w.ldw), over.publish > 0));
  opNextKernel(ctx);
  return allGatherOp(ctx, mine, w.C, rows * w.N, a.inType);
}

}  // namespace rs
}  // namespace mkccl
