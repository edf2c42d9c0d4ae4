// The proxy thread (see proxy.h).
#include "runtime/proxy.h"
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include "base/check.h"
#include "base/log.h"

namespace mkccl {

mkcclResult_t MemcpyStager::copy(bool toHost, uint64_t off, uint64_t bytes, uint64_t* ticket) {
  if (toHost) memcpy(mirror_ + off, window_ + off, bytes);
  else memcpy(window_ + off, mirror_ + off, bytes);
  *ticket = issued_[toHost ? 1 : 0]++;
  return mkcclSuccess;
}

Proxy::Proxy(const ProxyOptions& o, FifoReader* fifo, net::Transport* transport, ProxyErrorSink sink)
    : o_(o), fifo_(fifo), t_(transport), sink_(std::move(sink)) {
  transportWritesFlags_ = t_->caps().writesFlags;
  queued_.resize(o_.nranks);
  sendClock_.assign(o_.nranks, 0);
  recvClock_.assign(o_.nranks, 0);
  shadow_.assign((size_t)o_.nranks * o_.flagsPerPeer, 0);
}

Proxy::~Proxy() {
  if (thread_.joinable()) stop(o_.timeoutMs);
}

mkcclResult_t Proxy::start() {
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::exception& e) {
    return setError(mkcclSystemError, "proxy: cannot start its thread: %s", e.what());
  }
  return mkcclSuccess;
}

bool Proxy::stop(int timeoutMs) {
  if (!thread_.joinable()) return true;
  stop_.store(true);
  std::unique_lock<std::mutex> lock(exitMutex_);
  if (!exitCv_.wait_for(lock, std::chrono::milliseconds(timeoutMs), [this] { return exited_; })) {
    lock.unlock();
    MKCCL_WARN("rank %d: the proxy thread did not stop within %d ms; leaving it behind", o_.rank, timeoutMs);
    thread_.detach();
    return false;
  }
  lock.unlock();
  thread_.join();
  return true;
}

void Proxy::loop() {
  setLogRank(o_.rank);
  if (!o_.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : o_.cpus)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0) MKCCL_WARN("rank %d: cannot pin the proxy thread to its %zu CPUs: %s", o_.rank, o_.cpus.size(), strerror(rc));
  }
  MKCCL_TRACE("proxy: thread running (rank %d of %d, %s, %s)", o_.rank, o_.nranks,
              o_.stager ? "staging through host memory" : "no staging", t_->name());
  unsigned idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (progress()) {
      idle = 0;
      continue;
    }
    // Spin while work is likely to come; then give the core away (CI machines have two).
    ++idle;
    if (idle < 256) continue;
    if (idle < 2048) sched_yield();
    else usleep(failed_.load() ? 1000 : 20);
  }
  MKCCL_TRACE("proxy: thread stopping; %s", describe().c_str());
  std::lock_guard<std::mutex> lock(exitMutex_);
  exited_ = true;
  exitCv_.notify_all();
}

void Proxy::fail(mkcclResult_t res, const std::string& msg) {
  if (failed_.exchange(true)) return;
  MKCCL_TRACE("proxy: failed (result %d): %s; state: %s", (int)res, msg.c_str(), describe().c_str());
  {
    std::lock_guard<std::mutex> lock(failMutex_);
    failMsg_ = msg;
  }
  fifo_->fail(res);  // producers waiting for room or completions give up
  if (sink_) sink_(res, msg);
}

std::string Proxy::describe() const {
  auto u = [](const std::atomic<uint64_t>& a) { return (unsigned long long)a.load(std::memory_order_relaxed); };
  const bool staged = o_.stager != nullptr;
  char out[96] = "", in[96] = "";
  if (staged) {
    snprintf(out, sizeof(out), " %llu staged out,", u(st_.stagedOut));
    snprintf(in, sizeof(in), " %llu staged in,", u(st_.stagedIn));
  }
  const uint64_t idx = st_.lastFlagIdx.load(), fpp = o_.flagsPerPeer > 0 ? (uint64_t)o_.flagsPerPeer : 1;
  char buf[512];
  snprintf(buf, sizeof(buf),
           "FIFO: %llu commands consumed (tail %llu, done %llu); puts: %llu seen,%s %llu posted in %llu calls, %llu "
           "completed; arrivals: %llu received,%s %llu flags raised (last: from rank %llu, flag %llu = %llu)",
           u(st_.commands), u(fifoTail_), u(fifoDone_), u(st_.puts), out, u(st_.posted), u(st_.postCalls),
           u(st_.sendDone), u(st_.arrivals), in, u(st_.flagsRaised), (unsigned long long)(idx / fpp),
           (unsigned long long)(idx % fpp), u(st_.lastFlagValue));
  std::string r = buf;
  if (failed_.load()) {
    std::lock_guard<std::mutex> lock(failMutex_);
    if (!failMsg_.empty()) r += "; failed: " + failMsg_;
  }
  return r;
}

bool Proxy::progress() {
  if (failed_.load()) return false;
  bool did = consume();
  did |= drainStaging();
  did |= postQueued();
  did |= reap();
  did |= drainStaging();
  if ((++rounds_ & 255) == 0) checkTimeouts();
  return did;
}

bool Proxy::consume() {
  const int room = o_.maxInFlight - (int)inFlight_.size();
  if (room <= 0) return false;  // back-pressure: the FIFO fills, producers wait (bounded)
  FifoCmd cmds[64];
  uint64_t first = 0;
  const int n = fifo_->poll(cmds, std::min(room, 64), &first);
  if (n > 0) {
    st_.commands.fetch_add((uint64_t)n, std::memory_order_relaxed);
    fifoTail_.store(fifo_->tail(), std::memory_order_relaxed);
  }
  for (int i = 0; i < n && !failed_.load(); ++i) {
    const FifoCmd& c = cmds[i];
    const uint64_t ticket = first + i;
    const uint32_t op = fifoOp(c.hdr);
    MKCCL_TRACE("proxy: command %llu seen: op %u peer %u flag %u value 0x%x, [%llu, +%llu) -> [%llu, ...)",
                (unsigned long long)ticket, op, fifoPeer(c.hdr), fifoFlag(c.hdr), fifoValue(c.hdr),
                (unsigned long long)c.srcOff, (unsigned long long)c.bytes, (unsigned long long)c.dstOff);
    if (op == kFifoNop) {
      fifo_->complete(ticket);
      fifoDone_.store(fifo_->done(), std::memory_order_relaxed);
      continue;
    }
    if (op != kFifoPut) {
      char msg[160];
      snprintf(msg, sizeof(msg), "rank %d: FIFO command %llu has unknown type %u (header 0x%016llx)", o_.rank,
               (unsigned long long)ticket, op, (unsigned long long)c.hdr);
      fail(mkcclInternalError, msg);
      return true;
    }
    net::PutOp p;
    p.peer = (int)fifoPeer(c.hdr);
    p.flag = fifoFlag(c.hdr);
    p.srcOff = c.srcOff;
    p.dstOff = c.dstOff;
    p.bytes = c.bytes;
    p.cookie = ticket;
    const uint64_t W = o_.windowBytes;
    if (p.peer >= o_.nranks || p.peer == o_.rank || (int)p.flag >= o_.flagsPerPeer || p.srcOff > W ||
        p.bytes > W - p.srcOff || p.dstOff > W || p.bytes > W - p.dstOff) {
      char msg[320];
      snprintf(msg, sizeof(msg),
               "rank %d: a kernel pushed an invalid put (command %llu): to rank %d of %d, flag %u of %d, [%llu, +%llu) "
               "-> [%llu, +%llu) in a %llu-byte window",
               o_.rank, (unsigned long long)ticket, p.peer, o_.nranks, p.flag, o_.flagsPerPeer,
               (unsigned long long)p.srcOff, (unsigned long long)p.bytes, (unsigned long long)p.dstOff,
               (unsigned long long)p.bytes, (unsigned long long)W);
      fail(mkcclInvalidUsage, msg);
      return true;
    }
    p.value = net::extendValue(sendClock_[p.peer], fifoValue(c.hdr), 32);
    sendClock_[p.peer] = std::max(sendClock_[p.peer], p.value);
    inFlight_[ticket] = InFlight{p.peer, p.bytes, std::chrono::steady_clock::now()};
    st_.puts.fetch_add(1, std::memory_order_relaxed);
    if (o_.stager && p.bytes > 0) {
      Staged s;
      s.op = p;
      mkcclResult_t r = o_.stager->copy(true, p.srcOff, p.bytes, &s.ticket);
      if (r != mkcclSuccess) {
        fail(r, std::string("rank ") + std::to_string(o_.rank) + ": staging a put failed: " + lastError());
        return true;
      }
      stageOut_.push_back(s);
    } else {
      if (queued_[p.peer].empty()) busyPeers_.push_back(p.peer);
      queued_[p.peer].push_back(p);
    }
  }
  return n > 0;
}

bool Proxy::drainStaging() {
  bool did = false;
  uint64_t doneOut = 0, doneIn = 0;
  if (!stageOut_.empty()) {
    if (o_.stager->completed(true, &doneOut) != mkcclSuccess) {
      fail(mkcclUnhandledCudaError, std::string("rank ") + std::to_string(o_.rank) + ": staging copy failed: " + lastError());
      return true;
    }
    while (!stageOut_.empty() && stageOut_.front().ticket < doneOut) {
      const net::PutOp& p = stageOut_.front().op;
      MKCCL_TRACE("proxy: command %llu staged out (%llu bytes)", (unsigned long long)p.cookie,
                  (unsigned long long)p.bytes);
      st_.stagedOut.fetch_add(1, std::memory_order_relaxed);
      if (queued_[p.peer].empty()) busyPeers_.push_back(p.peer);
      queued_[p.peer].push_back(p);
      stageOut_.pop_front();
      did = true;
    }
  }
  if (!stageIn_.empty()) {
    if (o_.stager->completed(false, &doneIn) != mkcclSuccess) {
      fail(mkcclUnhandledCudaError, std::string("rank ") + std::to_string(o_.rank) + ": staging copy failed: " + lastError());
      return true;
    }
    while (!stageIn_.empty() && stageIn_.front().ticket < doneIn) {
      st_.stagedIn.fetch_add(1, std::memory_order_relaxed);
      raiseFlag(stageIn_.front().ev);
      stageIn_.pop_front();
      did = true;
    }
  }
  return did;
}

bool Proxy::postQueued() {
  bool did = false;
  for (size_t i = 0; i < busyPeers_.size() && !failed_.load();) {
    const int peer = busyPeers_[i];
    auto& q = queued_[peer];
    int taken = 0;
    mkcclResult_t r = t_->post(peer, q.data(), (int)q.size(), &taken);
    st_.postCalls.fetch_add(1, std::memory_order_relaxed);
    if (r != mkcclSuccess) {
      fail(r, std::string("rank ") + std::to_string(o_.rank) + ": " + lastError());
      return true;
    }
    if (taken > 0) {
      st_.posted.fetch_add((uint64_t)taken, std::memory_order_relaxed);
      MKCCL_TRACE("proxy: posted %d of %zu puts to rank %d (commands %llu..%llu)", taken, q.size(), peer,
                  (unsigned long long)q.front().cookie, (unsigned long long)q[taken - 1].cookie);
      q.erase(q.begin(), q.begin() + taken);
      did = true;
    }
    if (q.empty()) {
      busyPeers_[i] = busyPeers_.back();
      busyPeers_.pop_back();
    } else {
      ++i;  // the send queue is full: the rest waits for completions
    }
  }
  return did;
}

void Proxy::raiseFlag(const net::Event& ev) {
  if (ev.peer < 0 || ev.peer >= o_.nranks || (int)ev.flag >= o_.flagsPerPeer) {
    char msg[160];
    snprintf(msg, sizeof(msg), "rank %d: an arrival names flag %u of rank %d (of %d ranks, %d flags each)", o_.rank,
             ev.flag, ev.peer, o_.nranks, o_.flagsPerPeer);
    fail(mkcclRemoteError, msg);
    return;
  }
  const size_t idx = (size_t)ev.peer * o_.flagsPerPeer + ev.flag;
  const uint64_t base = std::max(shadow_[idx], recvClock_[ev.peer]);
  const uint64_t v = net::extendValue(base, ev.value, ev.valueBits);
  recvClock_[ev.peer] = std::max(recvClock_[ev.peer], v);
  if (v <= shadow_[idx]) {  // an older value arriving late: flags only grow
    MKCCL_TRACE("proxy: arrival from rank %d flag %u value %llu is older than %llu: flag left as it is", ev.peer,
                ev.flag, (unsigned long long)v, (unsigned long long)shadow_[idx]);
    return;
  }
  shadow_[idx] = v;
  __atomic_store_n(&o_.flags[idx], v, __ATOMIC_RELEASE);
  st_.lastFlagIdx.store(idx, std::memory_order_relaxed);
  st_.lastFlagValue.store(v, std::memory_order_relaxed);
  st_.flagsRaised.fetch_add(1, std::memory_order_relaxed);
  MKCCL_TRACE("proxy: flag of rank %d #%u raised to %llu", ev.peer, ev.flag, (unsigned long long)v);
}

bool Proxy::reap() {
  events_.clear();
  mkcclResult_t r = t_->poll(&events_);
  if (r != mkcclSuccess) {
    fail(r, std::string("rank ") + std::to_string(o_.rank) + ": " + lastError());
    return true;
  }
  bool flushed = false;
  for (const net::Event& ev : events_) {
    if (failed_.load()) break;
    switch (ev.type) {
      case net::Event::kSendDone:
        MKCCL_TRACE("proxy: command %llu completed (put to rank %d)", (unsigned long long)ev.cookie, ev.peer);
        st_.sendDone.fetch_add(1, std::memory_order_relaxed);
        inFlight_.erase(ev.cookie);
        fifo_->complete(ev.cookie);
        fifoDone_.store(fifo_->done(), std::memory_order_relaxed);
        break;
      case net::Event::kArrival:
        st_.arrivals.fetch_add(1, std::memory_order_relaxed);
        MKCCL_TRACE("proxy: arrival from rank %d flag %u value 0x%llx (%d bits)%s", ev.peer, ev.flag,
                    (unsigned long long)ev.value, ev.valueBits, ev.hasRange ? " with a range" : "");
        if (transportWritesFlags_ || o_.flags == nullptr) break;
        if (o_.stager && ev.hasRange && ev.bytes > 0) {
          Staged s;
          s.ev = ev;
          mkcclResult_t cr = o_.stager->copy(false, ev.dstOff, ev.bytes, &s.ticket);
          if (cr != mkcclSuccess) {
            fail(cr, std::string("rank ") + std::to_string(o_.rank) + ": staging an arrival failed: " + lastError());
            break;
          }
          stageIn_.push_back(s);
        } else {
          if (!flushed && o_.flushRemoteWrites) {
            mkcclResult_t fr = o_.flushRemoteWrites();
            if (fr != mkcclSuccess) {
              fail(fr, std::string("rank ") + std::to_string(o_.rank) + ": " + lastError());
              break;
            }
            flushed = true;
          }
          raiseFlag(ev);
        }
        break;
      case net::Event::kError:
        fail(ev.error, "rank " + std::to_string(o_.rank) + ": " + ev.message);
        break;
    }
  }
  return !events_.empty();
}

void Proxy::checkTimeouts() {
  if (o_.deviceError && !deviceErrorLogged_ && *o_.deviceError != 0) {
    deviceErrorLogged_ = true;
    MKCCL_WARN("rank %d: a kernel gave up a wait (device error %d); the network path so far: %s", o_.rank,
               *o_.deviceError, describe().c_str());
  }
  if (inFlight_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& kv : inFlight_) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - kv.second.since).count();
    if (ms > o_.timeoutMs) {
      char msg[256];
      snprintf(msg, sizeof(msg),
               "rank %d: a put of %llu bytes to rank %d (command %llu) did not complete within %d ms: is rank %d alive "
               "and reachable?",
               o_.rank, (unsigned long long)kv.second.bytes, kv.second.peer, (unsigned long long)kv.first, o_.timeoutMs,
               kv.second.peer);
      fail(mkcclTimeout, std::string(msg) + " [" + describe() + "]");
      return;
    }
  }
}

}  // namespace mkccl
