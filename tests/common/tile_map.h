// Tensor maps for tests that launch an engine kernel themselves (their own op instantiation): a
// bf16 [rows, cols] matrix read in boxes of 64 columns (128 bytes, the 128B swizzle) and boxRows
// rows, encoded as the library's encodeTileMap does. Header-only.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace mkccl {
namespace test {

inline PFN_cuTensorMapEncodeTiled_v12000 tensorMapEncodeFn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

inline bool encodeBf16(CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols, uint32_t boxRows) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * 2};
  const cuuint32_t box[2] = {64, boxRows};
  const cuuint32_t es[2] = {1, 1};
  return tensorMapEncodeFn() &&
         tensorMapEncodeFn()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, es,
                             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace test
}  // namespace mkccl
