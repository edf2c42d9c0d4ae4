// GEMM+RS/AR: the auto plan, decided by a rule on the call's shape alone. Every rank must run the
// same plan (the fused kernel waits for flags the sequential plan never raises), and a call that
// takes a stream must return once its work is enqueued: so the rule looks only at what every rank
// of the call knows alike — mode, world size, M, N, K, the SM budget (and the flag area, a
// library constant) — and times nothing, waits for nothing, remembers nothing. Host arithmetic,
// checked on the CPU against every measured case (tests/fused/gemm_rs_layout_test.cc).
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/gemm_rs/layout.h"
#include "ops/gemm_rs/model.h"

namespace mkccl {
namespace rs {

struct RuleInputs {
  int mode = kModeReduceScatter;  // kModeReduceScatter / kModeAllReduce
  int ws = 1;
  int64_t M = 0, N = 0, K = 0;    // A [M, K], W [N, K]; K: each rank's share
  int ctaBudget = 0;              // SMs a kernel of the communicator may use
  int64_t flagSlots = 0;          // 64-bit slots from kOpFlagSlot in the flags region
  int maxBn = 256;                // the widest tile the call's kernel has (fp8 block scales: 128)
};

// A fused configuration: tiles 128 x bn, clusters of cs, on ctas CTAs. ok = false: it cannot run
// this shape (flags or scratch would not fit, or no CTA).
struct FusedPlan {
  bool ok = false;
  int bn = 256, cs = 1, ctas = 0;
  Layout L;
  double estUs = 0;  // the model's estimate
};

// The scratch the fused kernel may ask for, per rank.
constexpr int64_t kMaxFusedScratchBytes = 8ll << 30;
// The fused AllReduce runs at these world sizes only. Its broadcast phase (each owner pushing its
// finished tiles to every other rank) is link-bound, and only as fast as this while the device
// waits read host memory rarely (signal.cuh: WaitClock; polling it every few microseconds made the
// fused AllReduce 4-8x slower than the sequential plan at 4 ranks). At 4 ranks it is the fastest
// plan (4xH200, perf/results/20261122-181104-4xNVIDIA_H200, us fused / rs_ag / sequential: 8192^3
// 701 / 802 / 1015, 16384x8192x8192 1372 / 1564 / 1954, 4096x8192x8192 387 / 414 / 526,
// 8192x8192x4096 667 / 694 / 848). 3 ranks measured once (the fused AllReduce 1.14-1.24 of the
// floor, 1.30-1.43x the baseline); beyond 4, not measured.
constexpr int kMaxFusedAllReduceRanks = 4;
// The fused plan must beat the sequential one by more than the model's error (its fused side is
// within 8% of the runs it was fitted to); otherwise the sequential plan, the simpler one with
// less scratch.
constexpr double kFusedMargin = 0.95;
// A narrower tile replaces the 256-wide one only when the model says it is clearly faster.
constexpr double kClearWin = 0.95;

inline FusedPlan fusedConfig(const RuleInputs& in, int bn, int cs, int ctas) {
  FusedPlan p;
  if (ctas < cs || in.ws < 2) return p;
  const Layout L = makeLayout(in.mode, in.ws, in.M, in.N, bn, cs, std::max(1, 16 / cs));
  if (L.flagSlots() > in.flagSlots || L.scratchBytes() > kMaxFusedScratchBytes) return p;
  const int grid = int(std::min<int64_t>(ctas / cs, L.orderLength()));
  p.ok = true;
  p.bn = bn;
  p.cs = cs;
  p.ctas = grid * cs;
  p.L = L;
  p.estUs = model::fusedUs(L, grid, in.K);
  return p;
}

// The auto configuration: no cluster (the cluster path of this kernel is not measured since the
// engine's fence fix), 128 x 256 tiles unless 128 x 128 is clearly faster (link-bound shapes).
inline FusedPlan autoFusedPlan(const RuleInputs& in) {
  const FusedPlan narrow = fusedConfig(in, 128, 1, in.ctaBudget);
  if (in.maxBn < 256) return narrow;
  FusedPlan best = fusedConfig(in, 256, 1, in.ctaBudget);
  if (narrow.ok && (!best.ok || narrow.estUs < best.estUs * kClearWin)) best = narrow;
  return best;
}

enum class RuleReason : int { Model, FusedCannotRun, AllReduceWorldSize };

// How a call runs. RsThenAg (AllReduce only, M divisible by the world size): the fused
// ReduceScatter kernel writes this rank's rows of C, then our AllGather completes C in place --
// the GEMM hidden under the reduce-scatter half, the gather half a plain collective. The rule takes
// it where the fused AllReduce cannot run (beyond kMaxFusedAllReduceRanks) or is estimated slower;
// at 4 ranks it was 1.15-1.23x faster than cuBLAS + NCCL, the fused AllReduce faster still
// (4xH200).
enum class Route : int { Sequential = 0, Fused = 1, RsThenAg = 2 };

struct PlanChoice {
  Route route = Route::Sequential;
  bool fused = false;  // route == Fused
  RuleReason why = RuleReason::Model;
  FusedPlan plan;      // the auto fused configuration of the call's mode (plan.ok = false: it cannot run)
  FusedPlan rsPlan;    // AllReduce: the ReduceScatter configuration RsThenAg would run (ok = false: none)
  double seqUs = 0;    // the model's estimate of the sequential plan
  double rsAgUs = 0;   // ... of RsThenAg (0: not possible)
};

inline PlanChoice choosePlan(const RuleInputs& in) {
  PlanChoice c;
  c.plan = autoFusedPlan(in);
  c.seqUs = model::sequentialUs(in.mode, in.ws, in.M, in.N, in.K, in.ctaBudget);
  if (in.mode == kModeAllReduce && in.ws > 1 && in.M % in.ws == 0) {
    RuleInputs rs = in;
    rs.mode = kModeReduceScatter;
    c.rsPlan = autoFusedPlan(rs);
    if (c.rsPlan.ok) c.rsAgUs = c.rsPlan.estUs + model::allGatherUs(in.ws, in.M, in.N);
  }
  bool fusedOk = c.plan.ok;
  if (!c.plan.ok) c.why = RuleReason::FusedCannotRun;
  else if (in.mode == kModeAllReduce && in.ws > kMaxFusedAllReduceRanks) {
    c.why = RuleReason::AllReduceWorldSize;
    fusedOk = false;
  }
  // The faster of what can run; fused routes only when they clearly beat the sequential plan.
  Route best = Route::Sequential;
  double bestUs = 0;
  if (fusedOk) best = Route::Fused, bestUs = c.plan.estUs;
  if (c.rsPlan.ok && (best == Route::Sequential || c.rsAgUs < bestUs)) best = Route::RsThenAg, bestUs = c.rsAgUs;
  if (best != Route::Sequential && bestUs < kFusedMargin * c.seqUs) c.route = best;
  c.fused = c.route == Route::Fused;
  return c;
}

inline const char* ruleReasonName(RuleReason r) {
  switch (r) {
    case RuleReason::FusedCannotRun: return "the fused kernel's flags or scratch would not fit";
    case RuleReason::AllReduceWorldSize: return "no fused AllReduce beyond 4 ranks (not measured there)";
    default: return "the model";
  }
}

}  // namespace rs
}  // namespace mkccl
