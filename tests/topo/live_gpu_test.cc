// On a GPU machine: live discovery must find every CUDA device by its bus id. It prints what it
// found (NICs or none) for the record; it does not require a NIC.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include "base/log.h"
#include "topo/discover.h"
#include "topo/pci_id.h"
#include "topo/report.h"
#include "topo/resolve.h"

namespace mkccl {
namespace {

TEST(TopoLive, FindsEveryCudaGpu) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "needs 1 GPU(s), found 0: GPU test skipped";
  if (!topoHaveHwloc()) GTEST_SKIP() << "built without hwloc: no live topology to check";
  TopoMachine m;
  ASSERT_EQ(mkcclSuccess, topoDiscover(nullptr, &m)) << lastError();
  printf("%s: %zu GPU(s), %zu RDMA NIC(s), %zu NUMA node(s)\n", m.source.c_str(), m.gpus.size(), m.nics.size(),
         m.numas.size());
  for (int d = 0; d < n; d++) {
    char raw[32] = {0};
    ASSERT_EQ(cudaSuccess, cudaDeviceGetPCIBusId(raw, sizeof(raw), d));
    std::string pci;
    ASSERT_TRUE(pciNormalize(raw, &pci)) << raw;
    bool found = false;
    for (const TopoGpuDesc& g : m.gpus) found |= g.pci == pci;
    EXPECT_TRUE(found) << "CUDA device " << d << " (" << raw << ") is not among the GPUs hwloc shows";
    TopoResolved r;
    ASSERT_EQ(mkcclSuccess, topoResolve(raw, nullptr, nullptr, &r)) << lastError();
    EXPECT_TRUE(r.gpuFound);
    EXPECT_EQ(pci, r.mapping.gpuPci);
    printf("cuda %d: %s\n", d, topoMappingLine(r.mapping).c_str());
  }
}

}  // namespace
}  // namespace mkccl
