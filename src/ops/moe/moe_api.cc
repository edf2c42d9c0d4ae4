// Public entry points of MoE dispatch/combine: argument checks with messages, then the op
// (src/ops/moe).
#include "mkccl.h"
#include "ops/moe/moe_handle.h"
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

mkcclResult_t mkcclMoeDispatch(mkcclMoe_t h, const void* X, const int32_t* topkIdx, const float* topkW, size_t T,
                               cudaStream_t stream) {
  const char* op = "mkcclMoeDispatch";
  MKCCL_CHECK(moe::handleLookup(h, op));
  mkcclComm* comm = h->comm;
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
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
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) { return moe::dispatchOp(ctx, h, X, topkIdx, topkW, T); });
}

mkcclResult_t mkcclMoeCombine(mkcclMoe_t h, const void* Y, void* out, size_t T, cudaStream_t stream) {
  const char* op = "mkcclMoeCombine";
  MKCCL_CHECK(moe::handleLookup(h, op));
  mkcclComm* comm = h->comm;
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  const moe::Dims& d = h->dims;
  if (!h->dispatched)
    return setError(mkcclInvalidUsage, "%s: no mkcclMoeDispatch on this handle yet: combine returns its rows", op);
  ARG_CHECK(T == h->lastT, "%s: T=%zu, but the last dispatch on this handle had T=%zu on this rank", op, T, h->lastT);
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, op));
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
