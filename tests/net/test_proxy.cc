// The proxy thread between a CPU producer and an in-process transport double: data and flags,
// batching, staging, back-pressure, errors releasing the producer, timeouts, shutdown.
#include <gtest/gtest.h>
#include <string.h>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>
#include "cpu_producer.h"
#include "runtime/proxy.h"

using namespace mkccl;
using namespace mkccl::test;

namespace {

uint64_t seed() {
  static const uint64_t s = std::random_device{}() ^ (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  return s;
}

class LoopTransport;
struct LoopWire {
  std::mutex m;
  LoopTransport* ends[2] = {nullptr, nullptr};
};

// Two ranks in one process: a put lands at once; its completion and the arrival come back later,
// in random order. Knobs inject failures.
class LoopTransport final : public net::Transport {
 public:
  LoopTransport(int rank, LoopWire* w) : rank_(rank), w_(w), rng_(seed() + rank) { w->ends[rank] = this; }
  const char* name() const override { return "loop"; }
  net::Caps caps() const override { return net::Caps{false, false, 32}; }
  mkcclResult_t setup(const net::Setup& s) override {
    s_ = s;
    return mkcclSuccess;
  }
  mkcclResult_t connData(int, std::vector<uint8_t>* out) override {
    out->assign(1, 0);
    return mkcclSuccess;
  }
  mkcclResult_t connect(int, const void*, size_t) override { return mkcclSuccess; }
  mkcclResult_t post(int peer, const net::PutOp* ops, int n, int* taken) override {
    std::lock_guard<std::mutex> lock(w_->m);
    ++postCalls;
    *taken = 0;
    LoopTransport* other = w_->ends[peer];
    for (int i = 0; i < n && (int)pending_.size() < maxPending; ++i) {
      const net::PutOp& o = ops[i];
      if (++puts == failAt) {
        net::Event e;
        e.type = net::Event::kError;
        e.peer = peer;
        e.error = mkcclRemoteError;
        e.message = "loop: injected failure";
        inbox_.push_back(e);
      } else if (!swallow) {
        memcpy((char*)other->s_.window.base + o.dstOff, (char*)s_.window.base + o.srcOff, o.bytes);
        net::Event a;
        a.type = net::Event::kArrival;
        a.peer = rank_;
        a.flag = o.flag;
        if (other->s_.wantRanges) {
          a.value = o.value;
          a.valueBits = 64;
          a.hasRange = true;
          a.dstOff = o.dstOff;
          a.bytes = o.bytes;
        } else {
          a.value = o.value & 0xffffffffull;
          a.valueBits = 32;
        }
        other->inbox_.push_back(a);
        pending_.push_back(o);
      }
      ++*taken;
    }
    return mkcclSuccess;
  }
  mkcclResult_t poll(std::vector<net::Event>* ev) override {
    std::lock_guard<std::mutex> lock(w_->m);
    std::shuffle(pending_.begin(), pending_.end(), rng_);
    const size_t k = pending_.empty() ? 0 : 1 + rng_() % pending_.size();
    for (size_t i = 0; i < k; ++i) {
      net::Event e;
      e.type = net::Event::kSendDone;
      e.cookie = pending_.back().cookie;
      ev->push_back(e);
      pending_.pop_back();
    }
    std::shuffle(inbox_.begin(), inbox_.end(), rng_);
    ev->insert(ev->end(), inbox_.begin(), inbox_.end());
    inbox_.clear();
    return mkcclSuccess;
  }

  int maxPending = 64;
  int failAt = -1;
  bool swallow = false;
  int postCalls = 0, puts = 0;

 private:
  int rank_;
  LoopWire* w_;
  net::Setup s_;
  std::mt19937_64 rng_;
  std::vector<net::PutOp> pending_;
  std::vector<net::Event> inbox_;
};

constexpr int kFlags = 64;

struct Rank {
  Rank(int r, LoopWire* w, uint64_t windowBytes, bool staged)
      : rank(r), fifo(64), t(r, w), window(windowBytes), mirror(staged ? windowBytes : 0), flags(2 * kFlags, 0) {
    reader.init(fifo.slots.get(), fifo.ctl.get(), fifo.size);
    net::Setup s;
    s.rank = r;
    s.nranks = 2;
    s.window = net::Memory{staged ? mirror.data() : window.data(), windowBytes, false, -1};
    s.wantRanges = staged;
    t.setup(s);
    if (staged) stager.reset(new MemcpyStager(window.data(), mirror.data()));
    ProxyOptions o;
    o.rank = r;
    o.nranks = 2;
    o.flagsPerPeer = kFlags;
    o.timeoutMs = 5000;
    o.windowBytes = windowBytes;
    o.flags = flags.data();
    o.stager = stager.get();
    o.maxInFlight = 256;
    proxy.reset(new Proxy(o, &reader, &t, [this](mkcclResult_t res, const std::string& msg) {
      std::lock_guard<std::mutex> lock(m);
      errors.push_back(res);
      messages.push_back(msg);
    }));
  }
  int rank;
  CpuFifo fifo;
  FifoReader reader;
  LoopTransport t;
  std::vector<char> window, mirror;
  std::vector<uint64_t> flags;
  std::unique_ptr<MemcpyStager> stager;
  std::unique_ptr<Proxy> proxy;
  std::mutex m;
  std::vector<mkcclResult_t> errors;
  std::vector<std::string> messages;
};

// Both ranks push many puts of random sizes to each other; every byte and every flag arrives.
void exchangeManyPuts(bool staged) {
  LoopWire w;
  constexpr uint64_t kWindow = 4 << 20, kHalf = kWindow / 2;
  Rank a(0, &w, kWindow, staged), b(1, &w, kWindow, staged);
  Rank* ranks[2] = {&a, &b};
  std::mt19937_64 rng(seed());
  for (Rank* r : ranks)
    for (auto& c : r->window) c = (char)rng();
  // Sources in the lower half of each window, destinations in the upper half.
  std::vector<char> ref[2] = {std::vector<char>(a.window.begin(), a.window.begin() + kHalf),
                              std::vector<char>(b.window.begin(), b.window.begin() + kHalf)};
  ASSERT_EQ(a.proxy->start(), mkcclSuccess);
  ASSERT_EQ(b.proxy->start(), mkcclSuccess);
  constexpr int kPuts = 3000;
  std::vector<uint64_t> lastValue[2] = {std::vector<uint64_t>(kFlags, 0), std::vector<uint64_t>(kFlags, 0)};
  std::vector<std::thread> producers;
  std::atomic<int> bad{0};
  for (int r = 0; r < 2; ++r)
    producers.emplace_back([&, r] {
      std::mt19937_64 g(seed() * 31 + r);
      uint64_t t = 0;
      for (int i = 0; i < kPuts; ++i) {
        // Chunk i of kPuts covers [i*chunk, ...) so destinations never overlap; value increases.
        const uint64_t chunk = kHalf / kPuts, off = i * chunk, bytes = 1 + g() % chunk;
        const uint32_t flag = 1 + i % (kFlags - 1);
        const uint64_t value = (uint64_t)(i + 1) << 8;
        lastValue[r][flag] = value;
        if (cpuFifoPush(ranks[r]->fifo.dev(), fifoHeader(kFifoPut, 1 - r, flag, value), off, kHalf + off, bytes, 10000,
                        &t) != mkcclSuccess)
          ++bad;
      }
      if (cpuFifoWaitDone(ranks[r]->fifo.dev(), t, 20000) != mkcclSuccess) ++bad;
    });
  for (auto& p : producers) p.join();
  ASSERT_EQ(bad.load(), 0);
  for (int r = 0; r < 2; ++r) {
    Rank* dst = ranks[1 - r];
    for (int f = 1; f < kFlags; ++f)
      ASSERT_TRUE(cpuWaitGeq(&dst->flags[r * kFlags + f], lastValue[r][f], 10000)) << "flag " << f << " from rank " << r;
    EXPECT_EQ(dst->flags[r * kFlags + 0], 0u);
  }
  EXPECT_TRUE(a.proxy->stop(5000));
  EXPECT_TRUE(b.proxy->stop(5000));
  for (int r = 0; r < 2; ++r) {
    std::mt19937_64 g(seed() * 31 + r);
    const uint64_t chunk = kHalf / kPuts;
    size_t wrong = 0;
    for (int i = 0; i < kPuts; ++i) {
      const uint64_t bytes = 1 + g() % chunk, off = i * chunk;
      if (memcmp(ranks[1 - r]->window.data() + kHalf + off, ref[r].data() + off, bytes) != 0) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << "puts from rank " << r << " with wrong data";
    EXPECT_TRUE(ranks[r]->errors.empty()) << ranks[r]->messages[0];
    EXPECT_EQ(ranks[r]->proxy->puts(), (uint64_t)kPuts);
    // Batching: fewer transport posts than puts.
    EXPECT_LT(ranks[r]->t.postCalls, kPuts) << "no batching";
    EXPECT_EQ(ranks[r]->fifo.ctl->done, (uint64_t)kPuts);
    // The stage counters (what the GPU test's verdict reads) account for every put at every stage.
    const Proxy::Stats& st = ranks[r]->proxy->stats();
    EXPECT_EQ(st.commands.load(), (uint64_t)kPuts);
    EXPECT_EQ(st.stagedOut.load(), staged ? (uint64_t)kPuts : 0u);
    EXPECT_EQ(st.posted.load(), (uint64_t)kPuts);
    EXPECT_EQ(st.sendDone.load(), (uint64_t)kPuts);
    EXPECT_EQ(st.arrivals.load(), (uint64_t)kPuts);  // the peer's puts, here
    EXPECT_EQ(st.stagedIn.load(), staged ? (uint64_t)kPuts : 0u);
    EXPECT_GE(st.flagsRaised.load(), (uint64_t)(kFlags - 1));
    EXPECT_LE(st.flagsRaised.load(), (uint64_t)kPuts);
    const std::string d = ranks[r]->proxy->describe();
    EXPECT_NE(d.find(std::to_string(kPuts) + " commands consumed"), std::string::npos) << d;
  }
}

TEST(NetProxy, MovesDataAndRaisesFlags) { exchangeManyPuts(false); }
TEST(NetProxy, StagedThroughHostMemory) { exchangeManyPuts(true); }

// A failed put: the error reaches the sink once, the FIFO's error word is set, and a producer
// blocked on a full FIFO is released with it.
TEST(NetProxy, TransportErrorReleasesProducer) {
  LoopWire w;
  Rank a(0, &w, 1 << 20, false), b(1, &w, 1 << 20, false);
  a.t.failAt = 10;
  ASSERT_EQ(a.proxy->start(), mkcclSuccess);
  mkcclResult_t last = mkcclSuccess;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000 && last == mkcclSuccess; ++i)
    last = cpuFifoPush(a.fifo.dev(), fifoHeader(kFifoPut, 1, 1, i + 1), 0, 4096, 64, 30000);
  EXPECT_EQ(last, mkcclRemoteError);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_TRUE(a.proxy->stop(5000));
  ASSERT_EQ(a.errors.size(), 1u);
  EXPECT_EQ(a.errors[0], mkcclRemoteError);
  EXPECT_NE(a.messages[0].find("injected failure"), std::string::npos) << a.messages[0];
  EXPECT_EQ(a.fifo.ctl->error, (uint64_t)mkcclRemoteError);
  EXPECT_TRUE(a.proxy->failed());
}

// A put that never completes: the proxy fails with a timeout naming the peer, not a hang.
TEST(NetProxy, StuckPutTimesOut) {
  LoopWire w;
  Rank a(0, &w, 1 << 20, false), b(1, &w, 1 << 20, false);
  a.t.swallow = true;
  ProxyOptions o;
  ASSERT_EQ(a.proxy->start(), mkcclSuccess);
  uint64_t t;
  ASSERT_EQ(cpuFifoPush(a.fifo.dev(), fifoHeader(kFifoPut, 1, 3, 5), 0, 0, 100, 1000, &t), mkcclSuccess);
  EXPECT_EQ(cpuFifoWaitDone(a.fifo.dev(), t, 30000), mkcclTimeout);
  EXPECT_TRUE(a.proxy->stop(5000));
  ASSERT_EQ(a.errors.size(), 1u);
  EXPECT_EQ(a.errors[0], mkcclTimeout);
  EXPECT_NE(a.messages[0].find("rank 1"), std::string::npos) << a.messages[0];
}

// A kernel's bad command (out of the window, to itself, bad flag) is a clear error.
TEST(NetProxy, RejectsInvalidCommands) {
  struct Case {
    uint32_t peer, flag;
    uint64_t src, dst, bytes;
    const char* what;
  } cases[] = {{1, 1, 0, (1 << 20) - 10, 11, "past the end"},
               {0, 1, 0, 0, 8, "to itself"},
               {5, 1, 0, 0, 8, "no such rank"},
               {1, kFlags, 0, 0, 8, "flag out of range"},
               {1, 1, ~0ull - 4, 0, 8, "offset overflow"}};
  for (const Case& c : cases) {
    LoopWire w;
    Rank a(0, &w, 1 << 20, false), b(1, &w, 1 << 20, false);
    ASSERT_EQ(a.proxy->start(), mkcclSuccess);
    uint64_t t;
    ASSERT_EQ(cpuFifoPush(a.fifo.dev(), fifoHeader(kFifoPut, c.peer, c.flag, 1), c.src, c.dst, c.bytes, 1000, &t),
              mkcclSuccess);
    EXPECT_EQ(cpuFifoWaitDone(a.fifo.dev(), t, 10000), mkcclInvalidUsage) << c.what;
    EXPECT_TRUE(a.proxy->stop(5000));
    ASSERT_EQ(a.errors.size(), 1u) << c.what;
    EXPECT_NE(a.messages[0].find("invalid put"), std::string::npos) << a.messages[0];
  }
}

// Back-pressure: with a transport that takes little at a time, everything still goes through.
TEST(NetProxy, BackPressureFromTheTransport) {
  LoopWire w;
  Rank a(0, &w, 1 << 20, false), b(1, &w, 1 << 20, false);
  a.t.maxPending = 2;
  ASSERT_EQ(a.proxy->start(), mkcclSuccess);
  ASSERT_EQ(b.proxy->start(), mkcclSuccess);
  uint64_t t = 0;
  for (int i = 0; i < 5000; ++i)
    ASSERT_EQ(cpuFifoPush(a.fifo.dev(), fifoHeader(kFifoPut, 1, 7, i + 1), 0, 512, 256, 10000, &t), mkcclSuccess);
  EXPECT_EQ(cpuFifoWaitDone(a.fifo.dev(), t, 20000), mkcclSuccess);
  EXPECT_TRUE(cpuWaitGeq(&b.flags[0 * kFlags + 7], 5000, 10000));
  EXPECT_TRUE(a.proxy->stop(5000));
  EXPECT_TRUE(b.proxy->stop(5000));
  EXPECT_TRUE(a.errors.empty());
}

TEST(NetProxy, StopsPromptlyWhenIdle) {
  LoopWire w;
  Rank a(0, &w, 1 << 20, false), b(1, &w, 1 << 20, false);
  ASSERT_EQ(a.proxy->start(), mkcclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(a.proxy->stop(5000));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

}  // namespace
