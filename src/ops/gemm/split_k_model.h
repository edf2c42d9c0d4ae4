// When the plain GEMM splits K (split_k.cuh), and into how many parts: pure host arithmetic,
// header-only so that the CPU tests pin it.
//
// Decode-sized M (<= 256 rows) leaves fewer output tiles than SMs (M = 128, N = 8192: 64 tiles of
// 128 x 128 on 132 SMs), and the GEMM is bound by reading W. Splitting K multiplies the units of
// work without re-reading W, but the data (H100, mkccl-perf gemm, every part count forced on
// M in {1..256} x N, K in {4096, 8192}, 14336, 28672) say that more CTAs help only while the
// CTAs, not HBM, are the limit: 64 CTAs already pull ~2.5 TB/s, and each part costs a fixed ~1 us
// plus its fp32 partials (up to ~4 us per extra part at 128 live rows). So the model is a memory
// model, not the wave model: time = max(HBM bytes / HBM rate, bytes one CTA loads / one CTA's
// rate) + the parts' fixed cost, minimised over the part count. Fitted to that sweep: the choice
// is within 4% of the best forced count on all 30 shapes (the old wave model's, up to 15% off). Outputs of more than
// 256 rows are never split by the rule: at 1000 x 1032 x 4096 three parts (the old wave model's
// choice) took 36.6 us against 26.2 unsplit. Split K runs 128 x 128 tiles without a cluster (the
// reduction adds 64 registers per thread to the 64 accumulators; 128 x 256 would spill).
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/abi/hd.h"
#include "ops/gemm/gemm_plan_model.h"

namespace mkccl {

constexpr int kSplitKMaxSplits = 16;
constexpr int kSplitKMinKBlocks = 4;        // auto: at least this many k-blocks per part
constexpr int64_t kSplitKMaxRows = 256;     // auto splits only outputs of at most this many rows
// The model's rates and costs, per GPU: the HBM rate it assumes, one CTA's rate for W, the fixed
// cost of splitting at all (partials, counters, the last part's sum) and the cost per extra part
// at 128 live rows (scaled by the rows); the fewest rows that take 128 x 64 parts, and whole
// 128 x 64 tiles (one part: 0, never), below.
struct SplitKRates {
  double hbmBytesPerUs, ctaBytesPerUs, partUs, rowsUs;
  int narrowMinRows, narrowWholeMinRows;
};
// H100 (3.35 TB/s peak): fitted to the sweep above (2.5-2.9 TB/s measured; 32 CTAs pulled ~1.3 TB/s).
constexpr SplitKRates kSplitKRatesH100{2.7e6, 4.0e4, 2.0, 3.0, 1, 0};
// H200 (4.8 TB/s peak): fitted to every part count forced on the 26 decode shapes
// (perf/results/20261127-s4-splitk-h200-1xNVIDIA_H200/): within 2.4% of the best count on every
// shape (the H100 rates: up to 11% off, 64 x 8192 x 8192 unsplit at 47.0 us against 42.2 in two
// parts). Its CTAs stream ~50 GB/s each (gemm_probe_test: 2 MB in ~40 us unsplit), its HBM
// ~4.2 TB/s, and a split costs more up front (~4 us: the partials' round trip and the last part's
// sum, gemm_probe_test's epilogue phase).
constexpr SplitKRates kSplitKRatesH200{4.2e6, 5.0e4, 4.0, 1.0, 64, 64};
// The rates for a GPU of this peak HBM rate (bytes/us; 0: unknown, the H100's).
inline const SplitKRates& splitKRatesFor(double hbmPeakBytesPerUs) {
  return hbmPeakBytesPerUs >= 4.0e6 ? kSplitKRatesH200 : kSplitKRatesH100;
}

// Predicted time (us, without the launch's fixed cost, which every count shares) of the decode GEMM
// in `splits` parts of 128 x 128 tiles on ctaBudget CTAs.
inline double gemmSplitKTimeUs(int64_t M, int64_t N, int64_t K, int splits, int ctaBudget,
                               const SplitKRates& r = kSplitKRatesH100) {
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, 128);
  const int64_t units = tiles * splits;
  const int64_t ctas = std::min<int64_t>(std::max(ctaBudget, 1), units);
  const int64_t kPart = ceilDiv(ceilDiv(K, 64), splits);
  // W only: A is a few MB that every CTA reads, from L2 after the first touch.
  const double ctaBytes = static_cast<double>(ceilDiv(units, ctas) * kPart * (128 * 64 * 2));
  const double hbmBytes = static_cast<double>((N + M) * K * 2);
  double t = std::max(hbmBytes / r.hbmBytesPerUs, ctaBytes / r.ctaBytesPerUs);
  if (splits > 1) t += r.partUs + r.rowsUs * static_cast<double>(std::min<int64_t>(M, 128)) / 128 * (splits - 1);
  return t;
}

// Split K also runs 128 x 64 tiles: twice the tiles of W rows, each unit streaming half the bytes
// per k-block, so as many CTAs need half the parts (fewer partials to write and sum). Where the
// 128-wide split is taken, the output is one M-block and the 64-wide tiles fill at least two parts in
// one wave of CTAs, auto takes as many 64-wide parts as fill that wave (4 k-blocks each at least);
// where they fill one part, whole 128 x 64 tiles up to K = 8192 (N = 8192; whatever the 128-wide
// plan). Measured with the counts of both forced
// (perf/results/20261128-s11/, calls 2-4): one H100 faster in parts at every such shape (2-8%:
// 16 x 4096 x 4096 19.6 against 21.2 us, 128 x 4096 x 8192 34.4 against 36.9, 8 x 2048 x 2048 11.5
// against 12.4); one H200 faster from 64 rows (64 x 4096 x 4096 +3%, 128 x 4096 x 4096 19.2 against
// 20.5 us, 128 x 2048 x 2048 12.7 against 14.6) but up to 3% slower below (1 x 4096 x 8192), and in
// whole tiles from 64 rows 1-9% faster (128 x 8192 x 4096 25.4 against 27.8 us; at K = 28672 8%
// slower, 138.8 against 127.8: the narrow tile's own rate shows once the split's fixed cost is
// small), mixed below; so each
// GPU's rates name the fewest rows (SplitKRates; the H100's whole tiles not measured: off). Two
// waves of units were slower on both (16 x 8192 x 4096: 30.1 against 25.5 us on the H200), and so
// were 128 x 64 tiles over two M-blocks (256 x 4096 x 8192 whole: 42.0 against 34.2).
constexpr int kSplitKNarrowWidth = 64;
constexpr int64_t kSplitKNarrowWholeMaxK = 8192;

// The plan for the plain GEMM: `plain` (gemmPlanModel's) unless split K is predicted faster.
// forced: the tuner's gemm.split_k (0 auto, 1 never, s > 1 that many parts, capped by the
// k-blocks and the workspace). maxUnits: the workspace's room in (tile, part) units of 128 x 128.
// Auto splits only when the variant is auto or 128x1 (128 x 128 tiles; auto also 128 x 64 as
// above); 64x1 forced with s > 1 parts runs 128 x 64 tiles in s parts.
inline GemmPlan gemmSplitKPlan(const GemmPlan& plain, int64_t M, int64_t N, int64_t K, GemmVariant v, int forced,
                               int ctaBudget, int maxUnits, const SplitKRates& rates = kSplitKRatesH100) {
  if (plain.simple || forced == 1) return plain;
  int narrowBn = 0, narrowCs = 0;
  const bool narrow = gemmVariantNarrow(v, &narrowBn, &narrowCs) && narrowBn == kSplitKNarrowWidth &&
                      narrowCs == 1 && forced > 1;
  if (v != GemmVariant::Auto && v != GemmVariant::F128C1 && !narrow) return plain;
  const int bn = narrow ? kSplitKNarrowWidth : 128;
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, bn);
  const int64_t kBlocks = ceilDiv(K, 64);
  ctaBudget = std::max(ctaBudget, 1);
  int best = 1;
  if (forced > 1) {
    best = static_cast<int>(std::min<int64_t>({forced, kBlocks, maxUnits / std::max<int64_t>(tiles, 1)}));
  } else if (M <= kSplitKMaxRows) {
    double bestTime = gemmSplitKTimeUs(M, N, K, 1, ctaBudget, rates);
    for (int s = 2; s <= kSplitKMaxSplits; ++s) {
      if (kBlocks / s < kSplitKMinKBlocks || tiles * s > maxUnits) break;
      const double t = gemmSplitKTimeUs(M, N, K, s, ctaBudget, rates);
      if (t < bestTime) {
        bestTime = t;
        best = s;
      }
    }
  }
  // 128 x 64 parts filling one wave (auto, the auto variant only; above).
  int bestBn = bn;
  if (forced == 0 && v == GemmVariant::Auto && M <= 128 && M >= rates.narrowMinRows) {
    const int64_t tiles64 = ceilDiv(N, kSplitKNarrowWidth);
    const int64_t s = std::min<int64_t>({std::min<int64_t>(ctaBudget, maxUnits) / tiles64,
                                         kBlocks / kSplitKMinKBlocks, kSplitKMaxSplits});
    if (s >= 2 && best > 1) {
      best = static_cast<int>(s);
      bestBn = kSplitKNarrowWidth;
    } else if (s == 1 && rates.narrowWholeMinRows > 0 && M >= rates.narrowWholeMinRows &&
               K <= kSplitKNarrowWholeMaxK) {
      GemmPlan p;  // whole tiles: the plain GEMM's 64-wide kernel
      p.bn = kSplitKNarrowWidth;
      p.clusterSize = 1;
      p.splits = 1;
      p.ctas = static_cast<int>(tiles64);
      return p;
    }
  }
  if (best <= 1) return plain;
  const int64_t planTiles = bestBn == bn ? tiles : ceilDiv(M, 128) * ceilDiv(N, bestBn);
  GemmPlan p;
  p.bn = bestBn;
  p.clusterSize = 1;
  p.simple = false;
  p.splits = best;
  p.ctas = static_cast<int>(std::min<int64_t>(ctaBudget, planTiles * best));
  return p;
}

}  // namespace mkccl
