// The attention tests' reference: a simple fp32 GPU kernel (one warp per query row, exact exp),
// and the comparison of a result with it.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"

namespace mkccl {
namespace test {

// O [B, sq, hq, d] and LSE [B, hq, sq] in fp32 from Q [B, sq, hq, d], K, V [B, skv, hkv, d] of
// type t. Query i has position qPos0 + i, key j position j; causal: j <= position of i. A row
// without keys gets O = 0, LSE = -inf.
void refAttention(const void* Q, const void* K, const void* V, float* O, float* lse, int B, int sq, int skv, int hq,
                  int hkv, int d, float scale, int causal, int qPos0, mkcclDataType_t t, cudaStream_t stream = 0);

// Max |a - b| over max |ref| (O), max |a - b| (LSE), and the elements past the tolerances
// (NaN counts). Rows picked by `rows` (default all).
struct AttnErr {
  double oRel = 0, lseAbs = 0;
  size_t oWrong = 0, lseWrong = 0;
  std::string first;
};
// got: O of type t [B, sq, hq, d] and LSE [B, hq, sq] (lse may be empty); ref: fp32 of the same shapes.
AttnErr compareAttention(const std::vector<double>& gotO, const std::vector<float>& refO,
                         const std::vector<float>& gotLse, const std::vector<float>& refLse, double oTol,
                         double lseTol);

}  // namespace test
}  // namespace mkccl
