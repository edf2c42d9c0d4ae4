// CUDA driver entry points, fetched at run time through cudart so that libmkccl loads (and its
// CPU-only paths work) on machines without a driver.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include "mkccl.h"

namespace mkccl {

struct CuDriver {
  PFN_cuGetErrorString_v6000 getErrorString;
  PFN_cuDeviceGet_v2000 deviceGet;
  PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute;
  PFN_cuMemCreate_v10020 memCreate;
  PFN_cuMemRelease_v10020 memRelease;
  PFN_cuMemAddressReserve_v10020 memAddressReserve;
  PFN_cuMemAddressFree_v10020 memAddressFree;
  PFN_cuMemMap_v10020 memMap;
  PFN_cuMemUnmap_v10020 memUnmap;
  PFN_cuMemSetAccess_v10020 memSetAccess;
  PFN_cuMemGetAllocationGranularity_v10020 memGetAllocationGranularity;
  PFN_cuMemExportToShareableHandle_v10020 memExportToShareableHandle;
  PFN_cuMemImportFromShareableHandle_v10020 memImportFromShareableHandle;
  PFN_cuTensorMapEncodeTiled_v12000 tensorMapEncodeTiled;
  PFN_cuMemGetHandleForAddressRange_v11070 memGetHandleForAddressRange;  // dma-buf export (may be null)
  PFN_cuMemGetAddressRange_v3020 memGetAddressRange;
  // Stream memory operations (may be null: the plans that use copy engines then do not run).
  PFN_cuStreamWaitValue64_v11070 streamWaitValue64;
  PFN_cuStreamBatchMemOp_v11070 streamBatchMemOp;
};

// Loads the entry points once (thread-safe). mkcclUnhandledCudaError if no driver is present.
mkcclResult_t cuDriverLoad();
// The loaded table; only valid after cuDriverLoad() returned success.
const CuDriver& cu();
const char* cuErrorString(CUresult r);

}  // namespace mkccl
