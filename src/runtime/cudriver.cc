// Driver entry points through cudart (no link-time dependency on libcuda).
#include "runtime/cudriver.h"
#include <cuda_runtime.h>
#include <mutex>
#include <string>
#include "base/check.h"

namespace mkccl {
namespace {
CuDriver table;
mkcclResult_t loadResult = mkcclInternalError;
std::string loadError;

template <typename T>
bool getEntry(const char* name, T* fn, int version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
    loadError = std::string("driver entry point ") + name + " not found (" + cudaGetErrorString(e) + ")";
    return false;
  }
  *fn = reinterpret_cast<T>(p);
  return true;
}
}  // namespace

mkcclResult_t cuDriverLoad() {
  static std::once_flag once;
  std::call_once(once, [] {
    int drv = 0;
    cudaError_t e = cudaDriverGetVersion(&drv);
    if (e != cudaSuccess || drv == 0) {
      loadError = "no CUDA driver is installed";
      loadResult = mkcclUnhandledCudaError;
      return;
    }
    bool ok = getEntry("cuGetErrorString", &table.getErrorString, 6000) &&
              getEntry("cuDeviceGet", &table.deviceGet, 2000) &&
              getEntry("cuDeviceGetAttribute", &table.deviceGetAttribute, 2000) &&
              getEntry("cuMemCreate", &table.memCreate, 10020) &&
              getEntry("cuMemRelease", &table.memRelease, 10020) &&
              getEntry("cuMemAddressReserve", &table.memAddressReserve, 10020) &&
              getEntry("cuMemAddressFree", &table.memAddressFree, 10020) &&
              getEntry("cuMemMap", &table.memMap, 10020) &&
              getEntry("cuMemUnmap", &table.memUnmap, 10020) &&
              getEntry("cuMemSetAccess", &table.memSetAccess, 10020) &&
              getEntry("cuMemGetAllocationGranularity", &table.memGetAllocationGranularity, 10020) &&
              getEntry("cuMemExportToShareableHandle", &table.memExportToShareableHandle, 10020) &&
              getEntry("cuMemImportFromShareableHandle", &table.memImportFromShareableHandle, 10020) &&
              getEntry("cuTensorMapEncodeTiled", &table.tensorMapEncodeTiled, 12000) &&
              getEntry("cuMemGetAddressRange", &table.memGetAddressRange, 3020);
    // dma-buf export is optional (older drivers): only the RDMA registration path needs it.
    if (ok) getEntry("cuMemGetHandleForAddressRange", &table.memGetHandleForAddressRange, 11070);
    // Stream memory operations are optional too (AllGather+GEMM's copy-engine plan).
    if (ok && !getEntry("cuStreamWaitValue64", &table.streamWaitValue64, 11070)) table.streamWaitValue64 = nullptr;
    if (ok && !getEntry("cuStreamBatchMemOp", &table.streamBatchMemOp, 11070)) table.streamBatchMemOp = nullptr;
    loadResult = ok ? mkcclSuccess : mkcclUnhandledCudaError;
  });
  if (loadResult != mkcclSuccess) return setError(loadResult, "CUDA driver: %s", loadError.c_str());
  return mkcclSuccess;
}

const CuDriver& cu() { return table; }

const char* cuErrorString(CUresult r) {
  const char* s = nullptr;
  if (table.getErrorString && table.getErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return "unknown driver error";
}

}  // namespace mkccl
