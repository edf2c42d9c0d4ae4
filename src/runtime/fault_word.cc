#include "runtime/fault_word.h"
#include <cuda_runtime.h>
#include <string.h>
#include "base/check.h"

namespace mkccl {

namespace {
// The word is made on an engine's first call, which may be inside a CUDA-graph capture (global
// mode forbids allocations in any thread then): this thread allocates in relaxed mode, and the
// graph records nothing of it (no stream work).
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};
}  // namespace

mkcclResult_t FaultWord::device(int** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (host_ == nullptr) {
    RelaxedCapture relaxed;
    void* h = nullptr;
    CUDA_CHECK(cudaHostAlloc(&h, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(h, 0, 64);
    void* d = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
    host_ = static_cast<int*>(h);
    dev_ = static_cast<int*>(d);
  }
  *out = dev_;
  return mkcclSuccess;
}

int FaultWord::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (host_ == nullptr) return 0;
  volatile int* w = host_;
  const int code = *w;
  if (code != 0) *w = 0;
  return code;
}

}  // namespace mkccl
