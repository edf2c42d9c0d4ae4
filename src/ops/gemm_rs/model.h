// GEMM+RS/AR cost model: pure host arithmetic (the CPU tests check it against the measurements it
// was calibrated on). The auto plan's rule (rule.h) compares its two estimates.
//
// Calibrated on 4xH200, 2026-11-22 (perf/results/20261122-130330-4xNVIDIA_H200),
// K split over the ranks, shapes 8192^3, 16384x8192x8192, 4096x8192x8192, 8192x8192x4096:
//   sequential (seq_us)  RS ws=4 771.7 / 1522 / 407.9 / 607.1, ws=2 1048 / 2186 / 532.9 / 707.7;
//                        AR ws=4 1084 / 2117 / 566.6 / 926, ws=2 1224 / 2448 / 616.1 / 854
//   fused (fused_us)     RS ws=4 506.5 / 980.3 / 280.2 / 385.6, ws=2 806.8 / 1609 / 411.6 / 455.6;
//                        AR ws=2 912.1 / 1721 / 449.4 / 525.5;
//                        AR ws=4 700.6 / 1372 / 387.1 / 667.2
//                        (perf/results/20261122-181104-4xNVIDIA_H200)
// The model is within 5% of every seq_us and within 7% of every fused_us above (a CPU test checks
// both, at 6% and 8%).
//   tile        2 * 128 * bn * K / (per-SM rate * tile efficiency) + a fixed cost
//   sequential  GEMM waves on every SM + collective latency + bus bytes / bus bandwidth
//   fused       RS: max(GEMM, partials sent + a final epilogue). GEMM = waves over every phase, plus
//               the final epilogues' reads of the ws-1 partials, plus the time the push team's
//               traffic takes from it: the runs fit "GEMM alone + bytes sent / 600 GB/s" (the
//               overlap is partial: each byte staged, read and stored to a peer competes with the
//               mainloop for memory and L2). Partials sent = the later of the last sending phase's
//               end and their bytes at the push's link rate beside a GEMM (sends start after the
//               first tile), plus a hop.
//               AR: every finished tile also goes to every other rank: those bytes cannot start
//               before the final phase and share the link with the partials.
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/gemm_rs/layout.h"

namespace mkccl {
namespace rs {
namespace model {

constexpr double kSmFlops = 6.32e12;        // dense bf16 per SM, 128 x 256 tiles, no cluster
constexpr double kTileFixedUs = 0.55;       // per tile (epilogue, pipeline refill)
// Our collectives' bus bandwidth at 64-128 MiB (bytes per us): ReduceScatter 196 GB/s at 2 ranks
// (reducescatter-ws2.json), 250 beyond; AllReduce 289.
constexpr double kRsBusBytesPerUs2 = 196e3;
constexpr double kRsBusBytesPerUs = 250e3;
constexpr double kArBusBytesPerUs = 289e3;
constexpr double kCollLatencyUs = 20;
// Our AllGather at 64-256 MiB past its latency: 323-336 GB/s of bus bytes at 4 ranks, 342 at 2
// (allgather-ws*.json, 4xH200: 171.8 / 331.9 / 618.5 us at 64 / 128 / 256 MiB, ws 4).
constexpr double kAgBusBytesPerUs = 330e3;
// Fused, fitted to the fused_us above.
// The push's rate beside a GEMM (RS ws=4 8192x8192x4096 sends 101 MB in 386 us).
constexpr double kLinkBytesPerUs = 260e3;
// The fused AllReduce's traffic (partials and finished tiles) beyond 2 ranks, where it is
// link-bound: 201 MB per rank at 8192^3 in 701 us, 403 MB in 1372 (4xH200): ~300 GB/s.
constexpr double kArLinkBytesPerUs = 300e3;
constexpr double kPushStallBytesPerUs = 600e3;  // the GEMM's loss per byte pushed
constexpr double kPartialReadUs = 0.4;          // one partial read by a final-tile epilogue (L2)
constexpr double kHopUs = 8;                    // a tile's push: copy, fence, flag
constexpr double kFinalEpilogueUs = 2;

// Per-SM throughput of a tile configuration relative to 128 x 256 without a cluster: the GEMM
// engine's numbers (src/ops/gemm/gemm_plan_model.h): 128x1 measured (0.72), the cluster ones
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
  const double finalPerCta = double(ceilDiv(L.clusterTiles, grid));
  const double sendBytes = double(L.ws - 1) * double(L.tiles) * double(L.tileBytes());
  const double gemm = double(ceilDiv(units, grid)) * tile + finalPerCta * (L.ws - 1) * kPartialReadUs +
                      sendBytes / kPushStallBytesPerUs;
  const double prevEnd = double(ceilDiv(prevUnits, grid)) * tile;
  const double sendEnd = std::max(prevEnd, tile + sendBytes / kLinkBytesPerUs) + kHopUs;
  if (!L.allReduce()) return std::max(gemm, sendEnd + kFinalEpilogueUs);
  const double ownBytes = double(L.chunkEnd(0) - L.chunkBegin(0)) * double(L.N) * 2;
  const double gatherBytes = double(L.ws - 1) * ownBytes;
  const double rate = L.ws > 2 ? kArLinkBytesPerUs : kLinkBytesPerUs;
  const double linkEnd = std::max(tile + (sendBytes + gatherBytes) / rate, prevEnd + tile + gatherBytes / rate);
  return std::max(gemm + tile, linkEnd) + kHopUs;
}

// The sequential plan: the GEMM engine on ctaBudget SMs (128 x 256 tiles), then our collective.
inline double sequentialUs(int mode, int ws, int64_t M, int64_t N, int64_t K, int ctaBudget) {
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, 256);
  const double gemm = double(ceilDiv(tiles, std::max(1, ctaBudget))) * tileUs(256, 1, K);
  const double bytes = double(M) * double(N) * 2 * (ws - 1) / ws;
  const double rsBus = ws == 2 ? kRsBusBytesPerUs2 : kRsBusBytesPerUs;
  const double coll = kCollLatencyUs + (mode == kModeAllReduce ? 2 * bytes / kArBusBytesPerUs : bytes / rsBus);
  return gemm + coll;
}

// Our AllGather of C [M, N] (bf16/fp16), each rank holding M / ws rows.
inline double allGatherUs(int ws, int64_t M, int64_t N) {
  return kCollLatencyUs + double(M) * double(N) * 2 * (ws - 1) / ws / kAgBusBytesPerUs;
}

}  // namespace model
}  // namespace rs
}  // namespace mkccl
