// An in-process stand-in for RDMA NICs behind the ib transport's Verbs interface: RC QPs that
// enforce the RESET->INIT->RTR->RTS state machine and the send-queue depth, RDMA WRITEs that check
// keys and bounds and copy at once, completions as real RC gives them (only signalled WRs, in
// order per QP; after an error every WR completes flushed), and knobs to inject failures.
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>
#include "transport/ib/verbs.h"

namespace mkccl {
namespace test {

enum FakeStatus { kWcSuccess = 0, kWcLocProtErr = 4, kWcFlushErr = 5, kWcRemAccessErr = 10, kWcRetryExcErr = 12 };

class FakeVerbs;

struct FakeFabric {
  struct Region {
    char* base;
    uint64_t bytes;
    bool valid;
  };
  std::mutex m;
  std::map<uint32_t, Region> regions;  // by key (lkey == rkey here)
  std::map<uint32_t, struct FakeQp*> qps;
  uint32_t nextQpn = 0x100, nextKey = 0x10;
  uint16_t nextLid = 1;
  int failWrAt = -1;  // the n-th WR posted anywhere completes with a remote access error
  int wrsSeen = 0;
};

struct FakeQp {
  enum State { kReset, kInit, kRtr, kRts, kError } state = kReset;
  uint32_t qpn = 0, remoteQpn = 0;
  int sqDepth = 0, maxInline = 0;
  int outstanding = 0;   // posted WRs not yet retired by a polled completion
  int sinceSignal = 0;   // WRs since the last signalled one
  FakeVerbs* owner = nullptr;
  struct Done {
    ib::Wc wc;
    int retires;
  };
  std::deque<Done> done;  // completions not yet polled, in order
};

class FakeVerbs final : public ib::Verbs {
 public:
  explicit FakeVerbs(FakeFabric* f, std::string name = "fake0") : f_(f), name_(std::move(name)) {}
  ~FakeVerbs() override;
  mkcclResult_t open(const std::string& device, int port, ib::PortInfo* out) override;
  std::string deviceName() const override { return name_; }
  mkcclResult_t regMr(void* addr, uint64_t bytes, bool device, ib::Mr* out, const char** how) override;
  void deregMr(ib::Mr* mr) override;
  mkcclResult_t createCq(int depth) override;
  mkcclResult_t createQp(int sqDepth, int maxInline, void** qp, uint32_t* qpn) override;
  void destroyQp(void* qp) override;
  mkcclResult_t toInit(void* qp) override;
  mkcclResult_t toRtr(void* qp, const ib::QpRemote& remote) override;
  mkcclResult_t toRts(void* qp, uint32_t psn) override;
  int postSend(void* qp, const ib::SendWr* wrs, int n) override;
  int pollCq(ib::Wc* wc, int n) override;
  const char* statusString(int status) override;

  // What the tests check.
  int postCalls = 0, wrsPosted = 0, signalled = 0, maxChain = 0, maxOutstanding = 0, rejectedFull = 0;
  int transitions = 0;
  int holdPolls = 0;  // completions are released only every holdPolls-th poll (late completions)

 private:
  FakeFabric* f_;
  std::string name_;
  bool opened_ = false;
  int cqDepth_ = 0;
  int polls_ = 0;
  std::vector<std::unique_ptr<FakeQp>> qps_;
  std::mt19937 rng_{12345};
};

}  // namespace test
}  // namespace mkccl
