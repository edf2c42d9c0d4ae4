// How many pieces the split routes across nodes cut each rank's rows into (GEMM+ReduceScatter /
// GEMM+AllReduce: src/ops/gemm_rs/net_split.cu; AllGather+GEMM: src/ops/ag_gemm/net_split.cu), the
// same on every rank. Host arithmetic, checked on the CPU (tests/fused/gemm_rs_layout_test.cc).
#pragma once
#include <stdint.h>

namespace mkccl {

// Pieces of at least 128 rows (a GEMM of fewer rows runs at a fraction of the engine's rate) and
// 256 KiB (tcp moves smaller puts at a fraction of its rate, docs/PERFORMANCE.md "Inter-node
// path"), at most 8: the first piece leaves (or is used) after an eighth of the rows.
inline int netSplitPieces(int64_t rowsPerRank, int64_t rowBytes) {
  int64_t p = rowsPerRank / 128;
  if (p > 8) p = 8;
  const int64_t byBytes = rowsPerRank * rowBytes / (int64_t(256) << 10);
  if (p > byBytes) p = byBytes;
  return p < 1 ? 1 : int(p);
}

}  // namespace mkccl
