// The symmetric workspace: each rank allocates `bytes` of device memory with cuMemCreate (POSIX fd
// shareable), exports it, receives every local peer's handle over a Unix socket, and maps all of
// them side by side into one VA range: peer[q] = base + q * bytes. We chose VMM + fds over cudaIpc
// because it maps the same way inside one process (mkcclCommInitAll) and across processes, and the
// allocation can be marked RDMA-capable for the inter-node transport.
#include "runtime/symmem.h"
#include <unistd.h>
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/cudriver.h"
#include "transport/nvlink/fdpass.h"

namespace mkccl {


namespace {

CUmemAllocationProp allocProp(CUdevice dev, bool rdma) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
  return prop;
}

}  // namespace

mkcclResult_t symRegionCreate(mkcclComm* comm, size_t bytes, SymRegion* out) {
  MKCCL_CHECK(cuDriverLoad());
  SymRegion& ws = *out;
  const int n = comm->localRanks, me = comm->localRank;
  CUdevice dev;
  CU_CHECK(cu().deviceGet(&dev, comm->cudaDev));
  int rdma = 0;
  cu().deviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev);
  CUmemAllocationProp prop = allocProp(dev, rdma != 0);
  size_t gran = 0;
  CU_CHECK(cu().memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  ws.bytes = (bytes + gran - 1) / gran * gran;
  ws.rdmaCapable = rdma != 0;

  CUresult r = cu().memCreate(&ws.handles[me], ws.bytes, &prop, 0);
  if (r != CUDA_SUCCESS)
    return setError(mkcclUnhandledCudaError, "cuMemCreate of %zu MiB of symmetric memory (shareable by fd) failed: %s",
                    ws.bytes >> 20, cuErrorString(r));
  CU_CHECK(cu().memAddressReserve(&ws.base, ws.bytes * n, gran, 0, 0));

  int myFd = -1;
  CU_CHECK(cu().memExportToShareableHandle(&myFd, ws.handles[me], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  std::vector<int> fds;
  Bootstrap& bs = *comm->bootstrap;
  mkcclResult_t res =
      exchangeFds(bs.token(), [&bs] { return bs.barrier(); }, comm->localToRank, me, myFd, comm->cfg.timeoutMs, &fds);
  close(myFd);
  MKCCL_CHECK(res);
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    r = cu().memImportFromShareableHandle(&ws.handles[q], (void*)(uintptr_t)fds[q],
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fds[q]);
    fds[q] = -1;
    if (r != CUDA_SUCCESS) {
      for (int k = q + 1; k < n; ++k)
        if (k != me && fds[k] >= 0) close(fds[k]);
      return setError(mkcclUnhandledCudaError, "importing rank %d's symmetric memory failed: %s",
                      comm->localToRank[q], cuErrorString(r));
    }
  }
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int q = 0; q < n; ++q) {
    CUdeviceptr at = ws.base + (size_t)q * ws.bytes;
    CU_CHECK(cu().memMap(at, ws.bytes, 0, ws.handles[q], 0));
    ws.mapped[q] = true;
    r = cu().memSetAccess(at, ws.bytes, &access, 1);
    if (r != CUDA_SUCCESS)
      return setError(mkcclUnhandledCudaError,
                      "mapping rank %d's symmetric memory on device %d failed: %s (are the GPUs connected by "
                      "NVLink/P2P?)",
                      comm->localToRank[q], comm->cudaDev, cuErrorString(r));
    ws.peer[q] = (char*)(uintptr_t)at;
  }
  MKCCL_INFO("symmetric memory: %zu MiB per rank, %d local ranks mapped%s", ws.bytes >> 20, n,
             rdma ? ", RDMA-capable" : "");
  return mkcclSuccess;
}

void symRegionDestroy(mkcclComm* comm, SymRegion* region) {
  SymRegion& ws = *region;
  for (int q = 0; q < kMaxLocalRanks; ++q) {
    if (ws.mapped[q]) cu().memUnmap(ws.base + (size_t)q * ws.bytes, ws.bytes);
    if (ws.handles[q]) cu().memRelease(ws.handles[q]);
    ws.mapped[q] = false;
    ws.handles[q] = 0;
    ws.peer[q] = nullptr;
  }
  if (ws.base) cu().memAddressFree(ws.base, ws.bytes * comm->localRanks);
  ws.base = 0;
  ws.bytes = 0;
}

mkcclResult_t symWorkspaceCreate(mkcclComm* comm, size_t bytes, size_t flagsBytes) {
  ARG_CHECK(flagsBytes < bytes, "workspace of %zu bytes cannot hold %zu bytes of flags", bytes, flagsBytes);
  MKCCL_CHECK(symRegionCreate(comm, bytes, &comm->ws));
  comm->ws.flagsBytes = flagsBytes;
  // Zero once, all of it: flags are never reset afterwards (values grow with the call sequence),
  // and data written with its flag inline (the collectives' LL lines) must not match a new
  // communicator's sequence numbers from memory an earlier one used.
  CUDA_CHECK(cudaMemset(comm->ws.peer[comm->localRank], 0, comm->ws.bytes));
  CUDA_CHECK(cudaDeviceSynchronize());
  return mkcclSuccess;
}

void symWorkspaceDestroy(mkcclComm* comm) {
  symScratchDestroyAll(comm);
  symRegionDestroy(comm, &comm->ws);
}

mkcclResult_t symScratchGet(mkcclComm* comm, int slot, size_t bytes, const SymRegion** out) {
  if (slot < 0 || slot >= kSymScratchSlots) return setError(mkcclInternalError, "symScratchGet: bad slot %d", slot);
  SymRegion& reg = comm->scratch[slot];
  if (reg.bytes < bytes) {
    // Growing is a collective host step (allocation, fd exchange): it cannot be captured. A graph
    // captured earlier keeps the old region's addresses, so that region stays mapped (retired)
    // until the communicator is destroyed.
    if (comm->capturing)
      return setError(mkcclInvalidUsage,
                      "this call needs %zu MiB of symmetric scratch per rank (slot %d holds %zu MiB): growing it "
                      "cannot be captured into a CUDA graph; make one eager call of the largest shape before "
                      "capturing (docs/GRAPHS.md)",
                      (bytes + (1u << 20) - 1) >> 20, slot, reg.bytes >> 20);
    // Kernels of earlier calls may still use the old region: wait for them (bounded by the timeout).
    MKCCL_CHECK(commWaitLastWork(comm, "growing symmetric scratch memory"));
    if (comm->graphCaptured && reg.bytes > 0) {
      comm->retiredScratch.push_back(reg);
      reg = SymRegion{};
    }
    symRegionDestroy(comm, &reg);
    const size_t unit = 64ull << 20;  // grow in 64 MiB steps with 25% headroom
    const size_t want = ((bytes + bytes / 4) + unit - 1) / unit * unit;
    MKCCL_INFO("symmetric scratch slot %d: growing to %zu MiB per rank", slot, want >> 20);
    mkcclResult_t res = symRegionCreate(comm, want, &reg);
    if (res != mkcclSuccess) {
      symRegionDestroy(comm, &reg);
      return res;
    }
  }
  *out = &reg;
  return mkcclSuccess;
}

void symScratchDestroyAll(mkcclComm* comm) {
  for (int s = 0; s < kSymScratchSlots; ++s) symRegionDestroy(comm, &comm->scratch[s]);
  for (SymRegion& r : comm->retiredScratch) symRegionDestroy(comm, &r);
  comm->retiredScratch.clear();
}

}  // namespace mkccl
