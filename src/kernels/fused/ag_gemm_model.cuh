// AllGather+GEMM: the cost model that picks the plan (fused or sequential). A few constants from
// REFERENCE.md's measurements on H200, and guesses marked as such; docs/AG_GEMM.md says how to
// recalibrate them from mkccl-perf ag_gemm (its fused_us / sequential_us extras). Host code (also
// used by the CPU tests).
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/gemm/gemm_plan.h"

namespace mkccl {
namespace ag {

constexpr double kSmTflops = 6.0;      // one SM's bf16 rate in the engine's best tile (256x1: 798 TFLOP/s / 132, H100)
constexpr double kNvlinkGBps = 360;    // NVLink per GPU and direction (measured 354-376)
// Shard bytes read per second by one team (each read is stored to every peer). Measured: 46 GB/s
// per CTA of 512 threads x 8 loads in flight; ours keep 384 x 4 (a CTA) or 96 x 4 (a side team)
// loads in flight: scaled by that (guesses until measured).
constexpr double kCtaReadGBps = 17;
constexpr double kSideReadGBps = 4.5;
constexpr double kSideCost = 0.02;     // side teams' share of the compute CTAs' issue slots (a guess)
constexpr double kLaunchUs = 4;        // one more kernel on the stream
constexpr double kGatherStartUs = 10;  // the standalone AllGather's start and drain
constexpr int kGatherCtas = 24;        // CTAs of the sequential plan's AllGather (512 threads each)
constexpr double kGatherCtaReadGBps = 30;

struct Estimate {
  double fusedUs = 0, sequentialUs = 0;
  double gemmUs = 0, commUs = 0;  // the fused kernel's GEMM on its CTAs; its push
};

// Relative efficiency of the engine's tile configurations (the numbers gemm_plan.cu plans with,
// measured on H100: 256x1 798 TFLOP/s, 128x1 574, 256x2 446, 128x2 262).
inline double tileEfficiency(const GemmPlan& p) {
  if (p.bn == 256) return p.clusterSize == 2 ? 0.56 : 1.0;
  return p.clusterSize == 2 ? 0.33 : 0.72;
}

// One output tile on one SM.
inline double tileUs(const GemmPlan& p, int64_t K) {
  return 2.0 * 128.0 * p.bn * static_cast<double>(K) / (kSmTflops * 1e12) * 1e6 / tileEfficiency(p);
}

// Waves of tiles over the plan's CTAs (the engine's static schedule), times one tile.
inline double gemmUs(const GemmPlan& p, int64_t M, int64_t N, int64_t K) {
  const int64_t units = (M + 128 * p.clusterSize - 1) / (128 * p.clusterSize) * ((N + p.bn - 1) / p.bn);
  const int64_t parallel = std::max(1, p.ctas / p.clusterSize);
  return static_cast<double>((units + parallel - 1) / parallel) * tileUs(p, K);
}

// A shard pushed to ws - 1 peers by teams that read readGBps in all: NVLink or the teams bound it.
inline double pushUs(double shardBytes, int ws, double readGBps) {
  const double out = shardBytes * (ws - 1);
  return std::max(out / (kNvlinkGBps * 1e3), shardBytes / (std::max(readGBps, 1e-3) * 1e3));
}

// fused: the GEMM on its CTAs, or the push plus the last chunk's tiles, whichever is later.
// sequential: the AllGather, then the GEMM on every SM.
inline Estimate estimate(const GemmPlan& fused, const GemmPlan& full, int64_t M, int64_t N, int64_t K, int ws,
                         int commCtas, bool sideTeams) {
  Estimate e;
  const double shard = static_cast<double>(M / ws) * static_cast<double>(K) * 2.0;
  e.gemmUs = gemmUs(fused, M, N, K) * (sideTeams ? 1.0 + kSideCost : 1.0);
  const double read = commCtas * kCtaReadGBps + (sideTeams ? fused.ctas * kSideReadGBps : 0.0);
  e.commUs = pushUs(shard, ws, read);
  e.fusedUs = std::max(e.gemmUs, e.commUs + tileUs(fused, K)) + kLaunchUs;
  e.sequentialUs = pushUs(shard, ws, kGatherCtas * kGatherCtaReadGBps) + kGatherStartUs + gemmUs(full, M, N, K) +
                   2 * kLaunchUs;
  return e;
}

}  // namespace ag
}  // namespace mkccl
