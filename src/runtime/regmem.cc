// mkcclMemAlloc / mkcclMemFree and mkcclCommRegister / mkcclCommDeregister.
//
// mkcclMemAlloc makes device memory the way the symmetric workspace is made (cuMemCreate with a
// POSIX fd shareable handle, mapped into a VA range of its own), and remembers it in a process-wide
// table: that is what lets mkcclCommRegister export the allocation to the local peers. Registering
// is collective: every rank checks its buffer, the ranks agree (one allgather of verdicts and
// offsets), exchange the allocations' fds over the same Unix-socket path as the workspace, and map
// each peer's whole allocation; the peer's buffer is then at its offset inside that mapping. Ops
// find a registration by pointer range at enqueue (regFind), before anything is launched.
#include "runtime/regmem.h"
#include <unistd.h>
#include <map>
#include <mutex>
#include <vector>
#include <cuda_runtime.h>
#include "base/check.h"
#include "base/log.h"
#include "runtime/comm.h"
#include "runtime/enqueue.h"
#include "runtime/cudriver.h"
#include "transport/nvlink/fdpass.h"

using namespace mkccl;

namespace mkccl {
namespace {

struct MemAlloc {
  size_t bytes = 0;  // rounded to the granularity
  CUmemGenericAllocationHandle handle = 0;
  int dev = -1;
  int registered = 0;  // registrations (over all communicators) inside it
};

std::mutex g_mu;
std::map<uintptr_t, MemAlloc> g_allocs;  // by base address

// The allocation of mkcclMemAlloc that holds p, or g_allocs.end(). Caller holds g_mu.
std::map<uintptr_t, MemAlloc>::iterator allocOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocs.upper_bound(a);
  if (it == g_allocs.begin()) return g_allocs.end();
  --it;
  return a < it->first + it->second.bytes ? it : g_allocs.end();
}

CUmemAllocationProp propOf(CUdevice dev) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

void unmapRegistration(mkcclComm* comm, Registration& g) {
  for (int q = 0; q < kMaxLocalRanks; ++q) {
    if (q == comm->localRank) continue;
    if (g.map[q]) {
      cu().memUnmap(g.map[q], g.mapBytes[q]);
      cu().memAddressFree(g.map[q], g.mapBytes[q]);
    }
    if (g.handle[q]) cu().memRelease(g.handle[q]);
    g.map[q] = 0;
    g.handle[q] = 0;
  }
}

void graphUseDone(void* p) {
  auto* uses = static_cast<std::shared_ptr<std::atomic<int>>*>(p);
  (*uses)->fetch_sub(1);
  delete uses;
}

// CUDA runs a destroyed graph's user-object destructors on a thread of its own, a little later:
// a graph the caller has just destroyed is given up to a second to drop its use.
bool graphUsesDrained(const Registration& g) {
  for (int i = 0; i < 1000 && g.graphUses->load() > 0; ++i) usleep(1000);
  return g.graphUses->load() == 0;
}

// What each rank tells the others before any fd moves: a refusal on one rank is every rank's.
struct RegInfo {
  int32_t ok;
  int32_t pad;
  uint64_t offset;      // of the buffer in its allocation
  uint64_t bytes;       // of the buffer
  uint64_t allocBytes;  // of the allocation
};

}  // namespace

Registration* regFind(mkcclComm* comm, const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (auto& g : comm->regs)
    if (c >= g->base && c + bytes <= g->base + g->bytes) return g.get();
  return nullptr;
}

mkcclResult_t regNoteUse(Registration* reg, cudaStream_t stream, bool capturing) {
  if (!capturing) return mkcclSuccess;
  cudaStreamCaptureStatus st;
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &st, nullptr, &graph));
  if (st != cudaStreamCaptureStatusActive || graph == nullptr) return mkcclSuccess;
  auto* payload = new std::shared_ptr<std::atomic<int>>(reg->graphUses);
  cudaUserObject_t obj;
  cudaError_t e = cudaUserObjectCreate(&obj, payload, graphUseDone, 1, cudaUserObjectNoDestructorSync);
  if (e != cudaSuccess) {
    delete payload;
    return setError(mkcclUnhandledCudaError, "cudaUserObjectCreate: %s", cudaGetErrorString(e));
  }
  reg->graphUses->fetch_add(1);
  CUDA_CHECK(cudaGraphRetainUserObject(graph, obj, 1, cudaGraphUserObjectMove));
  return mkcclSuccess;
}

void regDestroyAll(mkcclComm* comm) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& g : comm->regs) {
    unmapRegistration(comm, *g);
    auto it = allocOf(g->base);
    if (it != g_allocs.end()) it->second.registered--;
  }
  comm->regs.clear();
}

}  // namespace mkccl

mkcclResult_t mkcclMemAlloc(void** ptr, size_t size) {
  ARG_CHECK(ptr != nullptr, "mkcclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  ARG_CHECK(size > 0, "mkcclMemAlloc: size is 0");
  MKCCL_CHECK(cuDriverLoad());
  int devIdx = 0;
  CUDA_CHECK(cudaGetDevice(&devIdx));
  CUdevice dev;
  CU_CHECK(cu().deviceGet(&dev, devIdx));
  CUmemAllocationProp prop = propOf(dev);
  size_t gran = 0;
  CU_CHECK(cu().memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  const size_t bytes = (size + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h = 0;
  CUresult r = cu().memCreate(&h, bytes, &prop, 0);
  if (r != CUDA_SUCCESS)
    return setError(mkcclUnhandledCudaError, "mkcclMemAlloc: cuMemCreate of %zu bytes failed: %s", bytes,
                    cuErrorString(r));
  CUdeviceptr va = 0;
  r = cu().memAddressReserve(&va, bytes, gran, 0, 0);
  if (r == CUDA_SUCCESS) r = cu().memMap(va, bytes, 0, h, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = cu().memSetAccess(va, bytes, &access, 1);
  }
  if (r != CUDA_SUCCESS) {
    if (va) {
      cu().memUnmap(va, bytes);
      cu().memAddressFree(va, bytes);
    }
    cu().memRelease(h);
    return setError(mkcclUnhandledCudaError, "mkcclMemAlloc: mapping %zu bytes failed: %s", bytes, cuErrorString(r));
  }
  std::lock_guard<std::mutex> lock(g_mu);
  MemAlloc m;
  m.bytes = bytes;
  m.handle = h;
  m.dev = devIdx;
  g_allocs[static_cast<uintptr_t>(va)] = m;
  *ptr = reinterpret_cast<void*>(va);
  return mkcclSuccess;
}

mkcclResult_t mkcclMemFree(void* ptr) {
  if (ptr == nullptr) return mkcclSuccess;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.find(reinterpret_cast<uintptr_t>(ptr));
  ARG_CHECK(it != g_allocs.end(), "mkcclMemFree: %p was not returned by mkcclMemAlloc", ptr);
  if (it->second.registered > 0)
    return setError(mkcclInvalidUsage, "mkcclMemFree: %p is still registered with a communicator (%d registrations): "
                    "mkcclCommDeregister first", ptr, it->second.registered);
  // No device-wide synchronisation here: with ranks of one process on one GPU it would wait for a
  // peer's kernel that waits for this thread. As with cuMemUnmap, work that still uses the memory
  // must have finished (the header says so).
  cu().memUnmap(it->first, it->second.bytes);
  cu().memAddressFree(it->first, it->second.bytes);
  cu().memRelease(it->second.handle);
  g_allocs.erase(it);
  return mkcclSuccess;
}

mkcclResult_t mkcclCommRegister(const mkcclComm_t comm, void* buff, size_t size, void** handle) {
  const char* op = "mkcclCommRegister";
  MKCCL_CHECK(commCheckUsable(comm, op));
  ARG_CHECK(handle != nullptr, "%s: handle is NULL", op);
  *handle = nullptr;
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(cuDriverLoad());
  // Local checks first; the verdict is shared, so that every rank returns rather than one waiting.
  RegInfo mine = {};
  mkcclResult_t local = mkcclSuccess;
  std::string why;
  char msg[320];
  CUmemGenericAllocationHandle allocHandle = 0;
  uintptr_t allocBase = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = allocOf(buff);
    if (buff == nullptr || size == 0) {
      local = mkcclInvalidArgument;
      snprintf(msg, sizeof(msg), "%s: buffer %p of %zu bytes: a non-empty buffer is needed", op, buff, size);
    } else if (it == g_allocs.end()) {
      local = mkcclInvalidArgument;
      snprintf(msg, sizeof(msg), "%s: %p is not memory from mkcclMemAlloc (only that can be mapped by the peers)",
               op, buff);
    } else if (it->second.dev != comm->cudaDev) {
      local = mkcclInvalidArgument;
      snprintf(msg, sizeof(msg), "%s: %p is memory of device %d; the communicator uses device %d", op, buff,
               it->second.dev, comm->cudaDev);
    } else if (reinterpret_cast<uintptr_t>(buff) + size > it->first + it->second.bytes) {
      local = mkcclInvalidArgument;
      snprintf(msg, sizeof(msg), "%s: %zu bytes from %p run past the end of its mkcclMemAlloc allocation", op, size,
               buff);
    } else {
      const char* b = static_cast<const char*>(buff);
      for (auto& g : comm->regs)
        if (b < g->base + g->bytes && g->base < b + size) {
          local = mkcclInvalidUsage;
          snprintf(msg, sizeof(msg), "%s: [%p, +%zu) overlaps a registration of this communicator ([%p, +%zu)): "
                   "a buffer is registered once", op, buff, size, (void*)g->base, g->bytes);
          break;
        }
      if (local == mkcclSuccess) {
        allocHandle = it->second.handle;
        allocBase = it->first;
        mine.offset = reinterpret_cast<uintptr_t>(buff) - it->first;
        mine.allocBytes = it->second.bytes;
      }
    }
  }
  mine.ok = local == mkcclSuccess ? 1 : 0;
  mine.bytes = size;
  std::vector<RegInfo> all(comm->nranks);
  all[comm->rank] = mine;
  MKCCL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(RegInfo)));
  if (local != mkcclSuccess) return setError(local, "%s", msg);
  for (int r = 0; r < comm->nranks; ++r) {
    if (!all[r].ok)
      return setError(mkcclInvalidUsage, "%s: rank %d refused its buffer (see its error); nothing was registered", op,
                      r);
    if (all[r].bytes != size)
      return setError(mkcclInvalidUsage, "%s: rank %d registers %llu bytes, this rank %zu: every rank registers the "
                      "same size", op, r, (unsigned long long)all[r].bytes, size);
  }
  (void)allocBase;
  // Every rank is in: exchange the allocations' fds and map the peers'.
  std::unique_ptr<Registration> g(new Registration);
  g->base = static_cast<char*>(buff);
  g->bytes = size;
  const int n = comm->localRanks, me = comm->localRank;
  int myFd = -1;
  CU_CHECK(cu().memExportToShareableHandle(&myFd, allocHandle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  std::vector<int> fds;
  Bootstrap& bs = *comm->bootstrap;
  mkcclResult_t res =
      exchangeFds(bs.token(), [&bs] { return bs.barrier(); }, comm->localToRank, me, myFd, comm->cfg.timeoutMs, &fds);
  close(myFd);
  MKCCL_CHECK(res);
  CUdevice dev;
  CU_CHECK(cu().deviceGet(&dev, comm->cudaDev));
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUmemAllocationProp prop = propOf(dev);
  size_t gran = 0;
  CU_CHECK(cu().memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  mkcclResult_t bad = mkcclSuccess;
  for (int q = 0; q < n; ++q) {
    if (q == me) {
      g->peer[q] = g->base;
      continue;
    }
    const RegInfo& pi = all[comm->localToRank[q]];
    CUresult r = bad == mkcclSuccess ? cu().memImportFromShareableHandle(&g->handle[q], (void*)(uintptr_t)fds[q],
                                                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                                     : CUDA_SUCCESS;
    close(fds[q]);
    if (bad != mkcclSuccess) continue;
    if (r == CUDA_SUCCESS) r = cu().memAddressReserve(&g->map[q], pi.allocBytes, gran, 0, 0);
    if (r == CUDA_SUCCESS) {
      g->mapBytes[q] = pi.allocBytes;
      r = cu().memMap(g->map[q], pi.allocBytes, 0, g->handle[q], 0);
      if (r != CUDA_SUCCESS) {
        cu().memAddressFree(g->map[q], pi.allocBytes);
        g->map[q] = 0;
      }
    }
    if (r == CUDA_SUCCESS) r = cu().memSetAccess(g->map[q], pi.allocBytes, &access, 1);
    if (r != CUDA_SUCCESS) {
      bad = setError(mkcclUnhandledCudaError, "%s: mapping rank %d's buffer failed: %s", op, comm->localToRank[q],
                     cuErrorString(r));
      continue;
    }
    g->peer[q] = reinterpret_cast<char*>(g->map[q]) + pi.offset;
  }
  if (bad != mkcclSuccess) {
    unmapRegistration(comm, *g);
    return bad;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = allocOf(buff);
    if (it != g_allocs.end()) it->second.registered++;
  }
  *handle = g.get();
  MKCCL_INFO("%s: %zu bytes at %p, %d local ranks mapped", op, size, buff, n);
  comm->regs.push_back(std::move(g));
  return mkcclSuccess;
}

mkcclResult_t mkcclCommDeregister(const mkcclComm_t comm, void* handle) {
  const char* op = "mkcclCommDeregister";
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  size_t idx = comm->regs.size();
  for (size_t i = 0; i < comm->regs.size(); ++i)
    if (comm->regs[i].get() == handle) idx = i;
  int32_t ok = 1;
  char msg[256];
  mkcclResult_t local = mkcclSuccess;
  if (idx == comm->regs.size()) {
    local = mkcclInvalidArgument;
    snprintf(msg, sizeof(msg), "%s: %p is not a registration of this communicator (already deregistered?)", op, handle);
  } else if (!graphUsesDrained(*comm->regs[idx])) {
    local = mkcclInvalidUsage;
    snprintf(msg, sizeof(msg), "%s: the registration is used by %d captured CUDA graph(s) that still exist: destroy "
             "them first", op, comm->regs[idx]->graphUses->load());
  }
  if (local == mkcclSuccess) local = commWaitLastWork(comm, op);  // our kernels may still write into peers' buffers
  if (local != mkcclSuccess && local != mkcclInvalidArgument && local != mkcclInvalidUsage) {
    snprintf(msg, sizeof(msg), "%s", lastError());
  }
  ok = local == mkcclSuccess ? 1 : 0;
  std::vector<int32_t> all(comm->nranks);
  all[comm->rank] = ok;
  MKCCL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(int32_t)));
  if (local != mkcclSuccess) return setError(local, "%s", msg);
  for (int r = 0; r < comm->nranks; ++r)
    if (!all[r])
      return setError(mkcclInvalidUsage, "%s: rank %d refused (see its error); the registration stays", op, r);
  // Every rank's own kernels are done with the peers' buffers (each waited before the allgather).
  std::lock_guard<std::mutex> lock(g_mu);
  unmapRegistration(comm, *comm->regs[idx]);
  auto it = allocOf(comm->regs[idx]->base);
  if (it != g_allocs.end()) it->second.registered--;
  comm->regs.erase(comm->regs.begin() + long(idx));
  return mkcclSuccess;
}
