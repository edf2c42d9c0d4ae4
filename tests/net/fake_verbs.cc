#include "fake_verbs.h"
#include <errno.h>
#include <string.h>
#include <algorithm>
#include "base/log.h"

namespace mkccl {
namespace test {

FakeVerbs::~FakeVerbs() {
  std::lock_guard<std::mutex> lock(f_->m);
  for (auto& q : qps_) f_->qps.erase(q->qpn);
}

mkcclResult_t FakeVerbs::open(const std::string& device, int port, ib::PortInfo* out) {
  if (!device.empty() && device != name_) return setError(mkcclSystemError, "fake: no device %s", device.c_str());
  if (port != 1) return setError(mkcclSystemError, "fake: no port %d", port);
  std::lock_guard<std::mutex> lock(f_->m);
  out->lid = f_->nextLid++;
  out->mtu = 5;
  out->ethernet = false;
  opened_ = true;
  return mkcclSuccess;
}

mkcclResult_t FakeVerbs::regMr(void* addr, uint64_t bytes, bool, ib::Mr* out, const char** how) {
  if (!opened_) return setError(mkcclSystemError, "fake: regMr before open");
  std::lock_guard<std::mutex> lock(f_->m);
  const uint32_t key = f_->nextKey++;
  f_->regions[key] = FakeFabric::Region{(char*)addr, bytes, true};
  out->handle = (void*)(uintptr_t)key;
  out->lkey = out->rkey = key;
  *how = "fake registration";
  return mkcclSuccess;
}

void FakeVerbs::deregMr(ib::Mr* mr) {
  if (!mr->handle) return;
  std::lock_guard<std::mutex> lock(f_->m);
  f_->regions[mr->lkey].valid = false;
  mr->handle = nullptr;
}

mkcclResult_t FakeVerbs::createCq(int depth) {
  cqDepth_ = depth;
  return mkcclSuccess;
}

mkcclResult_t FakeVerbs::createQp(int sqDepth, int maxInline, void** qp, uint32_t* qpn) {
  if (cqDepth_ == 0) return setError(mkcclSystemError, "fake: QP before CQ");
  std::lock_guard<std::mutex> lock(f_->m);
  auto q = std::make_unique<FakeQp>();
  q->qpn = f_->nextQpn++;
  q->sqDepth = sqDepth;
  q->maxInline = maxInline;
  q->owner = this;
  f_->qps[q->qpn] = q.get();
  *qp = q.get();
  *qpn = q->qpn;
  qps_.push_back(std::move(q));
  return mkcclSuccess;
}

void FakeVerbs::destroyQp(void* qp) {
  std::lock_guard<std::mutex> lock(f_->m);
  FakeQp* q = (FakeQp*)qp;
  f_->qps.erase(q->qpn);
  q->state = FakeQp::kError;
}

static const char* stateName(int s) {
  static const char* n[] = {"RESET", "INIT", "RTR", "RTS", "ERROR"};
  return n[s];
}

mkcclResult_t FakeVerbs::toInit(void* qp) {
  FakeQp* q = (FakeQp*)qp;
  if (q->state != FakeQp::kReset)
    return setError(mkcclSystemError, "fake: QP %u: %s -> INIT is not allowed", q->qpn, stateName(q->state));
  q->state = FakeQp::kInit;
  ++transitions;
  return mkcclSuccess;
}

mkcclResult_t FakeVerbs::toRtr(void* qp, const ib::QpRemote& r) {
  FakeQp* q = (FakeQp*)qp;
  if (q->state != FakeQp::kInit)
    return setError(mkcclSystemError, "fake: QP %u: %s -> RTR is not allowed", q->qpn, stateName(q->state));
  if (r.qpn == 0 || r.mtu < 1 || r.mtu > 5) return setError(mkcclSystemError, "fake: RTR with qpn %u mtu %d", r.qpn, r.mtu);
  q->remoteQpn = r.qpn;
  q->state = FakeQp::kRtr;
  ++transitions;
  return mkcclSuccess;
}

mkcclResult_t FakeVerbs::toRts(void* qp, uint32_t) {
  FakeQp* q = (FakeQp*)qp;
  if (q->state != FakeQp::kRtr)
    return setError(mkcclSystemError, "fake: QP %u: %s -> RTS is not allowed", q->qpn, stateName(q->state));
  q->state = FakeQp::kRts;
  ++transitions;
  return mkcclSuccess;
}

int FakeVerbs::postSend(void* qp, const ib::SendWr* wrs, int n) {
  FakeQp* q = (FakeQp*)qp;
  std::lock_guard<std::mutex> lock(f_->m);
  ++postCalls;
  if (q->state != FakeQp::kRts && q->state != FakeQp::kError) return EINVAL;
  if (q->outstanding + n > q->sqDepth) {
    ++rejectedFull;
    return ENOMEM;
  }
  maxChain = std::max(maxChain, n);
  for (int i = 0; i < n; ++i) {
    const ib::SendWr& w = wrs[i];
    ++wrsPosted;
    ++q->outstanding;
    ++q->sinceSignal;
    maxOutstanding = std::max(maxOutstanding, q->outstanding);
    int status = kWcSuccess;
    if (q->state == FakeQp::kError) {
      status = kWcFlushErr;
    } else if (++f_->wrsSeen == f_->failWrAt) {
      status = kWcRemAccessErr;
    } else {
      auto rq = f_->qps.find(q->remoteQpn);
      auto rr = f_->regions.find(w.rkey);
      const char* src = (const char*)(uintptr_t)w.localAddr;
      if (rq == f_->qps.end() || (rq->second->state != FakeQp::kRtr && rq->second->state != FakeQp::kRts)) {
        status = kWcRetryExcErr;  // nobody answers: the transport retries, then gives up
      } else if (rr == f_->regions.end() || !rr->second.valid || w.remoteAddr < (uint64_t)(uintptr_t)rr->second.base ||
                 w.remoteAddr + w.length > (uint64_t)(uintptr_t)rr->second.base + rr->second.bytes) {
        status = kWcRemAccessErr;
      } else if (w.inlineData ? (int)w.length > q->maxInline : f_->regions.count(w.lkey) == 0) {
        status = kWcLocProtErr;
      } else {
        memcpy((void*)(uintptr_t)w.remoteAddr, src, w.length);
      }
    }
    if (status != kWcSuccess) q->state = FakeQp::kError;
    // RC: only signalled WRs complete, unless the QP is in error (every WR completes flushed).
    if (w.signaled || status != kWcSuccess) {
      ib::Wc wc;
      wc.wrId = w.wrId;
      wc.status = status;
      wc.qpn = q->qpn;
      q->done.push_back(FakeQp::Done{wc, q->sinceSignal});
      q->sinceSignal = 0;
      if (w.signaled) ++signalled;
    }
  }
  return 0;
}

int FakeVerbs::pollCq(ib::Wc* wc, int n) {
  std::lock_guard<std::mutex> lock(f_->m);
  if (holdPolls > 0 && (++polls_ % holdPolls) != 0) return 0;
  // Any QP's oldest completion, picked at random: in order per QP, interleaved across QPs.
  int got = 0;
  while (got < n) {
    std::vector<FakeQp*> ready;
    for (auto& q : qps_)
      if (!q->done.empty()) ready.push_back(q.get());
    if (ready.empty()) break;
    FakeQp* q = ready[rng_() % ready.size()];
    wc[got++] = q->done.front().wc;
    q->outstanding -= q->done.front().retires;
    q->done.pop_front();
  }
  return got;
}

const char* FakeVerbs::statusString(int s) {
  switch (s) {
    case kWcSuccess: return "success";
    case kWcLocProtErr: return "local protection error";
    case kWcFlushErr: return "work request flushed error";
    case kWcRemAccessErr: return "remote access error";
    case kWcRetryExcErr: return "transport retry counter exceeded";
    default: return "unknown";
  }
}

}  // namespace test
}  // namespace mkccl
