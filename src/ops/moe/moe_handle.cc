// mkcclMoeCreate / mkcclMoeDestroy behind the API: the config resolved and checked, the same on
// every rank, then the symmetric region (moe_layout.h: regionFor) and the local buffers.
#include "ops/moe/moe_handle.h"
#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include "ops/moe/moe_kernels.h"
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/copy_engines.h"
#include "runtime/net_coll_info.h"

namespace mkccl {
namespace moe {

static_assert(sizeof(mkcclMoeRowInfo) == 16, "the kernels store a row's info as one int4");
static_assert(sizeof(Route) == 16, "a route is one 16-byte load");

namespace {

std::mutex gMu;
std::set<const mkcclMoe*> gLive;

bool isPow2(long long v) { return v > 0 && (v & (v - 1)) == 0; }

// What every rank must agree on (checked by an allgather at creation).
struct Agreed {
  int experts, topk, align, dtype;
  uint64_t hidden, cap, rows;
};

// The local buffers, carved from one allocation (each piece 256-byte aligned).
struct LocalLayout {
  size_t ctaCounts, slotRank, pairRank, route, offsets, counts, sendList, netCount, netSeen, bytes;
};
LocalLayout localLayoutFor(const Dims& d, int ctas) {
  LocalLayout l{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t o = at;
    at = alignUp(at + bytes, 256);
    return o;
  };
  const size_t slots = d.cap * (size_t)d.topk;
  l.ctaCounts = take((size_t)ctas * d.keys() * 4);
  l.slotRank = take(slots * 4);
  l.pairRank = take(slots * 4);
  l.route = take(slots * sizeof(Route));
  l.offsets = take(((size_t)d.localExperts() + 1) * 4);
  l.counts = take((size_t)d.localExperts() * 4);
  l.sendList = take(slots * 4);
  l.netCount = take((size_t)kMaxRanks * kNetMaxPieces * 4);
  l.netSeen = take((size_t)kMaxRanks * kNetMaxPieces * 8);
  l.bytes = at;
  return l;
}

void freeHandle(mkcclMoe* h) {
  symRegionDestroy(h->comm, &h->region);  // also a partly made one
  if (h->localBlock) cudaFree(h->localBlock);
  h->localBlock = nullptr;
  h->magic = 0;
  delete h;
}

}  // namespace

mkcclResult_t sideStreamOf(mkcclComm* comm, SideStream* out) {
  CopyEngines* ce = nullptr;
  MKCCL_CHECK(copyEnginesGet(comm, 1, &ce));
  out->stream = ce->stream[0];
  out->fork = ce->fork;
  out->join = ce->join[0];
  return mkcclSuccess;
}

mkcclResult_t resolveDims(const mkcclComm* comm, const mkcclMoeConfig_t* cfg, Dims* out, mkcclDataType_t* dtype,
                          int* ctas) {
  const char* op = "mkcclMoeCreate";
  ARG_CHECK(cfg != nullptr, "%s: config is NULL (initialize one with MKCCL_MOE_CONFIG_INITIALIZER)", op);
  ARG_CHECK(cfg->magic == MKCCL_MOE_CONFIG_MAGIC, "%s: config has a bad magic 0x%x (initialize it with "
            "MKCCL_MOE_CONFIG_INITIALIZER)", op, cfg->magic);
  ARG_CHECK(cfg->version >= 1 && cfg->version <= MKCCL_MOE_CONFIG_VERSION,
            "%s: config version %u is not supported by this library (<= %d)", op, cfg->version, MKCCL_MOE_CONFIG_VERSION);
  ARG_CHECK(cfg->size >= sizeof(mkcclMoeConfig_t), "%s: config size %zu is smaller than mkcclMoeConfig_t (%zu)", op,
            cfg->size, sizeof(mkcclMoeConfig_t));
  // Across nodes (docs/MOE.md, "Across nodes"): the network carries what goes to other nodes; v1
  // needs nodes of one size and at most kMaxRanks ranks in all.
  const int n = comm->nranks;
  if (comm->nNodes > 1) {
    NetCollInfo* info = nullptr;
    MKCCL_CHECK(netUniformCollInfo(const_cast<mkcclComm*>(comm), op, &info));
    if (n > kMaxRanks)
      return setError(mkcclInvalidUsage, "%s across nodes: %d ranks in all; at most %d are supported yet", op, n,
                      kMaxRanks);
  }
  ARG_CHECK(cfg->numExperts >= 1 && cfg->numExperts <= kMaxExperts,
            "%s: numExperts=%d: expected 1..%d", op, cfg->numExperts, kMaxExperts);
  ARG_CHECK(cfg->numExperts % n == 0, "%s: numExperts=%d must be a multiple of the number of ranks (%d)", op,
            cfg->numExperts, n);
  ARG_CHECK(cfg->topk >= 1 && cfg->topk <= kMaxTopk, "%s: topk=%d: expected 1..%d", op, cfg->topk, kMaxTopk);
  ARG_CHECK(cfg->hidden >= 1 && cfg->hidden <= (1u << 20), "%s: hidden=%zu: expected 1..%u", op, cfg->hidden, 1u << 20);
  ARG_CHECK(cfg->dtype == mkcclBfloat16 || cfg->dtype == mkcclFloat16, "%s: dtype must be mkcclBfloat16 or mkcclFloat16",
            op);
  ARG_CHECK(cfg->maxTokensPerRank >= 1 && cfg->maxTokensPerRank <= (1u << 24),
            "%s: maxTokensPerRank=%zu: expected 1..%u", op, cfg->maxTokensPerRank, 1u << 24);
  ARG_CHECK(cfg->rowAlign == 0 || (isPow2(cfg->rowAlign) && cfg->rowAlign <= 1024),
            "%s: rowAlign=%d: expected 0 (128) or a power of two up to 1024", op, cfg->rowAlign);
  ARG_CHECK(cfg->maxCtas >= 0 && cfg->maxCtas <= 1024, "%s: maxCtas=%d: expected 0 (default) .. 1024", op, cfg->maxCtas);
  Dims d;
  d.ranks = n;
  d.localRanks = comm->localRanks;
  d.experts = cfg->numExperts;
  d.topk = cfg->topk;
  d.hidden = cfg->hidden;
  d.esize = 2;
  d.cap = cfg->maxTokensPerRank;
  d.align = cfg->rowAlign ? cfg->rowAlign : kDefaultAlign;
  const size_t worst = worstRecvRows(d);
  d.rows = cfg->maxRecvRows ? cfg->maxRecvRows : worst;
  if (d.rows > (size_t)INT32_MAX)
    return setError(mkcclInvalidArgument,
                    "%s: %zu receive rows (%s) do not fit 32-bit row indices: set maxRecvRows to at most %d (the rows "
                    "this rank may receive in one dispatch, padding included)",
                    op, d.rows, cfg->maxRecvRows ? "maxRecvRows" : "the worst case", INT32_MAX);
  if (comm->nNodes > 1) {
    // The counts exchange needs this much of the window on every call; the rows need more, checked
    // per call on the device (the routing decides).
    const NetCollInfo* info = netCollInfo(const_cast<mkcclComm*>(comm));
    if (info->windowBytes < netDataBase(d))
      return setError(mkcclInvalidUsage,
                      "%s across nodes: the network window (%llu bytes) cannot hold the counts exchange (%llu bytes); "
                      "raise MKCCL_NET_BUFFER_BYTES",
                      op, (unsigned long long)info->windowBytes, (unsigned long long)netDataBase(d));
  }
  *out = d;
  *dtype = cfg->dtype;
  const int limit = opMaxCtas(comm);
  *ctas = std::max(1, cfg->maxCtas ? std::min(cfg->maxCtas, limit) : limit);
  return mkcclSuccess;
}

mkcclResult_t handleCreate(mkcclComm* comm, const mkcclMoeConfig_t* cfg, mkcclMoe** out) {
  const char* op = "mkcclMoeCreate";
  Dims d;
  mkcclDataType_t dtype;
  int ctas = 1;
  MKCCL_CHECK(resolveDims(comm, cfg, &d, &dtype, &ctas));

  // Every rank must size the same layout: peers write into each other's regions by its offsets.
  std::vector<Agreed> all(comm->nranks);
  Agreed& mine = all[comm->rank];
  memset(&mine, 0, sizeof(mine));
  mine = Agreed{d.experts, d.topk, d.align, (int)dtype, d.hidden, d.cap, d.rows};
  MKCCL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Agreed)));
  for (int r = 0; r < comm->nranks; ++r)
    if (memcmp(&all[r], &mine, sizeof(Agreed)) != 0)
      return setError(mkcclInvalidArgument,
                      "%s: rank %d's config differs from rank %d's (numExperts %d/%d, topk %d/%d, hidden %llu/%llu, "
                      "dtype %d/%d, maxTokensPerRank %llu/%llu, receive rows %llu/%llu, rowAlign %d/%d): every rank "
                      "must pass the same",
                      op, r, comm->rank, all[r].experts, mine.experts, all[r].topk, mine.topk,
                      (unsigned long long)all[r].hidden, (unsigned long long)mine.hidden, all[r].dtype, mine.dtype,
                      (unsigned long long)all[r].cap, (unsigned long long)mine.cap, (unsigned long long)all[r].rows,
                      (unsigned long long)mine.rows, all[r].align, mine.align);

  // The kernels sync their grid: every CTA must be resident at once.
  const size_t smem = dispatchSmemBytes(d);
  const void* fn = dispatchKernelFn();
  // The largest any handle needs, so that handles of different sizes may take turns.
  Dims most = d;
  most.experts = kMaxExperts;
  most.ranks = kMaxRanks;
  CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dispatchSmemBytes(most)));
  int perSm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, fn, kThreads, smem));
  if (perSm < 1)
    return setError(mkcclInternalError, "%s: the dispatch kernel (%zu bytes of shared memory) cannot run on device %d",
                    op, smem, comm->cudaDev);
  ctas = std::min(ctas, perSm * comm->smCount);

  mkcclMoe* h = new mkcclMoe;
  h->comm = comm;
  h->dtype = dtype;
  h->dims = d;
  h->reg = regionFor(d);
  h->ctas = ctas;
  h->smemBytes = smem;
  const LocalLayout l = localLayoutFor(d, ctas);
  mkcclResult_t res = mkcclSuccess;
  cudaError_t e = cudaMalloc(&h->localBlock, l.bytes);
  if (e != cudaSuccess) {
    h->localBlock = nullptr;
    res = setError(mkcclUnhandledCudaError, "%s: allocating %zu bytes of local buffers: %s", op, l.bytes,
                   cudaGetErrorString(e));
  }
  if (res == mkcclSuccess) res = symRegionCreate(comm, h->reg.bytes, &h->region);
  SideStream side;  // the fused calls' second stream (made here once per communicator)
  if (res == mkcclSuccess) res = sideStreamOf(comm, &side);
  if (res == mkcclSuccess) {
    char* base = static_cast<char*>(h->localBlock);
    h->local.ctaCounts = reinterpret_cast<int32_t*>(base + l.ctaCounts);
    h->local.slotRank = reinterpret_cast<int32_t*>(base + l.slotRank);
    h->local.pairRank = reinterpret_cast<int32_t*>(base + l.pairRank);
    h->local.route = reinterpret_cast<Route*>(base + l.route);
    h->local.expertOffsets = reinterpret_cast<int32_t*>(base + l.offsets);
    h->local.expertCounts = reinterpret_cast<int32_t*>(base + l.counts);
    h->local.sendList = reinterpret_cast<int32_t*>(base + l.sendList);
    h->local.netCount = reinterpret_cast<uint32_t*>(base + l.netCount);
    h->local.netSeen = reinterpret_cast<uint64_t*>(base + l.netSeen);
    // Flags must start below every call's values (the counts and pair tables are zeroed too, and the
    // landing rows' ready words). No
    // peer writes here before this rank has entered a call on the handle, i.e. after this. On the
    // communicator's side stream, not a device-wide sync: ranks sharing a GPU may already run
    // kernels (a device-wide sync could wait for a peer's kernel that waits for us).
    cudaStream_t s = side.stream;
    e = cudaMemsetAsync(h->region.peer[comm->localRank], 0, h->reg.rowInfo, s);
    if (e == cudaSuccess)
      e = cudaMemsetAsync(h->region.peer[comm->localRank] + h->reg.landReady, 0, h->reg.arrivals - h->reg.landReady, s);
    if (e == cudaSuccess) e = cudaMemsetAsync(h->localBlock, 0, l.bytes, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) res = setError(mkcclUnhandledCudaError, "%s: zeroing the buffers: %s", op, cudaGetErrorString(e));
  }
  // Nobody launches on the handle before every rank has finished creating it.
  if (res == mkcclSuccess) res = comm->bootstrap->barrier();
  if (res != mkcclSuccess) {
    freeHandle(h);
    return res;
  }
  h->magic = kMoeMagic;
  {
    std::lock_guard<std::mutex> lock(gMu);
    gLive.insert(h);
  }
  MKCCL_INFO("%s: %d experts (%d per rank), top-%d, H %zu, capacity %zu tokens, %zu receive rows, align %d: "
             "%zu MiB symmetric per rank, %d CTAs",
             op, d.experts, d.localExperts(), d.topk, d.hidden, d.cap, d.rows, d.align, h->reg.bytes >> 20, ctas);
  *out = h;
  return mkcclSuccess;
}

mkcclResult_t handleLookup(const mkcclMoe* h, const char* caller) {
  {
    std::lock_guard<std::mutex> lock(gMu);
    ARG_CHECK(h != nullptr && gLive.count(h) && h->magic == kMoeMagic,
              "%s: %p is not a live MoE handle (made by mkcclMoeCreate, not yet destroyed)", caller, (const void*)h);
  }
  if (commLookup(h->comm, nullptr) != mkcclSuccess)
    return setError(mkcclInvalidUsage, "%s: the MoE handle's communicator was destroyed (destroy the handle first)",
                    caller);
  return mkcclSuccess;
}

mkcclResult_t handleDestroy(mkcclMoe* h) {
  const char* op = "mkcclMoeDestroy";
  MKCCL_CHECK(handleLookup(h, op));
  {
    std::lock_guard<std::mutex> lock(gMu);
    gLive.erase(h);
  }
  DeviceGuard guard(h->comm->cudaDev);
  // A communicator with an error may have kernels that gave up: nothing to wait for then.
  mkcclResult_t res = mkcclSuccess;
  if (commPollError(h->comm) == mkcclSuccess) res = commWaitLastWork(h->comm, op);
  freeHandle(h);
  return res;
}

}  // namespace moe
}  // namespace mkccl
