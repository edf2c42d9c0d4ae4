// The inter-node step of the hierarchical collectives (see net_coll.h and src/ops/coll/coll_net.cc).
#include <cuda_bf16.h>
#include <algorithm>
#include <cuda_fp16.h>
#include "ops/coll/net_coll.h"
#include "kernels/device/net.cuh"
#include "kernels/device/reduce.cuh"
#include "base/check.h"

namespace mkccl {
namespace netcoll {
namespace {

constexpr int kExchangeThreads = 32;
constexpr int kReduceThreads = 512;

// Every wait below is bounded (dev::waitGeq); after a failed one the thread stops issuing work, so
// the peers' waits fail too (timeout, or at once once the proxy or the host aborts).
//
// Why the handshake: my R slots are read after this kernel (copies, the reduce kernel), in stream
// order before my next exchange kernel starts. My "ready" of call s is therefore raised only once
// every earlier use of my R slots is over, and a counterpart writes my R[its node] only after it.
// My S slots are overwritten only after this kernel ends, and it ends only after my puts have left
// them (netWaitSent).
__global__ void __launch_bounds__(kExchangeThreads) exchangeKernel(DevComm c, uint64_t slot, uint64_t bytes,
                                                                   int perNode) {
  if (!dev::barrierLocal(c, 0)) return;
  const NetDevComm* n = c.net;
  const int N = n->nNodes, me = c.node;
  const uint64_t v = dev::netFlagValue(c.seq);
  bool ok = true, put = false;
  uint64_t ticket = 0;
  for (int m = threadIdx.x; ok && m < N; m += blockDim.x)
    if (m != me) ok = dev::netSignal(c, n->nodePeer[m], kReadyFlag, v);
  for (int m = threadIdx.x; ok && m < N; m += blockDim.x)
    if (m != me) ok = dev::netWaitArrival(c, n->nodePeer[m], kReadyFlag, v);
  for (int m = threadIdx.x; ok && m < N; m += blockDim.x)
    if (m != me) {
      ok = dev::netPut(c, n->nodePeer[m], slotS(perNode ? m : me, slot), slotR(me, N, slot), bytes, kDataFlag, v,
                       &ticket);
      put = true;
    }
  for (int m = threadIdx.x; ok && m < N; m += blockDim.x)
    if (m != me) ok = dev::netWaitArrival(c, n->nodePeer[m], kDataFlag, v);
  if (ok && put) dev::netWaitSent(c, ticket);
}

// The pieced exchange (net_coll.h). One thread per node; the handshake as in exchangeKernel.
__global__ void __launch_bounds__(kExchangeThreads) exchangeSendKernel(DevComm c, uint64_t slot, uint64_t off,
                                                                       uint64_t bytes, int piece, int perNode) {
  const NetDevComm* n = c.net;
  const int N = n->nNodes, me = c.node;
  const uint64_t v = dev::netFlagValue(c.seq);
  if (piece == 0) {
    if (!dev::barrierLocal(c, 0)) return;
    bool ok = true;
    for (int m = threadIdx.x; ok && m < N; m += blockDim.x)
      if (m != me) ok = dev::netSignal(c, n->nodePeer[m], kReadyFlag, v);
    for (int m = threadIdx.x; ok && m < N; m += blockDim.x)
      if (m != me) ok = dev::netWaitArrival(c, n->nodePeer[m], kReadyFlag, v);
    __syncthreads();  // every counterpart is ready before any put (each thread waited for its own)
    if (!ok) return;
  }
  if (dev::deviceFailed(c)) return;  // a failed handshake or wait: push nothing more
  for (int m = threadIdx.x; m < N; m += blockDim.x)
    if (m != me &&
        !dev::netPut(c, n->nodePeer[m], slotS(perNode ? m : me, slot) + off, slotR(me, N, slot) + off, bytes,
                     kPieceFlag0 + piece, v))
      return;
}

// Waits for piece `piece` from every other node's counterpart; with `sent`, then until this rank's
// puts have left the window.
__global__ void __launch_bounds__(kExchangeThreads) exchangeWaitKernel(DevComm c, int piece, int sent) {
  const NetDevComm* n = c.net;
  const int N = n->nNodes, me = c.node;
  const uint64_t v = dev::netFlagValue(c.seq);
  bool ok = true;
  for (int m = threadIdx.x; ok && m < N; m += blockDim.x)
    if (m != me) ok = dev::netWaitArrival(c, n->nodePeer[m], kPieceFlag0 + piece, v);
  if (ok && sent && threadIdx.x == 0) dev::netWaitAllSent(c);
}

// Waits for the pieces in order and sums each as soon as it is here (net_coll.h): piece j is units
// [units j / pieces, units (j + 1) / pieces); every block takes its share of every piece, thread 0
// of each block waiting for the piece from every other node first (few blocks: the flags are host
// memory). Then block 0 waits until this rank's puts have left the window.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads) reduceArrivalsKernel(DevComm c, const char* window, uint64_t slot,
                                                                       const char* own, char* out, uint64_t units,
                                                                       uint64_t unitElems, int pieces) {
  extern __shared__ const char* s_in[];  // N pointers
  __shared__ char* s_out[1];
  __shared__ int ok;
  const NetDevComm* n = c.net;
  const int N = n->nNodes, me = c.node;
  const uint64_t v = dev::netFlagValue(c.seq);
  constexpr uint64_t V = 16 / sizeof(T);
  for (int j = 0; j < pieces; ++j) {
    if (threadIdx.x == 0) {
      ok = 1;
      for (int m = 0; m < N && ok; ++m)
        if (m != me && !dev::netWaitArrival(c, n->nodePeer[m], kPieceFlag0 + j, v)) ok = 0;
    }
    __syncthreads();
    if (!ok) return;
    const uint64_t e0 = units * j / pieces * unitElems, e1 = units * (j + 1) / pieces * unitElems;
    const uint64_t per = ((e1 - e0 + gridDim.x - 1) / gridDim.x + V - 1) / V * V;
    const uint64_t first = e0 + per * blockIdx.x;
    if (first < e1) {
      const uint64_t cnt = e1 - first < per ? e1 - first : per, off = first * sizeof(T);
      for (int m = threadIdx.x; m < N; m += blockDim.x) s_in[m] = (m == me ? own : window + slotR(m, N, slot)) + off;
      if (threadIdx.x == 0) s_out[0] = out + off;
      __syncthreads();
      dev::blockReduce<T, dev::OpSum>(s_in, N, s_out, 1, cnt, 0);
    }
    __syncthreads();  // s_in and ok are rewritten for the next piece
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) dev::netWaitAllSent(c);
}

// Block b reduces elements [b * per, ...) of every input; per keeps 16-byte vectors aligned.
template <typename T, typename Op>
__global__ void __launch_bounds__(kReduceThreads) reduceKernel(const char* window, uint64_t slot, int N, int me,
                                                               const char* own, char* out, size_t count, int avgDiv) {
  extern __shared__ const char* s_in[];  // N pointers
  __shared__ char* s_out[1];
  constexpr size_t V = 16 / sizeof(T);
  const size_t per = (count + gridDim.x - 1) / gridDim.x, perV = (per + V - 1) / V * V;
  const size_t first = (size_t)blockIdx.x * perV;
  if (first >= count) return;
  const size_t n = count - first < perV ? count - first : perV;
  const size_t off = first * sizeof(T);
  for (int m = threadIdx.x; m < N; m += blockDim.x) s_in[m] = (m == me ? own : window + slotR(m, N, slot)) + off;
  if (threadIdx.x == 0) s_out[0] = out + off;
  __syncthreads();
  dev::blockReduce<T, Op>(s_in, N, s_out, 1, n, avgDiv);
}

template <typename T>
const void* reduceByOp(mkcclRedOp_t op) {
  switch (op) {
    case mkcclSum:
    case mkcclAvg: return (const void*)&reduceKernel<T, dev::OpSum>;
    case mkcclProd: return (const void*)&reduceKernel<T, dev::OpProd>;
    case mkcclMax: return (const void*)&reduceKernel<T, dev::OpMax>;
    case mkcclMin: return (const void*)&reduceKernel<T, dev::OpMin>;
    default: return nullptr;
  }
}

const void* reduceFn(mkcclDataType_t t, mkcclRedOp_t op) {
  switch (t) {
    case mkcclInt8: return reduceByOp<int8_t>(op);
    case mkcclUint8: return reduceByOp<uint8_t>(op);
    case mkcclInt32: return reduceByOp<int32_t>(op);
    case mkcclUint32: return reduceByOp<uint32_t>(op);
    case mkcclInt64: return reduceByOp<int64_t>(op);
    case mkcclUint64: return reduceByOp<uint64_t>(op);
    case mkcclFloat16: return reduceByOp<__half>(op);
    case mkcclFloat32: return reduceByOp<float>(op);
    case mkcclFloat64: return reduceByOp<double>(op);
    case mkcclBfloat16: return reduceByOp<__nv_bfloat16>(op);
    default: return nullptr;
  }
}

// The pieced reduction sums the floating types the fused GEMMs produce.
const void* reduceArrivalsFn(mkcclDataType_t t) {
  switch (t) {
    case mkcclFloat16: return (const void*)&reduceArrivalsKernel<__half>;
    case mkcclBfloat16: return (const void*)&reduceArrivalsKernel<__nv_bfloat16>;
    case mkcclFloat32: return (const void*)&reduceArrivalsKernel<float>;
    default: return nullptr;
  }
}

size_t elemSize(mkcclDataType_t t) {
  switch (t) {
    case mkcclInt8: case mkcclUint8: return 1;
    case mkcclFloat16: case mkcclBfloat16: return 2;
    case mkcclInt32: case mkcclUint32: case mkcclFloat32: return 4;
    default: return 8;
  }
}

}  // namespace

mkcclResult_t launchExchange(const DevComm& c, uint64_t slot, uint64_t bytes, bool perNode, cudaStream_t s) {
  exchangeKernel<<<1, kExchangeThreads, 0, s>>>(c, slot, bytes, perNode ? 1 : 0);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t launchExchangeSend(const DevComm& c, uint64_t slot, uint64_t off, uint64_t bytes, int piece,
                                 bool perNode, cudaStream_t s) {
  if (piece < 0 || piece >= kMaxPieces)
    return setError(mkcclInternalError, "inter-node exchange: piece %d of at most %d", piece, kMaxPieces);
  exchangeSendKernel<<<1, kExchangeThreads, 0, s>>>(c, slot, off, bytes, piece, perNode ? 1 : 0);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t launchExchangeWait(const DevComm& c, int piece, bool sent, cudaStream_t s) {
  if (piece < 0 || piece >= kMaxPieces)
    return setError(mkcclInternalError, "inter-node exchange: piece %d of at most %d", piece, kMaxPieces);
  exchangeWaitKernel<<<1, kExchangeThreads, 0, s>>>(c, piece, sent ? 1 : 0);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t launchReduceArrivals(const DevComm& c, const char* window, uint64_t slot, int nNodes, const void* own,
                                   void* out, size_t units, size_t unitElems, int pieces, mkcclDataType_t t,
                                   cudaStream_t s) {
  const void* fn = reduceArrivalsFn(t);
  if (!fn) return setError(mkcclInvalidArgument, "inter-node reduction in pieces: type %d is not supported", (int)t);
  if (pieces < 1 || pieces > kMaxPieces || (size_t)pieces > units)
    return setError(mkcclInternalError, "inter-node reduction: %d pieces of %zu units", pieces, units);
  // A block per 64 KiB of a piece, at most 16 (each polls the flags in host memory).
  const size_t pieceBytes = units / (size_t)pieces * unitElems * elemSize(t);
  const unsigned grid = (unsigned)std::min<size_t>(16, std::max<size_t>(1, pieceBytes >> 16));
  const size_t smem = (size_t)nNodes * sizeof(const char*);
  if (smem > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const char* ownc = static_cast<const char*>(own);
  char* outc = static_cast<char*>(out);
  uint64_t u = units, ue = unitElems;
  DevComm cc = c;
  void* params[] = {(void*)&cc, (void*)&window, (void*)&slot, (void*)&ownc, (void*)&outc, (void*)&u, (void*)&ue,
                    (void*)&pieces};
  CUDA_CHECK(cudaLaunchKernel(fn, dim3(grid), dim3(kReduceThreads), params, smem, s));
  return mkcclSuccess;
}

mkcclResult_t launchReduce(const char* window, uint64_t slot, int nNodes, int node, const void* own, void* out,
                           size_t count, mkcclDataType_t t, mkcclRedOp_t op, int avgDiv, cudaStream_t s) {
  const void* fn = reduceFn(t, op);
  if (!fn) return setError(mkcclInvalidArgument, "inter-node reduction: op %d on type %d is not supported", (int)op, (int)t);
  if (count == 0) return mkcclSuccess;
  // A block per 256 KiB (the inputs may be host memory read over PCIe: many loads in flight help).
  const size_t bytes = count * elemSize(t);
  const unsigned grid = (unsigned)std::min<size_t>(128, std::max<size_t>(1, (bytes + (256 << 10) - 1) / (256 << 10)));
  const size_t smem = (size_t)nNodes * sizeof(const char*);
  const char* ownc = static_cast<const char*>(own);
  char* outc = static_cast<char*>(out);
  void* params[] = {(void*)&window, (void*)&slot, (void*)&nNodes, (void*)&node, (void*)&ownc, (void*)&outc,
                    (void*)&count, (void*)&avgDiv};
  if (smem > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  CUDA_CHECK(cudaLaunchKernel(fn, dim3(grid), dim3(kReduceThreads), params, smem, s));
  return mkcclSuccess;
}

mkcclResult_t preload() {
  cudaFuncAttributes a;
  CUDA_CHECK(cudaFuncGetAttributes(&a, (const void*)exchangeKernel));
  CUDA_CHECK(cudaFuncGetAttributes(&a, (const void*)exchangeSendKernel));
  CUDA_CHECK(cudaFuncGetAttributes(&a, (const void*)exchangeWaitKernel));
  for (mkcclDataType_t t : {mkcclFloat16, mkcclBfloat16, mkcclFloat32})
    CUDA_CHECK(cudaFuncGetAttributes(&a, reduceArrivalsFn(t)));
  const mkcclDataType_t types[] = {mkcclInt8,   mkcclUint8,   mkcclInt32,   mkcclUint32,  mkcclInt64,
                                   mkcclUint64, mkcclFloat16, mkcclFloat32, mkcclFloat64, mkcclBfloat16};
  for (mkcclDataType_t t : types)
    for (mkcclRedOp_t op : {mkcclSum, mkcclProd, mkcclMax, mkcclMin})
      CUDA_CHECK(cudaFuncGetAttributes(&a, reduceFn(t, op)));
  return mkcclSuccess;
}

}  // namespace netcoll
}  // namespace mkccl
