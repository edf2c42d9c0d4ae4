// Launch of the plain GEMM's kernels of the other widths (gemm_narrow.cuh; instantiated per input
// type in gemm_narrow_bf16.cu and gemm_narrow_f16.cu, which compile in parallel).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include "kernels/gemm/gemm_args.h"
#include "mkccl.h"

namespace mkccl {

struct NarrowLaunch {
  int bn;  // one of kGemmNarrowWidths
  const CUtensorMap *mapA, *mapB, *mapC;
  const GemmArgs* g;  // its clusterSize is the launch's
  int ctas, dev, smCount;
  cudaStream_t stream;
  bool pdl;
};

template <class In>
mkcclResult_t plainGemmNarrow(const NarrowLaunch& l);
// Loads every kernel of the other widths of this input type on `dev` (src/ops/preload.cu).
template <class In>
mkcclResult_t plainGemmNarrowPreload(int dev, int smCount);

}  // namespace mkccl
