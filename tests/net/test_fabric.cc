// The libfabric transport over the tcp provider on loopback, between forked processes, driven the
// way the runtime drives it: a CPU producer pushes puts into the FIFO, the proxy posts them, the
// receivers' proxies raise arrival flags. Skips when libfabric or its tcp provider is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <string.h>
#include <random>
#include <thread>
#include "cpu_producer.h"
#include "fork_ranks.h"
#include "base/log.h"
#include "runtime/proxy.h"
#include "transport/net.h"

using namespace mkccl;
using namespace mkccl::test;

namespace {

constexpr int kFlags = 4096;
constexpr int kSkip = 77;

uint64_t seed() {
  static const uint64_t s = std::random_device{}() ^ (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  return s;
}

// The byte a sender puts at position pos of its source region.
inline char pattern(uint64_t s, int src, uint64_t pos) {
  uint64_t x = (s ^ ((uint64_t)src << 56)) + pos * 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return (char)(x >> 32);
}

#define CHILD_CHECK(cond, ...)                         \
  do {                                                 \
    if (!(cond)) {                                     \
      fprintf(stderr, "rank %d: ", rank);              \
      fprintf(stderr, __VA_ARGS__);                    \
      fprintf(stderr, " [%s:%d]\n", __FILE__, __LINE__); \
      return 1;                                        \
    }                                                  \
  } while (0)

// One rank: transport + proxy + CPU producer over host memory.
struct Node {
  int rank = 0, n = 0;
  uint64_t windowBytes = 0;
  std::vector<char> window, mirror;
  std::vector<uint64_t> flags;
  std::unique_ptr<net::Transport> t;
  std::unique_ptr<MemcpyStager> stager;
  std::unique_ptr<CpuFifo> fifo;
  FifoReader reader;
  std::unique_ptr<Proxy> proxy;
  std::mutex m;
  std::string error;
  mkcclResult_t errorCode = mkcclSuccess;

  // 0 on success; prints why not.
  int init(int r, int nranks, uint64_t bytes, bool staged, int timeoutMs, RankLink& link) {
    rank = r;
    n = nranks;
    windowBytes = bytes;
    window.assign(bytes, 0);
    if (staged) mirror.assign(bytes, 0);
    flags.assign((size_t)n * kFlags, 0);
    if (net::fabricCreate("tcp", &t) != mkcclSuccess) return kSkip;
    net::Setup s;
    s.rank = r;
    s.nranks = n;
    s.timeoutMs = timeoutMs;
    s.window = net::Memory{staged ? mirror.data() : window.data(), bytes, false, -1};
    s.flagsPerPeer = kFlags;
    s.wantRanges = staged;
    s.loopbackOnly = true;
    CHILD_CHECK(t->setup(s) == mkcclSuccess, "setup: %s", lastError());
    std::vector<uint8_t> blob;
    CHILD_CHECK(t->connData(-1, &blob) == mkcclSuccess, "connData: %s", lastError());
    std::vector<std::vector<uint8_t>> all;
    CHILD_CHECK(link.allGather(blob, &all, n), "all-gather of connection data failed");
    for (int q = 0; q < n; ++q)
      if (q != r) CHILD_CHECK(t->connect(q, all[q].data(), all[q].size()) == mkcclSuccess, "connect: %s", lastError());
    if (staged) stager.reset(new MemcpyStager(window.data(), mirror.data()));
    fifo.reset(new CpuFifo(1024));
    reader.init(fifo->slots.get(), fifo->ctl.get(), fifo->size);
    ProxyOptions o;
    o.rank = r;
    o.nranks = n;
    o.flagsPerPeer = kFlags;
    o.timeoutMs = timeoutMs;
    o.windowBytes = bytes;
    o.flags = flags.data();
    o.stager = stager.get();
    proxy.reset(new Proxy(o, &reader, t.get(), [this](mkcclResult_t res, const std::string& msg) {
      std::lock_guard<std::mutex> lock(m);
      errorCode = res;
      error = msg;
    }));
    CHILD_CHECK(proxy->start() == mkcclSuccess, "proxy start: %s", lastError());
    return 0;
  }
  mkcclResult_t put(int peer, uint64_t src, uint64_t dst, uint64_t bytes, uint32_t flag, uint64_t value,
                    uint64_t* ticket) {
    return cpuFifoPush(fifo->dev(), fifoHeader(kFifoPut, peer, flag, value), src, dst, bytes, 30000, ticket);
  }
  // Everything done, flags seen: a clean stop for the next phase.
  int finish() {
    const bool stopped = proxy->stop(10000);
    if (!stopped) return 1;
    std::lock_guard<std::mutex> lock(m);
    if (errorCode != mkcclSuccess) {
      fprintf(stderr, "rank %d: proxy error: %s\n", rank, error.c_str());
      return 1;
    }
    return 0;
  }
};

void fillSource(Node& nd, uint64_t s, uint64_t bytes) {
  for (uint64_t i = 0; i < bytes; ++i) nd.window[i] = pattern(s, nd.rank, i);
}

bool tcpAvailable(std::string* why) {
  static int cached = -1;
  if (cached < 0) {
    auto st = runRanks(1, 60, [](int, int, RankLink&) { return net::fabricUnavailableReason("tcp").empty() ? 0 : kSkip; });
    cached = st[0] == 0 ? 1 : 0;
  }
  if (!cached) *why = "libfabric or its tcp provider is not available here";
  return cached == 1;
}

#define REQUIRE_TCP()                                 \
  do {                                                \
    std::string why;                                  \
    if (!tcpAvailable(&why)) GTEST_SKIP() << why;     \
  } while (0)

void expectAllZero(const std::vector<int>& st) {
  for (size_t r = 0; r < st.size(); ++r) EXPECT_EQ(st[r], 0) << "rank " << r;
}

// 64 MiB (plus an odd tail) each way at once: both directions, one put each, data intact.
TEST(NetFabric, LargeTransfersBothWays) {
  REQUIRE_TCP();
  const uint64_t s = seed();
  constexpr uint64_t kBytes = (64ull << 20) + 13, kDst = 65ull << 20;
  auto st = runRanks(2, 240, [&](int rank, int n, RankLink& link) {
    Node nd;
    if (int rc = nd.init(rank, n, kDst + kBytes + 3, false, 60000, link)) return rc;
    fillSource(nd, s, kBytes);
    const int peer = 1 - rank;
    uint64_t t;
    CHILD_CHECK(nd.put(peer, 0, kDst, kBytes, 1, 1 << 8, &t) == mkcclSuccess, "push");
    CHILD_CHECK(nd.put(peer, 0, 0, 0, 2, 3 << 8, &t) == mkcclSuccess, "push a signal");  // no data: flag only
    CHILD_CHECK(cpuWaitGeq(&nd.flags[peer * kFlags + 1], 1 << 8, 120000), "no arrival from rank %d", peer);
    CHILD_CHECK(cpuWaitGeq(&nd.flags[peer * kFlags + 2], 3 << 8, 60000), "no signal from rank %d", peer);
    CHILD_CHECK(cpuFifoWaitDone(nd.fifo->dev(), t, 60000) == mkcclSuccess, "put not completed");
    for (uint64_t i = 0; i < kBytes; ++i)
      CHILD_CHECK(nd.window[kDst + i] == pattern(s, peer, i), "byte %llu from rank %d is wrong", (unsigned long long)i,
                  peer);
    // Let the peer finish reading its arrivals before our endpoint goes away.
    std::vector<std::vector<uint8_t>> all;
    CHILD_CHECK(link.allGather({1}, &all, n), "final barrier");
    return nd.finish();
  });
  expectAllZero(st);
}

// Three ranks, thousands of small puts of random sizes to both peers at once: completions and
// arrivals interleave across peers; every flag ends at its last value and every byte is right.
void manySmall(bool staged) {
  const uint64_t s = seed();
  constexpr int kN = 3, kPuts = 5000;
  constexpr uint64_t kSlot = 2048, kSrcBytes = kPuts * kSlot, kRegion = kPuts * kSlot;
  auto st = runRanks(kN, 240, [&](int rank, int n, RankLink& link) {
    Node nd;
    const uint64_t windowBytes = kSrcBytes + n * kRegion;
    if (int rc = nd.init(rank, n, windowBytes, staged, 60000, link)) return rc;
    fillSource(nd, s, kSrcBytes);
    std::mt19937_64 g(s + rank);
    uint64_t t = 0;
    for (int i = 0; i < kPuts; ++i)
      for (int k = 1; k < n; ++k) {
        const int peer = (rank + k) % n;
        const uint64_t bytes = 1 + g() % kSlot, off = i * kSlot;
        const uint32_t flag = 1 + i % 4000;
        const uint64_t value = (uint64_t)(i / 4000 + 1) << 8;
        CHILD_CHECK(nd.put(peer, off, kSrcBytes + rank * kRegion + off, bytes, flag, value, &t) == mkcclSuccess, "push");
      }
    CHILD_CHECK(cpuFifoWaitDone(nd.fifo->dev(), t, 60000) == mkcclSuccess, "puts not completed: %s", nd.error.c_str());
    for (int q = 0; q < n; ++q) {
      if (q == rank) continue;
      for (int i = kPuts - 4000; i < kPuts; ++i) {
        const uint32_t flag = 1 + i % 4000;
        const uint64_t value = (uint64_t)(i / 4000 + 1) << 8;
        CHILD_CHECK(cpuWaitGeq(&nd.flags[q * kFlags + flag], value, 60000), "flag %u of rank %d stuck at %llu", flag, q,
                    (unsigned long long)nd.flags[q * kFlags + flag]);
      }
      std::mt19937_64 gq(s + q);
      for (int i = 0; i < kPuts; ++i)
        for (int k = 1; k < n; ++k) {
          const uint64_t bytes = 1 + gq() % kSlot;
          if ((q + k) % n != rank) continue;
          const char* got = nd.window.data() + kSrcBytes + q * kRegion + i * kSlot;
          for (uint64_t b = 0; b < bytes; ++b)
            CHILD_CHECK(got[b] == pattern(s, q, i * kSlot + b), "put %d from rank %d: byte %llu wrong", i, q,
                        (unsigned long long)b);
        }
    }
    std::vector<std::vector<uint8_t>> all;
    CHILD_CHECK(link.allGather({1}, &all, n), "final barrier");
    return nd.finish();
  });
  expectAllZero(st);
}

TEST(NetFabric, ManySmallPutsThreeRanksRemoteCqData) {
  REQUIRE_TCP();
  manySmall(false);
}

TEST(NetFabric, ManySmallPutsThreeRanksStagedWithNotices) {
  REQUIRE_TCP();
  manySmall(true);
}

// A peer that dies: puts to it fail the proxy with an error within the timeout; nobody hangs.
TEST(NetFabric, KilledPeerIsAnErrorNotAHang) {
  REQUIRE_TCP();
  auto st = runRanks(2, 120, [&](int rank, int n, RankLink& link) {
    Node nd;
    if (int rc = nd.init(rank, n, 16 << 20, false, 3000, link)) return rc;
    std::vector<std::vector<uint8_t>> all;
    CHILD_CHECK(link.allGather({1}, &all, n), "barrier");
    if (rank == 1) raise(SIGKILL);  // gone without a word
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    uint64_t t = 0;
    mkcclResult_t r = mkcclSuccess;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 64 && r == mkcclSuccess; ++i) r = nd.put(1, 0, 8 << 20, 4 << 20, 1, (i + 1) << 8, &t);
    if (r == mkcclSuccess) r = cpuFifoWaitDone(nd.fifo->dev(), t, 60000);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHILD_CHECK(r != mkcclSuccess, "puts to a killed rank all succeeded");
    CHILD_CHECK(sec < 30, "the error took %.1f s", sec);
    CHILD_CHECK(nd.proxy->failed(), "the proxy did not record the failure");
    CHILD_CHECK(nd.proxy->stop(10000), "proxy did not stop");
    CHILD_CHECK(!nd.error.empty(), "no error message");
    fprintf(stderr, "rank 0: as expected, after %.2f s: %s\n", sec, nd.error.c_str());
    return 0;
  });
  EXPECT_EQ(st[0], 0);
  EXPECT_EQ(st[1], 128 + SIGKILL);
}

// Connection data that is cut short, corrupted, from another version or for another window size is
// refused with a message saying so; the intact one is accepted.
TEST(NetFabric, MalformedConnectionDataIsAClearError) {
  REQUIRE_TCP();
  auto st = runRanks(1, 60, [&](int rank, int, RankLink&) {
    std::unique_ptr<net::Transport> a, b;
    std::vector<char> wa(1 << 20), wb(1 << 20);
    CHILD_CHECK(net::fabricCreate("tcp", &a) == mkcclSuccess && net::fabricCreate("tcp", &b) == mkcclSuccess, "create");
    net::Setup s;
    s.nranks = 2;
    s.loopbackOnly = true;
    s.flagsPerPeer = kFlags;
    s.rank = 0;
    s.window = net::Memory{wa.data(), wa.size(), false, -1};
    CHILD_CHECK(a->setup(s) == mkcclSuccess, "setup a: %s", lastError());
    s.rank = 1;
    s.window = net::Memory{wb.data(), wb.size(), false, -1};
    CHILD_CHECK(b->setup(s) == mkcclSuccess, "setup b: %s", lastError());
    std::vector<uint8_t> good;
    CHILD_CHECK(b->connData(0, &good) == mkcclSuccess, "connData");
    struct Case {
      const char* what;
      std::function<void(std::vector<uint8_t>&)> edit;
      const char* expect;
    } cases[] = {
        {"empty", [](std::vector<uint8_t>& v) { v.clear(); }, "truncated"},
        {"half", [](std::vector<uint8_t>& v) { v.resize(v.size() / 2); }, "truncated"},
        {"trailing", [](std::vector<uint8_t>& v) { v.push_back(0); }, "trailing"},
        {"magic", [](std::vector<uint8_t>& v) { v[0] ^= 0x5a; }, "malformed"},
        {"version", [](std::vector<uint8_t>& v) { v[4] += 1; }, "version"},
        {"kind", [](std::vector<uint8_t>& v) { v[8] = 2; }, "another transport"},
        {"sender", [](std::vector<uint8_t>& v) { v[16] = 7; }, "came from rank 7"},
        {"window", [](std::vector<uint8_t>& v) { v[24] ^= 1; }, "window"},
        {"address", [](std::vector<uint8_t>& v) { memset(v.data() + 56, 0xff, 4); }, "address"},
    };
    for (const Case& c : cases) {
      std::vector<uint8_t> bad = good;
      c.edit(bad);
      const mkcclResult_t r = a->connect(1, bad.data(), bad.size());
      CHILD_CHECK(r == mkcclRemoteError, "%s: connect returned %d", c.what, (int)r);
      CHILD_CHECK(strstr(lastError(), c.expect) != nullptr, "%s: message '%s' lacks '%s'", c.what, lastError(), c.expect);
    }
    CHILD_CHECK(a->connect(1, good.data(), good.size()) == mkcclSuccess, "the intact blob: %s", lastError());
    return 0;
  });
  EXPECT_EQ(st[0], 0);
}

}  // namespace
