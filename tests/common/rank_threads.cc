#include "rank_threads.h"
#include <gtest/gtest.h>
#include <stdlib.h>
#include <algorithm>
#include <string>

namespace mkccl {
namespace test {

namespace {
// Where ranks of one process share a GPU, their copy streams must not queue behind each other's
// memory waits in the context's few hardware queues (runtime/copy_engines.h): 32 queues in every
// test program that uses these helpers, set before any CUDA call (a static initialiser of this
// file, which such a program links); a value the user set stands.
const int kHardwareQueues = setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
// Kernels loaded when the context starts, not at their first launch: a lazy load may wait for the
// context's running kernels, and where ranks share a context one of those can be a peer's
// persistent kernel waiting for the very launch the load holds up (seen on 1xH200: Python's fused
// MoE test hung at 2 and 3 ranks with lazy loading, passed with eager). A value the user set stands.
const int kEagerLoading = setenv("CUDA_MODULE_LOADING", "EAGER", 0);
}  // namespace

SharedGpus::SharedGpus(const std::vector<int>& devs) {
  cudaDeviceProp prop;
  EXPECT_EQ(cudaSuccess, cudaGetDeviceProperties(&prop, 0));
  int perGpu = 1;
  for (int d : devs) perGpu = std::max(perGpu, int(std::count(devs.begin(), devs.end(), d)));
  const std::string maxCtas = std::to_string((prop.multiProcessorCount / perGpu - 8) / 2 * 2);
  setenv("MKCCL_SHARE_GPUS", "1", 1);
  setenv("MKCCL_MAX_CTAS", maxCtas.c_str(), 1);
}

SharedGpus::~SharedGpus() {
  unsetenv("MKCCL_SHARE_GPUS");
  unsetenv("MKCCL_MAX_CTAS");
}

std::vector<std::vector<int>> sharedGpuWorlds() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  if (n >= 2) return {{0, 1, 0}, {0, 1, 0, 1}};
  return {{0, 0}, {0, 0, 0}, {0, 0, 0, 0}};
}

int gpusOf(const std::vector<int>& devs) {
  std::vector<int> d = devs;
  std::sort(d.begin(), d.end());
  return int(std::unique(d.begin(), d.end()) - d.begin());
}

InProcessRanks::InProcessRanks(const std::vector<int>& d) : devs(d), comms(d.size(), nullptr), streams(d.size(), nullptr) {
  const mkcclResult_t r = mkcclCommInitAll(comms.data(), size(), devs.data());
  EXPECT_EQ(mkcclSuccess, r) << mkcclGetLastError(nullptr);
  if (r != mkcclSuccess) return;
  for (int i = 0; i < size(); ++i) {
    cudaSetDevice(devs[i]);
    const cudaError_t e = cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking);
    EXPECT_EQ(cudaSuccess, e);
    if (e != cudaSuccess) return;
  }
  ok_ = true;
}

InProcessRanks::~InProcessRanks() {
  for (int i = 0; i < size(); ++i)
    if (streams[i]) {
      cudaSetDevice(devs[i]);
      cudaStreamDestroy(streams[i]);
    }
  for (mkcclComm_t c : comms)
    if (c) EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(c));
}

}  // namespace test
}  // namespace mkccl
