// Public entry points of MoE dispatch/combine: argument checks with messages, then the op
// (src/ops/moe).
#include <algorithm>
#include "mkccl.h"
#include "ops/moe/moe_handle.h"
#include "ops/tuner/op_state.h"
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/ops.h"

using namespace mkccl;

namespace {

bool overlaps(const void* pa, size_t na, const void* pb, size_t nb) {
  const char* a = (const char*)pa;
  const char* b = (const char*)pb;
  return na && nb && a < b + nb && b < a + na;
}

mkcclResult_t checkAligned(const char* op, const char* what, const void* p, size_t to) {
  ARG_CHECK(((uintptr_t)p % to) == 0, "%s: %s=%p must be %zu-byte aligned", op, what, p, to);
  return mkcclSuccess;
}

// This rank's part of the handle's symmetric region (what the kernels write).
const void* ownRegion(const mkcclMoe* h) { return h->region.peer[h->comm->localRank]; }

}  // namespace

mkcclResult_t mkcclMoeCreate(mkcclMoe_t* handle, mkcclComm_t comm, const mkcclMoeConfig_t* config) {
  const char* op = "mkcclMoeCreate";
  ARG_CHECK(handle != nullptr, "%s: handle is NULL", op);
  *handle = nullptr;
  MKCCL_CHECK(commCheckUsable(comm, op));
  if (comm->ccMajor != 9)
    return setError(mkcclInvalidUsage, "%s: device %d is not a Hopper GPU (sm_90 is required)", op, comm->cudaDev);
  DeviceGuard guard(comm->cudaDev);
  return moe::handleCreate(comm, config, handle);
}

mkcclResult_t mkcclMoeDestroy(mkcclMoe_t handle) { return moe::handleDestroy(handle); }

mkcclResult_t mkcclMoeGetBuffers(mkcclMoe_t h, mkcclMoeBuffers* b) {
  const char* op = "mkcclMoeGetBuffers";
  MKCCL_CHECK(moe::handleLookup(h, op));
  ARG_CHECK(b != nullptr, "%s: buffers is NULL", op);
  char* own = h->region.peer[h->comm->localRank];
  b->recvX = own + h->reg.recvX;
  b->rowPitch = h->dims.pitch();
  b->maxRecvRows = h->dims.rows;
  b->rowInfo = reinterpret_cast<mkcclMoeRowInfo*>(own + h->reg.rowInfo);
  b->expertOffsets = h->local.expertOffsets;
  b->expertCounts = h->local.expertCounts;
  b->numLocalExperts = h->dims.localExperts();
  b->rowAlign = h->dims.align;
  return mkcclSuccess;
}

namespace {

// The arguments a dispatch takes (mkcclMoeDispatch, mkcclMoeDispatchGemm). The caller holds a
// DeviceGuard and has looked the handle up.
mkcclResult_t checkDispatchArgs(const char* op, mkcclMoe_t h, const void* X, const int32_t* topkIdx,
                                const float* topkW, size_t T, cudaStream_t stream) {
  mkcclComm* comm = h->comm;
  const moe::Dims& d = h->dims;
  ARG_CHECK(T <= d.cap, "%s: T=%zu tokens is more than the handle's capacity (maxTokensPerRank=%zu)", op, T, d.cap);
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, op));
  const size_t xBytes = T * d.hidden * d.esize, slotBytes = T * (size_t)d.topk * 4;
  MKCCL_CHECK(checkAligned(op, "X", X, 2));
  MKCCL_CHECK(checkAligned(op, "topkIdx", topkIdx, 4));
  MKCCL_CHECK(checkAligned(op, "topkW", topkW, 4));
  MKCCL_CHECK(checkDevicePtr(X, xBytes, comm->cudaDev, op, "X"));
  MKCCL_CHECK(checkDevicePtr(topkIdx, slotBytes, comm->cudaDev, op, "topkIdx"));
  MKCCL_CHECK(checkDevicePtr(topkW, slotBytes, comm->cudaDev, op, "topkW"));
  ARG_CHECK(!overlaps(X, xBytes, ownRegion(h), h->reg.bytes),
            "%s: X lies in the handle's own buffers (recvX is rewritten by the dispatch)", op);
  return mkcclSuccess;
}

// What a combine needs of the handle and its call (mkcclMoeCombine, mkcclMoeGemmCombine): a
// dispatch before it, the same T, a stream of the communicator's device.
mkcclResult_t checkCombineCall(const char* op, mkcclMoe_t h, size_t T, cudaStream_t stream) {
  if (!h->dispatched)
    return setError(mkcclInvalidUsage, "%s: no mkcclMoeDispatch on this handle yet: combine returns its rows", op);
  ARG_CHECK(T == h->lastT, "%s: T=%zu, but the last dispatch on this handle had T=%zu on this rank", op, T, h->lastT);
  return checkStream(stream, h->comm->cudaDev, op);
}

// What a fused call needs of the handle (mkcclMoeDispatchGemm, mkcclMoeGemmCombine): 16-byte
// rows of H (dim: which of the GEMM's dimensions H is), tiles inside one expert, and at least two
// CTAs (commWork: what the non-computing ones do).
mkcclResult_t checkFusedHandle(const char* op, mkcclMoe_t h, const char* dim, const char* commWork) {
  const moe::Dims& d = h->dims;
  // Across nodes only the sequential route runs (the network dispatch / combine and the grouped
  // GEMM one after the other): the overlapped GEMM waits per 128-row block on counters that only
  // NVLink stores raise. Refused here, before a sequence number, alike on every rank (same handle
  // and tuning everywhere).
  if (h->comm->nNodes > 1 && tuningOf(h->comm).moe.fusedRoute == Tuning::Moe::kRouteOverlap)
    return setError(mkcclInvalidUsage,
                    "%s: moe.fused_route=overlap runs in one node only (the communicator spans %d nodes): set "
                    "moe.fused_route=sequential or auto (the default), which runs it across nodes",
                    op, h->comm->nNodes);
  ARG_CHECK(d.hidden % 8 == 0, "%s: the handle's hidden=%zu must be a multiple of 8 (the GEMM's %s: 16-byte rows)", op,
            d.hidden, dim);
  ARG_CHECK(d.align % 128 == 0, "%s: the handle's rowAlign=%d must be a multiple of 128 (a GEMM tile never "
            "straddles two experts)", op, d.align);
  // Refused here, before the call takes a sequence number (every rank has the same handle).
  const int ctas = std::min(h->ctas, h->comm->smCount);
  if (ctas < 2)
    return setError(mkcclInvalidUsage,
                    "%s: the handle may use %d CTA(s) (maxCtas); the fused call needs at least 2: a few %s, the rest "
                    "compute",
                    op, ctas, commWork);
  return mkcclSuccess;
}

}  // namespace

mkcclResult_t mkcclMoeDispatch(mkcclMoe_t h, const void* X, const int32_t* topkIdx, const float* topkW, size_t T,
                               cudaStream_t stream) {
  const char* op = "mkcclMoeDispatch";
  MKCCL_CHECK(moe::handleLookup(h, op));
  mkcclComm* comm = h->comm;
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkDispatchArgs(op, h, X, topkIdx, topkW, T, stream));
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) { return moe::dispatchOp(ctx, h, X, topkIdx, topkW, T); });
}

mkcclResult_t mkcclMoeDispatchGemm(mkcclMoe_t h, const void* X, const int32_t* topkIdx, const float* topkW, size_t T,
                                   const void* W1, void* act, size_t N, int swiglu, cudaStream_t stream) {
  const char* op = "mkcclMoeDispatchGemm";
  MKCCL_CHECK(moe::handleLookup(h, op));
  mkcclComm* comm = h->comm;
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkDispatchArgs(op, h, X, topkIdx, topkW, T, stream));
  const moe::Dims& d = h->dims;
  const int El = d.localExperts();
  MKCCL_CHECK(checkFusedHandle(op, h, "K", "push the rows"));
  ARG_CHECK(N >= 1 && N <= (size_t(1) << 24) && N % 8 == 0, "%s: N=%zu: expected a multiple of 8 in 8 .. 2^24", op, N);
  ARG_CHECK(swiglu == MKCCL_MOE_GEMM_PLAIN || swiglu == MKCCL_MOE_GEMM_SWIGLU || swiglu == MKCCL_MOE_GEMM_SWIGLU_GATE_UP,
            "%s: swiglu=%d: expected MKCCL_MOE_GEMM_PLAIN (0), MKCCL_MOE_GEMM_SWIGLU (1, W1 blocked-interleaved) or "
            "MKCCL_MOE_GEMM_SWIGLU_GATE_UP (2, W1 gate rows then up rows)",
            op, swiglu);
  const size_t wRows = swiglu == MKCCL_MOE_GEMM_SWIGLU_GATE_UP ? 2 * N : swiglu ? 2 * ((N + 127) / 128 * 128) : N;
  ARG_CHECK(size_t(El) * wRows < (size_t(1) << 31), "%s: W1 has %zu rows: at most 2^31 - 1", op, size_t(El) * wRows);
  const size_t wBytes = size_t(El) * wRows * d.hidden * d.esize, actBytes = d.rows * N * d.esize;
  ARG_CHECK(W1 != nullptr && act != nullptr, "%s: W1 and act must not be NULL", op);
  MKCCL_CHECK(checkAligned(op, "W1", W1, 16));
  MKCCL_CHECK(checkAligned(op, "act", act, 16));
  MKCCL_CHECK(checkDevicePtr(W1, wBytes, comm->cudaDev, op,
                             swiglu == MKCCL_MOE_GEMM_SWIGLU_GATE_UP ? "W1 ([E/nranks, 2*N, H])"
                             : swiglu                                ? "W1 ([E/nranks, 2*roundup(N,128), H])"
                                                                     : "W1 ([E/nranks, N, H])"));
  MKCCL_CHECK(checkDevicePtr(act, actBytes, comm->cudaDev, op, "act ([maxRecvRows, N])"));
  ARG_CHECK(!overlaps(act, actBytes, W1, wBytes), "%s: act overlaps W1", op);
  ARG_CHECK(!overlaps(act, actBytes, ownRegion(h), h->reg.bytes), "%s: act lies in the handle's buffers", op);
  ARG_CHECK(!overlaps(act, actBytes, X, T * d.hidden * d.esize), "%s: act overlaps X", op);
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) {
    return moe::dispatchGemmOp(ctx, h, X, topkIdx, topkW, T, W1, act, N, swiglu);
  });
}

mkcclResult_t mkcclMoeCombine(mkcclMoe_t h, const void* Y, void* out, size_t T, cudaStream_t stream) {
  const char* op = "mkcclMoeCombine";
  MKCCL_CHECK(moe::handleLookup(h, op));
  mkcclComm* comm = h->comm;
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  const moe::Dims& d = h->dims;
  MKCCL_CHECK(checkCombineCall(op, h, T, stream));
  const size_t yBytes = d.rows * d.rowBytes(), outBytes = T * d.hidden * d.esize;
  ARG_CHECK(Y != nullptr, "%s: Y is NULL", op);
  MKCCL_CHECK(checkAligned(op, "Y", Y, 16));
  const void* recvX = static_cast<const char*>(ownRegion(h)) + h->reg.recvX;
  if (Y != recvX) {
    MKCCL_CHECK(checkDevicePtr(Y, yBytes, comm->cudaDev, op, "Y (maxRecvRows rows of rowPitch elements)"));
    ARG_CHECK(!overlaps(Y, yBytes, ownRegion(h), h->reg.bytes),
              "%s: Y lies in the handle's buffers without being recvX", op);
  }
  MKCCL_CHECK(checkAligned(op, "out", out, 2));
  MKCCL_CHECK(checkDevicePtr(out, outBytes, comm->cudaDev, op, "out"));
  ARG_CHECK(!overlaps(out, outBytes, Y, yBytes), "%s: out overlaps Y", op);
  ARG_CHECK(!overlaps(out, outBytes, ownRegion(h), h->reg.bytes), "%s: out lies in the handle's buffers", op);
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) { return moe::combineOp(ctx, h, Y, out, T); });
}

mkcclResult_t mkcclMoeGemmCombine(mkcclMoe_t h, const void* act, const void* W2, void* Y, void* out, size_t I,
                                  size_t T, cudaStream_t stream) {
  const char* op = "mkcclMoeGemmCombine";
  MKCCL_CHECK(moe::handleLookup(h, op));
  mkcclComm* comm = h->comm;
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  const moe::Dims& d = h->dims;
  const int El = d.localExperts();
  MKCCL_CHECK(checkCombineCall(op, h, T, stream));
  MKCCL_CHECK(checkFusedHandle(op, h, "N", "return the rows"));
  ARG_CHECK(I >= 8 && I <= (size_t(1) << 24) && I % 8 == 0, "%s: I=%zu: expected a multiple of 8 in 8 .. 2^24", op, I);
  ARG_CHECK(size_t(El) * d.hidden < (size_t(1) << 31), "%s: W2 has %zu rows: at most 2^31 - 1", op,
            size_t(El) * d.hidden);
  ARG_CHECK(act != nullptr && W2 != nullptr && Y != nullptr && out != nullptr,
            "%s: act, W2, Y and out must not be NULL", op);
  const size_t es = d.esize, actBytes = d.rows * I * es, wBytes = size_t(El) * d.hidden * I * es,
               yBytes = d.rows * d.rowBytes(), outBytes = T * d.hidden * es;
  MKCCL_CHECK(checkAligned(op, "act", act, 16));
  MKCCL_CHECK(checkAligned(op, "W2", W2, 16));
  MKCCL_CHECK(checkAligned(op, "Y", Y, 16));
  MKCCL_CHECK(checkAligned(op, "out", out, 2));
  MKCCL_CHECK(checkDevicePtr(act, actBytes, comm->cudaDev, op, "act ([maxRecvRows, I])"));
  MKCCL_CHECK(checkDevicePtr(W2, wBytes, comm->cudaDev, op, "W2 ([E/nranks, H, I])"));
  const void* recvX = static_cast<const char*>(ownRegion(h)) + h->reg.recvX;
  if (Y != recvX) {
    MKCCL_CHECK(checkDevicePtr(Y, yBytes, comm->cudaDev, op, "Y (maxRecvRows rows of rowPitch elements)"));
    ARG_CHECK(!overlaps(Y, yBytes, ownRegion(h), h->reg.bytes),
              "%s: Y lies in the handle's buffers without being recvX", op);
  }
  MKCCL_CHECK(checkDevicePtr(out, outBytes, comm->cudaDev, op, "out"));
  ARG_CHECK(!overlaps(act, actBytes, ownRegion(h), h->reg.bytes), "%s: act lies in the handle's buffers", op);
  ARG_CHECK(!overlaps(Y, yBytes, act, actBytes) && !overlaps(Y, yBytes, W2, wBytes), "%s: Y overlaps act or W2", op);
  ARG_CHECK(!overlaps(out, outBytes, Y, yBytes) && !overlaps(out, outBytes, act, actBytes) &&
                !overlaps(out, outBytes, W2, wBytes),
            "%s: out overlaps Y, act or W2", op);
  ARG_CHECK(!overlaps(out, outBytes, ownRegion(h), h->reg.bytes), "%s: out lies in the handle's buffers", op);
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) { return moe::gemmCombineOp(ctx, h, act, W2, Y, out, I, T); });
}
