// The plain GEMM's kernels of the other widths with bf16 inputs.
#include "ops/gemm/gemm_narrow.cuh"

namespace mkccl {
template mkcclResult_t plainGemmNarrow<dev::Bf16>(const NarrowLaunch&);
template mkcclResult_t plainGemmNarrowPreload<dev::Bf16>(int, int);
}  // namespace mkccl
