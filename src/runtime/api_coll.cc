// Public collective entry points: argument checks, then the op (src/runtime/ops.h).
#include "mkccl.h"
#include "base/check.h"
#include "runtime/arg_checks.h"
#include "runtime/ops.h"
#include <algorithm>
#include <vector>

using namespace mkccl;

namespace {

bool mulOverflows(size_t a, size_t b, size_t* out) { return __builtin_mul_overflow(a, b, out); }

// Kernels access whole elements: buffers must be aligned to the element size.
mkcclResult_t checkElemAligned(const void* p, mkcclDataType_t t, const char* op, const char* what) {
  ARG_CHECK(((uintptr_t)p % typeSize(t)) == 0, "%s: %s=%p is not aligned to its element size (%zu bytes)", op, what, p,
            typeSize(t));
  return mkcclSuccess;
}

mkcclResult_t checkType(mkcclDataType_t t, const char* op) {
  ARG_CHECK(typeSize(t) != 0, "%s: datatype %d is not a valid mkcclDataType_t", op, (int)t);
  return mkcclSuccess;
}

mkcclResult_t checkRedOp(mkcclDataType_t t, mkcclRedOp_t op, const char* name) {
  ARG_CHECK((int)op >= 0 && op < mkcclNumOps, "%s: op %d is not a valid mkcclRedOp_t", name, (int)op);
  ARG_CHECK(t != mkcclFloat8e4m3 && t != mkcclFloat8e5m2,
            "%s: reductions on fp8 are not supported (reduce in bf16/fp16/fp32)", name);
  return mkcclSuccess;
}

// Both buffers on the comm's device, as large as the call reads / writes, and element-aligned.
mkcclResult_t checkBuffers(mkcclComm_t comm, const char* name, mkcclDataType_t t, const void* send, size_t sendBytes,
                           const void* recv, size_t recvBytes) {
  MKCCL_CHECK(checkDevicePtr(send, sendBytes, comm->cudaDev, name, "sendbuff"));
  MKCCL_CHECK(checkDevicePtr(recv, recvBytes, comm->cudaDev, name, "recvbuff"));
  MKCCL_CHECK(checkElemAligned(send, t, name, "sendbuff"));
  return checkElemAligned(recv, t, name, "recvbuff");
}

}  // namespace

mkcclResult_t mkcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mkcclDataType_t datatype,
                             mkcclComm_t comm, cudaStream_t stream) {
  const char* name = "mkcclAllGather";
  MKCCL_CHECK(commCheckUsable(comm, name));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkType(datatype, name));
  size_t bytes, total;
  ARG_CHECK(!mulOverflows(sendcount, typeSize(datatype), &bytes) && !mulOverflows(bytes, comm->nranks, &total),
            "%s: sendcount=%zu is too large", name, sendcount);
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, name));
  if (sendcount == 0) return mkcclSuccess;
  MKCCL_CHECK(checkBuffers(comm, name, datatype, sendbuff, bytes, recvbuff, total));
  const bool inPlace = (const char*)sendbuff == (const char*)recvbuff + comm->rank * bytes;
  ARG_CHECK(inPlace || !rangesOverlap(sendbuff, bytes, recvbuff, total),
            "%s: sendbuff overlaps recvbuff without being in place (in place: sendbuff = recvbuff + rank*sendcount)",
            name);
  return opEnqueue(comm, stream, name,
                 [&](OpCtx& ctx) { return allGatherOp(ctx, sendbuff, recvbuff, sendcount, datatype); });
}

mkcclResult_t mkcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mkcclDataType_t datatype,
                                 mkcclRedOp_t op, mkcclComm_t comm, cudaStream_t stream) {
  const char* name = "mkcclReduceScatter";
  MKCCL_CHECK(commCheckUsable(comm, name));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkType(datatype, name));
  MKCCL_CHECK(checkRedOp(datatype, op, name));
  size_t bytes, total;
  ARG_CHECK(!mulOverflows(recvcount, typeSize(datatype), &bytes) && !mulOverflows(bytes, comm->nranks, &total),
            "%s: recvcount=%zu is too large", name, recvcount);
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, name));
  if (recvcount == 0) return mkcclSuccess;
  MKCCL_CHECK(checkBuffers(comm, name, datatype, sendbuff, total, recvbuff, bytes));
  const bool inPlace = (const char*)recvbuff == (const char*)sendbuff + comm->rank * bytes;
  ARG_CHECK(inPlace || !rangesOverlap(sendbuff, total, recvbuff, bytes),
            "%s: recvbuff overlaps sendbuff without being in place (in place: recvbuff = sendbuff + rank*recvcount)",
            name);
  return opEnqueue(comm, stream, name,
                 [&](OpCtx& ctx) { return reduceScatterOp(ctx, sendbuff, recvbuff, recvcount, datatype, op); });
}

mkcclResult_t mkcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, mkcclDataType_t datatype,
                             mkcclRedOp_t op, mkcclComm_t comm, cudaStream_t stream) {
  const char* name = "mkcclAllReduce";
  MKCCL_CHECK(commCheckUsable(comm, name));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkType(datatype, name));
  MKCCL_CHECK(checkRedOp(datatype, op, name));
  size_t bytes;
  ARG_CHECK(!mulOverflows(count, typeSize(datatype), &bytes), "%s: count=%zu is too large", name, count);
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, name));
  if (count == 0) return mkcclSuccess;
  MKCCL_CHECK(checkBuffers(comm, name, datatype, sendbuff, bytes, recvbuff, bytes));
  ARG_CHECK(sendbuff == recvbuff || !rangesOverlap(sendbuff, bytes, recvbuff, bytes),
            "%s: sendbuff and recvbuff overlap without being equal (in place: sendbuff == recvbuff)", name);
  return opEnqueue(comm, stream, name,
                 [&](OpCtx& ctx) { return allReduceOp(ctx, sendbuff, recvbuff, count, datatype, op); });
}

mkcclResult_t mkcclAllToAll(const void* sendbuff, void* recvbuff, size_t count, mkcclDataType_t datatype,
                            mkcclComm_t comm, cudaStream_t stream) {
  const char* name = "mkcclAllToAll";
  MKCCL_CHECK(commCheckUsable(comm, name));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkType(datatype, name));
  size_t bytes, total;
  ARG_CHECK(!mulOverflows(count, typeSize(datatype), &bytes) && !mulOverflows(bytes, comm->nranks, &total),
            "%s: count=%zu is too large", name, count);
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, name));
  if (count == 0) return mkcclSuccess;
  MKCCL_CHECK(checkBuffers(comm, name, datatype, sendbuff, total, recvbuff, total));
  ARG_CHECK(!rangesOverlap(sendbuff, total, recvbuff, total), "%s: sendbuff and recvbuff overlap (not supported)",
            name);
  std::vector<size_t> counts(comm->nranks, count), displs(comm->nranks);
  for (int p = 0; p < comm->nranks; ++p) displs[p] = (size_t)p * count;
  return opEnqueue(comm, stream, name, [&](OpCtx& ctx) {
    return allToAllvOp(ctx, sendbuff, counts.data(), displs.data(), recvbuff, counts.data(), displs.data(), datatype,
                       true);
  });
}

mkcclResult_t mkcclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                             const size_t recvcounts[], const size_t rdispls[], mkcclDataType_t datatype,
                             mkcclComm_t comm, cudaStream_t stream) {
  const char* name = "mkcclAllToAllv";
  MKCCL_CHECK(commCheckUsable(comm, name));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkType(datatype, name));
  ARG_CHECK(sendcounts && sdispls && recvcounts && rdispls, "%s: a count or displacement array is NULL", name);
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, name));
  const size_t es = typeSize(datatype);
  size_t sendEnd = 0, recvEnd = 0;
  for (int p = 0; p < comm->nranks; ++p) {
    size_t e1, e2;
    ARG_CHECK(!__builtin_add_overflow(sendcounts[p], sdispls[p], &e1) && !mulOverflows(e1, es, &e1) &&
                  !__builtin_add_overflow(recvcounts[p], rdispls[p], &e2) && !mulOverflows(e2, es, &e2),
              "%s: counts/displacements for rank %d overflow", name, p);
    if (sendcounts[p]) sendEnd = std::max(sendEnd, e1);
    if (recvcounts[p]) recvEnd = std::max(recvEnd, e2);
  }
  MKCCL_CHECK(checkBuffers(comm, name, datatype, sendbuff, sendEnd, recvbuff, recvEnd));
  ARG_CHECK(!rangesOverlap(sendbuff, sendEnd, recvbuff, recvEnd), "%s: sendbuff and recvbuff overlap (not supported)",
            name);
  // Even when nothing moves on this rank, every rank takes part (its peers synchronise with it).
  return opEnqueue(comm, stream, name, [&](OpCtx& ctx) {
    return allToAllvOp(ctx, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype);
  });
}
