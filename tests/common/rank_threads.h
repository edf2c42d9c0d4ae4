// Several ranks driven from one process: a host barrier for their threads, and communicators over
// a list of devices -- a device may appear twice (ranks sharing a GPU, MKCCL_SHARE_GPUS) so that
// world sizes beyond the GPUs at hand can be checked for correctness.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
#include "mkccl.h"

namespace mkccl {
namespace test {

// Host barrier of the rank threads of one process.
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0;
  uint64_t gen_ = 0;
};

// (Programs that link this raise CUDA_DEVICE_MAX_CONNECTIONS to 32 before any CUDA call:
// rank_threads.cc says why.)
// While it lives: MKCCL_SHARE_GPUS=1 and MKCCL_MAX_CTAS a little below device 0's SMs over the
// most ranks any GPU of `devs` holds (whole clusters of 2), so that those ranks' persistent kernels
// fit on one GPU together (with exactly half for two, a kernel of clusters found only part of its
// CTAs resident beside the other's and waited for it). Unsets both at the end. Set before the
// communicators are made (config is read at init).
class SharedGpus {
 public:
  explicit SharedGpus(const std::vector<int>& devs = {0, 0});
  ~SharedGpus();
};

// The device lists of the ranks-sharing-GPUs tests on this machine: 2, 3 and 4 ranks on one GPU,
// or 3 and 4 ranks on two GPUs where there are two.
std::vector<std::vector<int>> sharedGpuWorlds();
// How many distinct GPUs a device list uses.
int gpusOf(const std::vector<int>& devs);

// One communicator over `devs` in this process (mkcclCommInitAll; rank r on devs[r]) and a
// non-blocking stream per rank. ok() is false (the failure EXPECTed) if init failed.
class InProcessRanks {
 public:
  explicit InProcessRanks(const std::vector<int>& devs);
  ~InProcessRanks();  // the streams, then the communicators (EXPECTs success)
  bool ok() const { return ok_; }
  int size() const { return int(devs.size()); }
  // fn(r) on a thread per rank, its device current; returns once all are done.
  template <class Fn>
  void onEveryRank(Fn fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r)
      threads.emplace_back([&, r] {
        cudaSetDevice(devs[r]);
        fn(r);
      });
    for (auto& t : threads) t.join();
  }

  std::vector<int> devs;
  std::vector<mkcclComm_t> comms;
  std::vector<cudaStream_t> streams;

 private:
  bool ok_ = false;
};

}  // namespace test
}  // namespace mkccl
