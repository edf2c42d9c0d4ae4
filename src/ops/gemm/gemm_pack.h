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

// The rule: pack only on request (the tuner's gemm.pack_k: 0 auto, 1 off, 2 on: whenever K * 2 is
// not a multiple of 128 bytes), within the workspace bound. Auto does not pack: packing paid off
// (e.g. 8000 x 8184 x 4104 on an H100, 832 against 1304 us) while the tensor maps of such rows
// asked the L2 for 256-byte promotion, which fetched up to twice the bytes; with 128-byte
// promotion and the tile efficiencies of misaligned rows (gemm_plan_model.h) the unpacked GEMM
// was as fast or faster at every odd shape measured on one H200 (8000 x 8184 x 4104 776 against
// 846 us packed, 2000 x 2056 x 4104 89.6 against 93.1; perf/results/20261127-s7-1xH100-H200/),
// and it needs neither the copy's HBM traffic nor its workspace.
inline bool gemmShouldPack(int64_t M, int64_t N, int64_t K, bool simple, int packTuning) {
  if (packTuning != 2 || simple || K % 64 == 0) return false;
  return (M + N) * gemmPackedPitch(K) * 2 <= kGemmPackMaxBytes;
}

// Packs A [M, K] and W [N, K] (2-byte elements, pitch K) into the stream's workspace with pitch
// gemmPackedPitch(K), stream-ordered. *Ap / *Wp: the packed copies; both null when the workspace is
// too small and the stream is capturing (no allocation may enter a graph): use the originals.
mkcclResult_t gemmPackOperands(const void* A, const void* W, int64_t M, int64_t N, int64_t K, int dev,
                               cudaStream_t stream, const void** Ap, const void** Wp);

}  // namespace mkccl
