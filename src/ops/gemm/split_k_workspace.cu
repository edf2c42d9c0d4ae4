// Per-(device, stream) workspace of the split-K GEMM (split_k_workspace.h).
#include "ops/gemm/split_k_workspace.h"

#include <map>
#include <mutex>
#include <utility>
#include "base/check.h"
#include "base/log.h"
#include "ops/gemm/stream_key.h"

namespace mkccl {

namespace {
std::mutex gMu;
std::map<StreamKey, SplitKWorkspace> gSpaces;
constexpr size_t kUnitBytes = 128 * 128 * sizeof(float);
}  // namespace

mkcclResult_t splitKWorkspace(int dev, int smCount, cudaStream_t stream, SplitKWorkspace* out) {
  std::lock_guard<std::mutex> lock(gMu);
  const StreamKey key = streamKey(dev, stream);
  auto it = gSpaces.find(key);
  if (it != gSpaces.end()) {
    *out = it->second;
    return mkcclSuccess;
  }
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
  if (cap != cudaStreamCaptureStatusNone) {
    // Neither the allocation nor the zeroing may enter a graph: this call runs without split K.
    MKCCL_INFO("mkcclGemm: no split-K workspace for this stream yet and it is capturing: K is not split "
               "(one call on the stream before capture makes it)");
    *out = SplitKWorkspace{};
    return mkcclSuccess;
  }
  SplitKWorkspace w;
  w.maxUnits = splitKUnits(smCount);
  w.slotUnits = splitKSlotUnits(smCount);
  CUDA_CHECK(cudaMalloc(&w.partials, static_cast<size_t>(w.slotUnits) * kUnitBytes));
  CUDA_CHECK(cudaMalloc(&w.counters, static_cast<size_t>(w.maxUnits) * 2 * sizeof(int)));
  CUDA_CHECK(cudaMemsetAsync(w.counters, 0, static_cast<size_t>(w.maxUnits) * 2 * sizeof(int), stream));
  gSpaces[key] = w;
  *out = w;
  return mkcclSuccess;
}

}  // namespace mkccl
