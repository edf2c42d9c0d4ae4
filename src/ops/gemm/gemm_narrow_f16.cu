// The plain GEMM's kernels of the other widths with f16 inputs.
#include "ops/gemm/gemm_narrow.cuh"

namespace mkccl {
template mkcclResult_t plainGemmNarrow<dev::F16>(const NarrowLaunch&);
template mkcclResult_t plainGemmNarrowPreload<dev::F16>(int, int);
}  // namespace mkccl
