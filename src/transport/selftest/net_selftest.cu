#include "transport/selftest/net_selftest.h"
#include <string.h>
#include <vector>
#include "kernels/device/net.cuh"
#include "base/check.h"

namespace mkccl {
namespace netselftest {
namespace {

__device__ __forceinline__ unsigned char pattern(uint32_t seed, int rank, uint64_t i) {
  uint64_t x = ((uint64_t)seed << 32 | (uint32_t)rank) + i * 0x9e3779b97f4a7c15ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return (unsigned char)(x >> 40);
}

__global__ void fifoNopsKernel(DevComm c, int perPusher) {
  if ((threadIdx.x & 31) != 0 || perPusher <= 0) return;
  uint64_t t = 0;
  const FifoDev f = c.net->fifo;
  for (int i = 0; i < perPusher; ++i)
    if (!dev::fifoPush(c, f, fifoHeader(kFifoNop, 0, 0, (uint32_t)i), 0, 0, 0, &t)) return;
  dev::fifoWaitDone(c, f, t);
}

__global__ void fillKernel(DevComm c, uint64_t bytes, uint32_t seed) {
  unsigned char* w = (unsigned char*)c.net->window;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += (uint64_t)gridDim.x * blockDim.x)
    w[i] = pattern(seed, c.rank, i);
}

__global__ void exchangeKernel(DevComm c, int peer, uint64_t bytes, uint64_t chunk, uint64_t dstBase) {
  if (threadIdx.x != 0) return;
  const uint64_t n = (bytes + chunk - 1) / chunk;
  const uint64_t v = dev::netFlagValue(c.seq);
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t off = k * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    if (!dev::netPut(c, peer, off, dstBase + off, len, 1 + (uint32_t)k, v)) return;
  }
  for (uint64_t k = 0; k < n; ++k)
    if (!dev::netWaitArrival(c, peer, 1 + (uint32_t)k, v)) return;
}

__global__ void verifyKernel(DevComm c, int peer, uint64_t bytes, uint64_t dstBase, uint32_t seed,
                             unsigned long long* bad) {
  const unsigned char* w = (const unsigned char*)c.net->window + dstBase;
  unsigned long long mine = 0;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += (uint64_t)gridDim.x * blockDim.x)
    mine += w[i] != pattern(seed, peer, i);
  if (mine) atomicAdd(bad, mine);
}

}  // namespace

mkcclResult_t harnessCreate(int rank, int nranks, uint64_t windowBytes, int flagsPerPeer, uint64_t fifoSlots,
                            int timeoutMs, Harness* h, bool hostWindow) {
  *h = Harness{};
  CUDA_CHECK(cudaHostAlloc((void**)&h->errHost, sizeof(DevError), cudaHostAllocMapped));
  memset(h->errHost, 0, sizeof(DevError));
  CUDA_CHECK(cudaMalloc((void**)&h->errWords, 64 * sizeof(uint64_t)));
  CUDA_CHECK(cudaMemset(h->errWords, 0, 64 * sizeof(uint64_t)));
  CUDA_CHECK(cudaHostAlloc((void**)&h->slots, fifoSlots * sizeof(FifoCmd), cudaHostAllocMapped));
  memset(h->slots, 0, fifoSlots * sizeof(FifoCmd));
  CUDA_CHECK(cudaHostAlloc((void**)&h->ctl, sizeof(FifoCtl), cudaHostAllocMapped));
  memset(h->ctl, 0, sizeof(FifoCtl));
  CUDA_CHECK(cudaMalloc((void**)&h->counters, 2 * sizeof(uint64_t)));
  CUDA_CHECK(cudaMemset(h->counters, 0, 2 * sizeof(uint64_t)));
  h->hostWindow = hostWindow;
  if (hostWindow) {
    CUDA_CHECK(cudaHostAlloc((void**)&h->window, windowBytes, cudaHostAllocMapped));
    memset(h->window, 0, windowBytes);
  } else {
    CUDA_CHECK(cudaMalloc((void**)&h->window, windowBytes));
    CUDA_CHECK(cudaMemset(h->window, 0, windowBytes));
  }
  const size_t fb = (size_t)nranks * flagsPerPeer * sizeof(uint64_t);
  CUDA_CHECK(cudaHostAlloc((void**)&h->flags, fb, cudaHostAllocMapped));
  memset(h->flags, 0, fb);
  std::vector<int> nodes(nranks);
  for (int r = 0; r < nranks; ++r) nodes[r] = r;
  // Every rank is its own node, so node m's counterpart is rank m: one array serves as both tables.
  CUDA_CHECK(cudaMalloc((void**)&h->rankNode, nranks * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(h->rankNode, nodes.data(), nranks * sizeof(int), cudaMemcpyHostToDevice));
  NetDevComm n{};
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&n.fifo.slots, h->slots, 0));
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&n.fifo.ctl, h->ctl, 0));
  n.fifo.head = h->counters;
  n.fifo.tailCache = h->counters + 1;
  n.fifo.size = fifoSlots;
  if (hostWindow) CUDA_CHECK(cudaHostGetDevicePointer((void**)&n.window, h->window, 0));
  else n.window = h->window;
  n.windowBytes = windowBytes;
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&n.flags, h->flags, 0));
  n.flagsPerPeer = flagsPerPeer;
  n.nranks = nranks;
  n.rankNode = h->rankNode;
  n.nNodes = nranks;
  n.nodePeer = h->rankNode;
  CUDA_CHECK(cudaMalloc((void**)&h->net, sizeof(NetDevComm)));
  CUDA_CHECK(cudaMemcpy(h->net, &n, sizeof(n), cudaMemcpyHostToDevice));
  h->windowBytes = windowBytes;
  h->flagsPerPeer = flagsPerPeer;
  h->fifoSlots = fifoSlots;
  DevComm& d = h->dc;
  d.rank = rank;
  d.nranks = nranks;
  d.localRank = 0;
  d.localRanks = 1;
  d.node = rank;
  d.nNodes = nranks;
  d.seq = 1;
  d.timeoutNs = (uint64_t)timeoutMs * 1000000ull;
  d.peers[0] = h->errWords;
  d.flagsBytes = 64 * sizeof(uint64_t);
  d.dataBytes = 0;
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&d.err, h->errHost, 0));
  d.net = h->net;
  return mkcclSuccess;
}

void harnessDestroy(Harness* h) {
  cudaFree(h->net);
  cudaFree(h->rankNode);
  cudaFreeHost(h->flags);
  if (h->hostWindow) cudaFreeHost(h->window);
  else cudaFree(h->window);
  cudaFree(h->counters);
  cudaFreeHost(h->ctl);
  cudaFreeHost(h->slots);
  cudaFree(h->errWords);
  cudaFreeHost(h->errHost);
  *h = Harness{};
}

mkcclResult_t preloadKernels() {
  const void* fns[] = {(const void*)fifoNopsKernel, (const void*)fillKernel, (const void*)exchangeKernel,
                       (const void*)verifyKernel};
  for (const void* f : fns) {
    cudaFuncAttributes a;
    CUDA_CHECK(cudaFuncGetAttributes(&a, f));
  }
  return mkcclSuccess;
}

mkcclResult_t launchFifoNops(const Harness& h, uint64_t seq, int ctas, int warps, int perPusher, cudaStream_t s) {
  DevComm c = h.dc;
  c.seq = seq;
  fifoNopsKernel<<<ctas, warps * 32, 0, s>>>(c, perPusher);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t launchFill(const Harness& h, uint64_t bytes, uint32_t seed, cudaStream_t s) {
  fillKernel<<<132, 512, 0, s>>>(h.dc, bytes, seed);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t launchExchange(const Harness& h, int peer, uint64_t bytes, uint64_t chunk, uint64_t dstBase, uint64_t seq,
                             cudaStream_t s) {
  DevComm c = h.dc;
  c.seq = seq;
  exchangeKernel<<<1, 32, 0, s>>>(c, peer, bytes, chunk, dstBase);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t launchVerify(const Harness& h, int peer, uint64_t bytes, uint64_t dstBase, uint32_t seed,
                           unsigned long long* bad, cudaStream_t s) {
  verifyKernel<<<132, 512, 0, s>>>(h.dc, peer, bytes, dstBase, seed, bad);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

}  // namespace netselftest
}  // namespace mkccl
