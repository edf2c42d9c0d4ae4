// The fused ops' argument struct (mkcclFusedGemmArgs_t): its checks that need no GPU and its
// defaults resolved (pitches, types), shared by the Ex calls and the short forms (api_fused.cc).
// Pure host code, so that a CPU test compiles it in (tests/runtime/fused_args_test.cc).
#pragma once
#include <stddef.h>
#include "mkccl.h"

namespace mkccl {

enum class FusedKind { AllGatherGemm, GemmReduceScatter, GemmAllReduce };

// Every field resolved: pitches never 0, types never mkcclNumTypes.
struct FusedArgs {
  const void* A = nullptr;
  size_t M = 0, K = 0, lda = 0;
  size_t aRows = 0, cRows = 0;  // rows of this rank's A and of every C
  mkcclDataType_t inType = mkcclBfloat16, outType = mkcclBfloat16, biasType = mkcclBfloat16;
  void* gatheredA = nullptr;
  int numWeights = 0;
  mkcclFusedWeight_t w[MKCCL_FUSED_MAX_WEIGHTS] = {};

  bool contiguous(int i) const { return lda == K && w[i].ldw == K && w[i].ldc == w[i].N; }
  // What only the store epilogue (or the exact route of GEMM+RS/AR) does: a bias, another output
  // type, a pitch of C.
  bool epilogueExtras(int i) const { return w[i].bias != nullptr || outType != inType || w[i].ldc != w[i].N; }
};

// Bytes a matrix of `rows` rows of `cols` elements at pitch `ld` spans (the last row unpadded).
inline size_t matrixSpan(size_t rows, size_t cols, size_t ld, size_t es) {
  return rows == 0 ? 0 : ((rows - 1) * ld + cols) * es;
}

// Checks `in` for an op of `kind` on `nranks` ranks (mkcclInvalidArgument with a message naming
// `op` and the field) and fills `out`. No CUDA call: device pointers are checked by the caller.
mkcclResult_t fusedArgsResolve(const char* op, FusedKind kind, int nranks, int rank, const mkcclFusedGemmArgs_t* in,
                               FusedArgs* out);

}  // namespace mkccl
