// What the ops keep per communicator: the tuner's overrides and the plans made so far, one cache
// per op (plans are made on a shape's first call, logged once at INFO, and reused).
#pragma once
#include <stdint.h>
#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>
#include "ops/tuner/tuning.h"
#include "runtime/comm.h"

namespace mkccl {

enum class OpKind : int { AllGatherGemm = 0, GemmReduceScatter, GemmAllReduce, Count };

struct OpState {
  Tuning tuning;
  std::mutex mu;  // the plan caches (the ranks of one process plan at once, each on its own comm)
  std::shared_ptr<void> caches[static_cast<int>(OpKind::Count)];
};

// The communicator's op state (made at init).
inline OpState& opState(const mkcclComm* comm) { return *comm->ops; }
inline const Tuning& tuningOf(const mkcclComm* comm) { return comm->ops->tuning; }

// A per-communicator cache of plans by key (a struct compared with ==), the least recently used
// dropped beyond kMaxShapes. Lookups and inserts under OpState::mu.
template <class Key, class Plan>
class PlanCache {
 public:
  static constexpr size_t kMaxShapes = 64;
  // The cache of `kind` in the comm's state (made on first use).
  static PlanCache& of(OpState& s, OpKind kind) {
    std::shared_ptr<void>& p = s.caches[static_cast<int>(kind)];
    if (!p) p = std::make_shared<PlanCache>();
    return *static_cast<PlanCache*>(p.get());
  }
  Plan* find(const Key& k) {
    for (Entry& e : entries_)
      if (e.key == k) {
        e.lastUse = ++use_;
        return &e.plan;
      }
    return nullptr;
  }
  Plan* insert(const Key& k, const Plan& plan) {
    Entry e{k, plan, ++use_};
    if (entries_.size() < kMaxShapes) {
      entries_.push_back(e);
      return &entries_.back().plan;
    }
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; });
    *lru = e;
    return &lru->plan;
  }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    Key key;
    Plan plan;
    uint64_t lastUse;
  };
  std::vector<Entry> entries_;
  uint64_t use_ = 0;
};

}  // namespace mkccl
