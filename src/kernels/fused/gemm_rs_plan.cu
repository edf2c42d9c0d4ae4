// GEMM+RS/AR planning: the fused kernel's tile configuration, and the model that picks the fused
// or the sequential plan (GEMM on every SM, then our ReduceScatter / AllReduce).
//
// The model (constants are estimates from REFERENCE.md's H200 measurements, to be refined):
//   tile time      2 * 128 * bn * K / (per-SM rate * tile efficiency)
//   fused          max(GEMM, NVLink) + one tile of fill: GEMM = cluster-tile waves over every step
//                  (the ring needs no extra SMs); NVLink = bytes this rank sends / link rate (RS:
//                  (ws-1) chunks of sums; AR: twice that). A chunk smaller than one wave of the
//                  grid makes each step wait for the previous one: ws waves plus a hop each.
//   sequential     GEMM on every SM + collective (latency + bytes / bus bandwidth).
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <cmath>
#include "kernels/fused/gemm_rs_host.cuh"
#include "runtime/check.h"
#include "runtime/log.h"

namespace mkccl {
namespace rs {

namespace {

constexpr double kSmFlops = 5.6e12;         // dense bf16 per SM at full tile efficiency (~740 TFLOP/s / 132)
constexpr double kLinkBytesPerUs = 350e3;   // NVLink, one direction per GPU (bytes per us)
constexpr double kBusBytesPerUs = 320e3;    // a collective's bus bandwidth at large sizes
constexpr double kCollLatencyUs = 20;
constexpr double kHopUs = 10;               // a tile's sum: epilogue, copy and flag to the next rank
constexpr double kEpilogueCost = 1.03;      // the incoming sum read in the epilogue
constexpr int64_t kMaxScratchBytes = 8ll << 30;

struct Candidate {
  int bn, cs;
  double eff;  // relative tile efficiency (the GEMM engine's guesses, gemm_plan.cu)
};
const Candidate kCandidates[] = {{256, 2, 1.0}, {256, 1, 0.97}, {128, 2, 0.9}, {128, 1, 0.88}};

bool allowed(const Candidate& c, GemmVariant v) {
  switch (v) {
    case GemmVariant::F256C2: return c.bn == 256 && c.cs == 2;
    case GemmVariant::F256C1: return c.bn == 256 && c.cs == 1;
    case GemmVariant::F128C2: return c.bn == 128 && c.cs == 2;
    case GemmVariant::F128C1: return c.bn == 128 && c.cs == 1;
    default: return true;  // auto; "simple" is a plain-GEMM debug variant
  }
}

double tileUs(int bn, int64_t K, double eff) { return 2.0 * 128 * bn * double(K) / (kSmFlops * eff) * 1e6; }

}  // namespace

FusedPlan planFused(const PlanInputs& in) {
  FusedPlan best;
  double bestUs = 0;
  bool bestWaveFit = false;
  for (const Candidate& c : kCandidates) {
    if (!allowed(c, in.variant)) continue;
    int ctas = in.ctaBudget;
    if (c.cs == 2) {
      const int clusters = c.bn == 256 ? in.occ.clusters256 : in.occ.clusters128;
      ctas = std::min(in.ctaBudget / 2, clusters) * 2;
    }
    if (ctas < c.cs) continue;
    const int G = ctas / c.cs;
    const Layout L = makeLayout(in.mode, in.ws, in.M, in.N, c.bn, c.cs, 2 * G, std::max(1, 16 / c.cs));
    if (L.flagSlots() > in.flagSlots || L.scratchBytes() > kMaxScratchBytes) continue;
    const int64_t units = L.orderLength();
    const int grid = int(std::min<int64_t>(G, units));
    const double tile = tileUs(c.bn, in.K, c.eff);
    const bool waveFit = L.clusterTiles >= grid;
    double gemm = double((units + grid - 1) / grid) * tile * kEpilogueCost;
    if (!waveFit) gemm = std::max(gemm, in.ws * (tile + kHopUs));
    const double sendBytes = double(in.ws - 1) * L.tiles * L.tileBytes() * (L.allReduce() ? 2 : 1);
    const double us = std::max(gemm, sendBytes / kLinkBytesPerUs) + tile;
    // Prefer configurations whose chunks fill the grid, then the model's time.
    const bool better = !best.ok || (waveFit && !bestWaveFit) || (waveFit == bestWaveFit && us < bestUs);
    if (better) {
      best.ok = true;
      best.bn = c.bn;
      best.cs = c.cs;
      best.ctas = grid * c.cs;
      best.L = L;
      best.estUs = us;
      bestUs = us;
      bestWaveFit = waveFit;
    }
  }
  return best;
}

double estimateSequentialUs(const PlanInputs& in) {
  const int64_t tiles = ((in.M + 127) / 128) * ((in.N + 255) / 256);
  const double gemm = double((tiles + in.ctaBudget - 1) / std::max(1, in.ctaBudget)) * tileUs(256, in.K, 1.0);
  const double bytes = double(in.M) * in.N * 2 * (in.ws - 1) / in.ws;
  const double coll = kCollLatencyUs + bytes * (in.mode == kModeAllReduce ? 2 : 1) / kBusBytesPerUs;
  return gemm + coll;
}

mkcclResult_t planFromEnv(const char* var, PlanKind* out) {
  *out = PlanKind::Auto;
  const char* s = getenv(var);
  if (s == nullptr || *s == '\0' || strcmp(s, "auto") == 0) return mkcclSuccess;
  if (strcmp(s, "fused") == 0) *out = PlanKind::Fused;
  else if (strcmp(s, "sequential") == 0) *out = PlanKind::Sequential;
  else return setError(mkcclInvalidUsage, "%s=%s: expected fused, sequential or auto", var, s);
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
