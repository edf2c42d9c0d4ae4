// gemmPackOperands (gemm_pack.h): the per-(device, stream) workspace and the packing launch.
#include "ops/gemm/gemm_pack.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>
#include "base/check.h"
#include "base/log.h"
#include "kernels/gemm/pack_rows.cuh"
#include "ops/gemm/stream_key.h"

namespace mkccl {

namespace {
struct PackSpace {
  void* p = nullptr;
  size_t bytes = 0;
};
std::mutex gMu;
std::map<StreamKey, PackSpace> gSpaces;
// Outgrown workspaces are kept, never freed: a captured graph may still use one.
std::vector<void*> gRetired;
}  // namespace

mkcclResult_t gemmPackOperands(const void* A, const void* W, int64_t M, int64_t N, int64_t K, int dev,
                               cudaStream_t stream, const void** Ap, const void** Wp) {
  *Ap = *Wp = nullptr;
  const int64_t pitch = gemmPackedPitch(K);
  const size_t aBytes = static_cast<size_t>(M * pitch * 2), need = aBytes + static_cast<size_t>(N * pitch * 2);
  void* base = nullptr;
  {
    std::lock_guard<std::mutex> lock(gMu);
    PackSpace& s = gSpaces[streamKey(dev, stream)];
    if (s.bytes < need) {
      cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
      CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
      if (cap != cudaStreamCaptureStatusNone) {
        MKCCL_INFO("mkcclGemm: K = %lld is not a multiple of 64 and the stream is capturing without a large enough "
                   "packing workspace: the operands are not packed (slower; one call of this shape on the stream "
                   "before capture makes it)",
                   static_cast<long long>(K));
        return mkcclSuccess;
      }
      const size_t bytes = std::max(need, s.bytes * 2);
      void* p = nullptr;
      CUDA_CHECK(cudaMalloc(&p, bytes));
      if (s.p != nullptr) gRetired.push_back(s.p);
      s.p = p;
      s.bytes = bytes;
    }
    base = s.p;
  }
  PackRowsArgs a;
  a.src[0] = static_cast<const uint4*>(A);
  a.src[1] = static_cast<const uint4*>(W);
  a.dst[0] = static_cast<uint4*>(base);
  a.dst[1] = reinterpret_cast<uint4*>(static_cast<char*>(base) + aBytes);
  a.rows[0] = M;
  a.rows[1] = N;
  a.srcChunks = K * 2 / 16;
  a.dstChunks = pitch * 2 / 16;
  // One warp per row; at most 8 blocks of 8 warps per SM's worth of blocks (the loop is grid-stride).
  int sms = 132;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  constexpr int kWarps = kPackRowsThreads / 32;
  const int blocks = static_cast<int>(std::min<int64_t>((M + N + kWarps - 1) / kWarps, int64_t(sms) * 8));
  packRowsKernel<<<blocks, kPackRowsThreads, 0, stream>>>(a);
  CUDA_CHECK(cudaGetLastError());
  *Ap = a.dst[0];
  *Wp = a.dst[1];
  return mkcclSuccess;
}

}  // namespace mkccl
