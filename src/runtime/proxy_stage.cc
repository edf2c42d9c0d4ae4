// Staging copies between a GPU window and its host mirror on two CUDA streams (one per direction),
// for transports that cannot read or write GPU memory (libfabric tcp).
#include "runtime/proxy_stage.h"
#include <deque>
#include "base/check.h"
#include "base/log.h"

namespace mkccl {
namespace {

class CudaStager final : public Stager {
 public:
  CudaStager(int dev, char* window, char* mirror) : dev_(dev), window_(window), mirror_(mirror) {}
  ~CudaStager() override {
    cudaSetDevice(dev_);
    for (int d = 0; d < 2; ++d) {
      if (streams_[d]) cudaStreamSynchronize(streams_[d]);
      for (cudaEvent_t e : pending_[d]) cudaEventDestroy(e);
      if (streams_[d]) cudaStreamDestroy(streams_[d]);
    }
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }

  mkcclResult_t init() {
    CUDA_CHECK(cudaSetDevice(dev_));
    for (int d = 0; d < 2; ++d) CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[d], cudaStreamNonBlocking));
    return mkcclSuccess;
  }

  mkcclResult_t copy(bool toHost, uint64_t off, uint64_t bytes, uint64_t* ticket) override {
    const int d = toHost ? 1 : 0;
    CUDA_CHECK(cudaSetDevice(dev_));  // the proxy thread's first call makes the device current
    cudaEvent_t e;
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
    } else {
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    if (toHost)
      CUDA_CHECK(cudaMemcpyAsync(mirror_ + off, window_ + off, bytes, cudaMemcpyDeviceToHost, streams_[d]));
    else
      CUDA_CHECK(cudaMemcpyAsync(window_ + off, mirror_ + off, bytes, cudaMemcpyHostToDevice, streams_[d]));
    CUDA_CHECK(cudaEventRecord(e, streams_[d]));
    pending_[d].push_back(e);
    *ticket = issued_[d]++;
    return mkcclSuccess;
  }

  mkcclResult_t completed(bool toHost, uint64_t* count) override {
    const int d = toHost ? 1 : 0;
    while (!pending_[d].empty()) {
      cudaError_t r = cudaEventQuery(pending_[d].front());
      if (r == cudaErrorNotReady) break;
      if (r != cudaSuccess)
        return setError(mkcclUnhandledCudaError, "staging copy %s failed: %s", toHost ? "GPU->host" : "host->GPU",
                        cudaGetErrorString(r));
      free_.push_back(pending_[d].front());
      pending_[d].pop_front();
      ++done_[d];
    }
    *count = done_[d];
    return mkcclSuccess;
  }

 private:
  int dev_;
  char* window_;
  char* mirror_;
  cudaStream_t streams_[2] = {nullptr, nullptr};
  std::deque<cudaEvent_t> pending_[2];
  std::vector<cudaEvent_t> free_;
  uint64_t issued_[2] = {0, 0}, done_[2] = {0, 0};
};

}  // namespace

mkcclResult_t makeCudaStager(int dev, char* window, char* mirror, std::unique_ptr<Stager>* out) {
  auto* s = new CudaStager(dev, window, mirror);
  out->reset(s);
  return s->init();
}

mkcclResult_t flushGpuDirectWrites(int dev) {
  CUDA_CHECK(cudaSetDevice(dev));
  CUDA_CHECK(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                                cudaFlushGPUDirectRDMAWritesToOwner));
  return mkcclSuccess;
}

}  // namespace mkccl
