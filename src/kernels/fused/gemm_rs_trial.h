// GEMM+RS/AR: the auto plan checked by timing. The model (gemm_rs_plan.cu) guesses; on the first
// calls of a shape the op runs both plans in turn, the model's first, times them with CUDA events,
// and then every rank keeps the plan that was faster on the slowest rank (each plan's best call:
// the first call of a plan may carry a module load or a scratch growth).
//
// Unlike AllGather+GEMM's trial, ranks must agree: the fused kernel waits for flags the sequential
// plan never raises. So the decision is collective: once all trial calls of the shape are out,
// the next call waits for their times and exchanges them over the bootstrap (every rank makes the
// same calls in the same order, so every rank reaches that point on the same call), and every rank
// applies the same rule to the same numbers. Host logic without CUDA calls (the op owns the events
// and the exchange), so that the CPU tests drive it.
#pragma once
#include <cmath>
#include <limits>

namespace mkccl {
namespace rs {

class PlanTrial {
 public:
  static constexpr int kCallsPerPlan = 3;
  static constexpr int kCalls = 2 * kCallsPerPlan;
  // The other plan must be this much faster to replace the model's choice (noise between calls).
  static constexpr double kMargin = 0.97;

  explicit PlanTrial(bool modelFused = false) : model_(modelFused) {}

  bool decided() const { return decided_ >= 0; }
  bool modelFused() const { return model_; }
  // All trial calls are out: the next call decides (after their times are in) before it runs.
  bool readyToDecide() const { return decided_ < 0 && launched_ >= kCalls; }
  // The plan of the next call (true: fused) and, while undecided, the trial call's number.
  bool next(int* index) const {
    *index = -1;
    if (decided_ >= 0) return decided_ == 1;
    if (launched_ >= kCalls) return model_;
    *index = launched_;
    return fusedAt(launched_);
  }
  void launched() { ++launched_; }
  bool fusedAt(int i) const { return i % 2 == 0 ? model_ : !model_; }

  // This rank's trial call i took us microseconds (not finite: unknown).
  void record(int i, double us) {
    if (i < 0 || i >= kCalls || !(us >= 0) || !std::isfinite(us)) return;
    double& b = best_[fusedAt(i) ? 1 : 0];
    if (us < b) b = us;
  }
  // What this rank contributes to the exchange: {best sequential, best fused} (infinity: none).
  void local(double out[2]) const {
    out[0] = best_[0];
    out[1] = best_[1];
  }
  // Every rank's contribution (nranks pairs, as local() fills them) -> the same choice everywhere:
  // the slowest rank's best call of each plan; the model's plan unless the other is faster by the
  // margin, or unless a time is missing.
  void decide(const double* all, int nranks) {
    double worst[2] = {0, 0};
    bool complete = nranks > 0;
    for (int r = 0; r < nranks; ++r)
      for (int p = 0; p < 2; ++p) {
        const double v = all[2 * r + p];
        if (!std::isfinite(v)) complete = false;
        else if (v > worst[p]) worst[p] = v;
      }
    worst_[0] = worst[0];
    worst_[1] = worst[1];
    const int model = model_ ? 1 : 0;
    decided_ = complete && worst[1 - model] < worst[model] * kMargin ? 1 - model : model;
  }
  // The exchange failed: keep the model's choice.
  void giveUp() {
    if (decided_ < 0) decided_ = model_ ? 1 : 0;
  }
  bool choice() const { return decided_ >= 0 ? decided_ == 1 : model_; }
  // The slowest rank's best time of each plan (after decide).
  double worst(bool fused) const { return worst_[fused ? 1 : 0]; }

 private:
  bool model_;
  int launched_ = 0, decided_ = -1;
  double best_[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  double worst_[2] = {0, 0};
};

}  // namespace rs
}  // namespace mkccl
