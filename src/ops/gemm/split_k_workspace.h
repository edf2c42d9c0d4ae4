// The split-K GEMM's workspace (split_k.cuh): fp32 partial tiles and per-tile counters, one per
// (device, stream) so that GEMMs on different streams never share slots (cudaStreamPerThread: one
// per calling thread; a graph replayed on another stream than it was captured on must not run
// beside calls on the capture stream). Made on the stream's
// first split-K call outside a CUDA-graph capture (cudaMalloc, and a stream-ordered memset of the
// counters); after that a call, captured or not, only reads the pointers: the kernel leaves the
// counters zeroed. Kept until the process exits (a captured graph may still use it).
#pragma once
#include <cuda_runtime.h>
#include "mkccl.h"

namespace mkccl {

struct SplitKWorkspace {
  float* partials = nullptr;  // slotUnits fp32 tiles of 128 x 128
  int* counters = nullptr;    // 2 per unit of maxUnits
  int maxUnits = 0;           // (tile, part) units split K may use; 0: none (capturing at first use)
  int slotUnits = 0;          // 128 x 128 fp32 tiles allocated (stream-K: two 128 x 256 per CTA)
};

// Units split K may use on a GPU with smCount SMs (two waves: the model never splits more), and
// the 128 x 128 fp32 tiles allocated (stream-K's two partials of 128 x 256 per CTA).
inline int splitKUnits(int smCount) { return 2 * smCount; }
inline int splitKSlotUnits(int smCount) { return 4 * smCount; }

// The workspace of (dev, stream); maxUnits 0 if it does not exist yet and the stream is capturing.
mkcclResult_t splitKWorkspace(int dev, int smCount, cudaStream_t stream, SplitKWorkspace* out);

}  // namespace mkccl
