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

// Outputs smaller than this (elements) are not packed by the rule: measured on an H100, packing
// made 1000 x 1032 x 4104 slower (53 against 48 us: the copy costs more than the misaligned loads
// there) and 2000 x 2056 x 4104 and larger faster (116 against 122 us; 288 against 378 us at
// 4097 x 4104 x 4104; 832 against 1304 us at 8000 x 8184 x 4104).
constexpr int64_t kGemmPackMinOutput = 2ll << 20;

// The rule: pack when K * 2 is not a multiple of 128 bytes and the GEMM is large and compute-bound
// (M and N at least 256 and M * N at least kGemmPackMinOutput: the copy reads and writes A and W
// once, ~15% of such a GEMM's time; at decode M the GEMM is one pass over W, and a copy would
// triple its traffic), within the workspace bound. packTuning: the tuner's gemm.pack_k (0 auto,
// 1 off, 2 on: whenever K is off 64, for tests).
inline bool gemmShouldPack(int64_t M, int64_t N, int64_t K, bool simple, int packTuning) {
  if (packTuning == 1 || simple || K % 64 == 0) return false;
  if (packTuning != 2 && (M < 256 || N < 256 || M * N < kGemmPackMinOutput)) return false;
  return (M + N) * gemmPackedPitch(K) * 2 <= kGemmPackMaxBytes;
}

// Packs A [M, K] and W [N, K] (2-byte elements, pitch K) into the stream's workspace with pitch
// gemmPackedPitch(K), stream-ordered. *Ap / *Wp: the packed copies; both null when the workspace is
// too small and the stream is capturing (no allocation may enter a graph): use the originals.
mkcclResult_t gemmPackOperands(const void* A, const void* W, int64_t M, int64_t N, int64_t K, int dev,
                               cudaStream_t stream, const void** Ap, const void** Wp);

}  // namespace mkccl
