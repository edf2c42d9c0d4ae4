// CUDA pieces of the proxy: staging through host memory, and the GPUDirect RDMA write flush.
#pragma once
#include <cuda_runtime.h>
#include <memory>
#include "runtime/proxy.h"

namespace mkccl {

// Copies between window (device memory of `dev`) and mirror (pinned host memory of the same size).
mkcclResult_t makeCudaStager(int dev, char* window, char* mirror, std::unique_ptr<Stager>* out);
// Makes NIC writes into `dev`'s memory visible to its kernels (before raising their flags).
mkcclResult_t flushGpuDirectWrites(int dev);

}  // namespace mkccl
