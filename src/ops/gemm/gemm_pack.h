// Packing of A and W whose row pitch (K) is not a multiple of 128 bytes (pack_rows.cuh says why),
// into a per-(device, stream) workspace, and the rule that decides it.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "mkccl.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {

// The packed pitch of K elements of 2 bytes: a multiple of 64 elements (128 bytes).
inline int64_t gemmPackedPitch(int64_t K) { return (K + 63) / 64 * 64; }

// Workspace bound: above it the GEMM runs on the unpacked operands.
constexpr int64_t kGemmPackMaxBytes = 2ll << 30;

// The rule: pack when K * 2 is not a multiple of 128 bytes and the GEMM is compute-bound (M and N
// at least 256: the copy reads and writes A and W once, a few percent of a compute-bound GEMM's
// time; at decode M the GEMM is one pass over W, and a copy would triple its traffic), within the
// workspace bound. packTuning: the tuner's gemm.pack_k (0 auto, 1 off).
inline bool gemmShouldPack(int64_t M, int64_t N, int64_t K, bool simple, int packTuning) {
  if (packTuning == 1 || simple || K % 64 == 0) return false;
  if (M < 256 || N < 256) return false;
  return (M + N) * gemmPackedPitch(K) * 2 <= kGemmPackMaxBytes;
}

// Packs A [M, K] and W [N, K] (2-byte elements, pitch K) into the stream's workspace with pitch
// gemmPackedPitch(K), stream-ordered. *Ap / *Wp: the packed copies; both null when the workspace is
// too small and the stream is capturing (no allocation may enter a graph): use the originals.
mkcclResult_t gemmPackOperands(const void* A, const void* W, int64_t M, int64_t N, int64_t K, int dev,
                               cudaStream_t stream, const void** Ap, const void** Wp);

}  // namespace mkccl
