// The key of a per-stream workspace: (device, stream), and the calling thread when the stream is
// cudaStreamPerThread (one handle, a different stream in every thread).
#pragma once
#include <cuda_runtime.h>
#include <thread>
#include <tuple>

namespace mkccl {

using StreamKey = std::tuple<int, cudaStream_t, std::thread::id>;

inline StreamKey streamKey(int dev, cudaStream_t stream) {
  return StreamKey(dev, stream, stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id());
}

}  // namespace mkccl
