// GEMM+RS/AR cost model: pure host arithmetic (the CPU tests check it against the measurements it
// was calibrated on). The planner (gemm_rs_plan.cu) picks the fused configuration and the plan with
// it; a timed trial then confirms the plan (gemm_rs_trial.h).
//
// Calibrated on 4xH200 (run3, 2026-11-22, ws = 4): the GEMM engine alone 1361 us at 8192^3 and
// 699 us at 16384x8192x2048; our sequential plan (seq_us) 776 / 1506 / 408 / 613 us (RS) and
// 1062 / 2093 / 546 / 900 us (AR) at 8192^3, 16384x8192x8192, 4096x8192x8192, 8192x8192x4096
// (K split over the ranks).
//   tile        2 * 128 * bn * K / (per-SM rate * tile efficiency) + a fixed cost
//   sequential  GEMM waves on every SM + collective latency + bus bytes / bus bandwidth
//   fused       RS: max(GEMM, partials sent + a final epilogue). GEMM = waves over every phase,
//               slowed a little by the copy warps' memory traffic, plus the final epilogues' reads
//               of the ws-1 partials; partials sent = the later of the last sending phase's end and
//               their bytes at NVLink rate (sends start after the first tile), plus a hop.
//               AR: every finished tile also goes to every other rank: those bytes cannot start
//               before the final phase and share the link with the partials.
// The fused constants are estimates until the direct kernel is measured (mkccl-perf: fused_us).
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/fused/gemm_rs_layout.cuh"

namespace mkccl {
namespace rs {
namespace model {

constexpr double kSmFlops = 6.32e12;        // dense bf16 per SM, 128 x 256 tiles, no cluster
constexpr double kTileFixedUs = 0.55;       // per tile (epilogue, pipeline refill)
constexpr double kRsBusBytesPerUs = 250e3;  // our ReduceScatter's bus bandwidth (bytes per us)
constexpr double kArBusBytesPerUs = 289e3;  // our AllReduce's
constexpr double kCollLatencyUs = 20;
// Estimates (not measured yet).
constexpr double kLinkBytesPerUs = 330e3;  // NVLink push by the copy warps (REFERENCE: 354 GB/s at 8 pushing CTAs)
constexpr double kFusedSlowdown = 1.04;    // the GEMM beside the copy warps' memory traffic
constexpr double kPartialReadUs = 0.4;     // one partial read by a final-tile epilogue (L2)
constexpr double kHopUs = 8;               // a tile's push: copy, fence, flag
constexpr double kFinalEpilogueUs = 2;

// Per-SM throughput of a tile configuration relative to 128 x 256 without a cluster: the GEMM
// engine's numbers (src/kernels/gemm/gemm_plan_model.h): 128x1 measured (0.72), the cluster ones
// its traffic-model predictions.
inline double tileEfficiency(int bn, int cs) {
  if (bn == 256) return cs == 2 ? 1.03 : 1.0;
  return cs == 2 ? 0.9 : 0.72;
}

inline double tileUs(int bn, int cs, int64_t K) {
  return 2.0 * 128 * bn * double(K) / (kSmFlops * tileEfficiency(bn, cs)) * 1e6 + kTileFixedUs;
}

// The fused kernel with layout L on `grid` clusters, K: this rank's share.
inline double fusedUs(const Layout& L, int grid, int64_t K) {
  const int64_t units = L.orderLength();
  const int64_t prevUnits = int64_t(L.ws - 1) * L.clusterTiles;
  const double tile = tileUs(L.bn, L.cs, K);
  const double slowTile = tile * kFusedSlowdown;
  const double finalPerCta = double(ceilDiv(L.clusterTiles, grid));
  const double gemm = double(ceilDiv(units, grid)) * slowTile + finalPerCta * (L.ws - 1) * kPartialReadUs;
  const double prevEnd = double(ceilDiv(prevUnits, grid)) * slowTile;
  const double sendBytes = double(L.ws - 1) * L.tiles * L.tileBytes();
  const double sendEnd = std::max(prevEnd, tile + sendBytes / kLinkBytesPerUs) + kHopUs;
  if (!L.allReduce()) return std::max(gemm, sendEnd + kFinalEpilogueUs);
  const double ownBytes = double(L.chunkEnd(0) - L.chunkBegin(0)) * double(L.N) * 2;
  const double gatherBytes = double(L.ws - 1) * ownBytes;
  const double linkEnd =
      std::max(tile + (sendBytes + gatherBytes) / kLinkBytesPerUs, prevEnd + tile + gatherBytes / kLinkBytesPerUs);
  return std::max(gemm + tile, linkEnd) + kHopUs;
}

// The sequential plan: the GEMM engine on ctaBudget SMs (128 x 256 tiles), then our collective.
inline double sequentialUs(int mode, int ws, int64_t M, int64_t N, int64_t K, int ctaBudget) {
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, 256);
  const double gemm = double(ceilDiv(tiles, std::max(1, ctaBudget))) * tileUs(256, 1, K);
  const double bytes = double(M) * double(N) * 2 * (ws - 1) / ws;
  const double coll =
      kCollLatencyUs + (mode == kModeAllReduce ? 2 * bytes / kArBusBytesPerUs : bytes / kRsBusBytesPerUs);
  return gemm + coll;
}

}  // namespace model
}  // namespace rs
}  // namespace mkccl
