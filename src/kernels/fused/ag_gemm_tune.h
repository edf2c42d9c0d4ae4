// AllGather+GEMM: the choice between the fused and the sequential plan, checked by timing. The
// model (ag_gemm_model.cuh) guesses; on the first calls of a shape the op runs both plans in
// turn, the model's first, times them with CUDA events, and keeps the faster (by each plan's best
// call: the first call of a plan may carry a module load or a region growth). Host code without
// CUDA calls (the op owns the events), so that the CPU tests drive it.
//
// Ranks decide on their own: both plans share the layout and the protocol, so ranks that keep
// different plans still agree (only speed is at stake), and every rank sees about the same times
// (a call ends on each rank only once every peer's rows arrived).
#pragma once
#include <limits>

namespace mkccl {
namespace ag {

class PlanTrial {
 public:
  static constexpr int kCallsPerPlan = 3;
  static constexpr int kCalls = 2 * kCallsPerPlan;
  // The other plan must be this much faster to replace the model's choice (noise between calls).
  // Ranks decide alone, so near ties can leave them on different plans (a mix ran 2.8x slower at
  // 2048x8192x8192, ws = 4, once in five runs). A 15% margin was tried to rule that out and
  // measured worse (4xH200, two runs each: auto at 8192x2048x8192 / 2048x8192x8192 655 / 437 us
  // with 0.97, 690-655 / 517-670 with 0.85: the model's fused plan is often the wrong one to keep).
  static constexpr double kMargin = 0.97;

  // plan: 0 fused, 1 sequential.
  explicit PlanTrial(int modelPlan = 0, double margin = kMargin) : model_(modelPlan), margin_(margin) {}

  bool decided() const { return decided_ >= 0; }
  int modelPlan() const { return model_; }
  // The plan for the next call, and whether that call is a trial call (to be timed and reported
  // with record(index)); index: the trial call's number.
  int next(bool* trial, int* index) const {
    *trial = false;
    *index = -1;
    if (decided_ >= 0) return decided_;
    if (launched_ >= kCalls) return model_;  // every trial call is out; waiting for their times
    *trial = true;
    *index = launched_;
    return planOf(launched_);
  }
  void launched() { ++launched_; }
  // Trial call i took us microseconds (reported in any order). Decides when all are in.
  void record(int i, double us) {
    if (decided_ >= 0 || i < 0 || i >= kCalls) return;
    const int p = planOf(i);
    if (us < best_[p]) best_[p] = us;
    if (++recorded_ == kCalls) decided_ = best_[1 - model_] < best_[model_] * margin_ ? 1 - model_ : model_;
  }
  // Timing failed (an event error): keep the model's choice.
  void giveUp() {
    if (decided_ < 0) decided_ = model_;
  }
  int choice() const { return decided_ >= 0 ? decided_ : model_; }
  double best(int plan) const { return best_[plan]; }

 private:
  int planOf(int i) const { return i % 2 == 0 ? model_ : 1 - model_; }

  int model_;
  double margin_;
  int launched_ = 0, recorded_ = 0, decided_ = -1;
  double best_[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
};

}  // namespace ag
}  // namespace mkccl
