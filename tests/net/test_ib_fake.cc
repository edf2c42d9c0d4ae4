// The ib (RC) transport's logic against the in-process fake NIC: QP state machine, data and inline
// flag writes, batching (chains, few signalled WRs), flow control on the send queue, completion
// errors reaching the proxy's error path, malformed connection data.
#include <gtest/gtest.h>
#include <string.h>
#include <random>
#include <thread>
#include "cpu_producer.h"
#include "fake_verbs.h"
#include "base/log.h"
#include "runtime/proxy.h"
#include "transport/ib/ib_transport.h"

using namespace mkccl;
using namespace mkccl::test;

namespace {

constexpr int kFlags = 256;

uint64_t seed() {
  static const uint64_t s = std::random_device{}() ^ (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  return s;
}

struct IbRank {
  int rank;
  FakeVerbs* verbs;  // owned by the transport
  std::unique_ptr<net::Transport> t;
  std::vector<char> window;
  std::vector<uint64_t> flags;
  IbRank(FakeFabric* f, int r, int n, uint64_t bytes, const ib::IbOptions& o) : rank(r), window(bytes), flags((size_t)n * kFlags, 0) {
    auto v = std::make_unique<FakeVerbs>(f, "fake" + std::to_string(r));
    verbs = v.get();
    t = ib::makeIbTransport(std::move(v), o);
    net::Setup s;
    s.rank = r;
    s.nranks = n;
    s.window = net::Memory{window.data(), bytes, false, -1};
    s.flags = net::Memory{flags.data(), flags.size() * 8, false, -1};
    s.flagsPerPeer = kFlags;
    EXPECT_EQ(t->setup(s), mkcclSuccess) << lastError();
  }
};

void connectPair(IbRank& a, IbRank& b) {
  std::vector<uint8_t> ab, ba;
  ASSERT_EQ(a.t->connData(b.rank, &ab), mkcclSuccess) << lastError();
  ASSERT_EQ(b.t->connData(a.rank, &ba), mkcclSuccess) << lastError();
  ASSERT_EQ(a.t->connect(b.rank, ba.data(), ba.size()), mkcclSuccess) << lastError();
  ASSERT_EQ(b.t->connect(a.rank, ab.data(), ab.size()), mkcclSuccess) << lastError();
}

TEST(NetIb, QpStateMachine) {
  FakeFabric f;
  IbRank a(&f, 0, 2, 1 << 16, {}), b(&f, 1, 2, 1 << 16, {});
  int taken = -1;
  net::PutOp op;
  op.bytes = 8;
  op.flag = 1;
  EXPECT_EQ(a.t->post(1, &op, 1, &taken), mkcclInvalidUsage);  // not connected yet
  EXPECT_EQ(taken, 0);
  connectPair(a, b);
  EXPECT_EQ(a.verbs->transitions, 3);  // INIT, RTR, RTS once each
  EXPECT_EQ(b.verbs->transitions, 3);
  // The fake refuses what a real HCA refuses.
  FakeVerbs v(&f, "fakeX");
  ib::PortInfo p;
  ASSERT_EQ(v.open("", 1, &p), mkcclSuccess);
  ASSERT_EQ(v.createCq(16), mkcclSuccess);
  void* qp;
  uint32_t qpn;
  ASSERT_EQ(v.createQp(8, 8, &qp, &qpn), mkcclSuccess);
  ib::QpRemote r;
  r.qpn = 0x999;
  r.mtu = 5;
  EXPECT_NE(v.toRtr(qp, r), mkcclSuccess);  // RESET -> RTR
  EXPECT_NE(v.toRts(qp, 1), mkcclSuccess);  // RESET -> RTS
  ib::SendWr w;
  EXPECT_EQ(v.postSend(qp, &w, 1), EINVAL);  // not RTS
  ASSERT_EQ(v.toInit(qp), mkcclSuccess);
  EXPECT_NE(v.toInit(qp), mkcclSuccess);
  ASSERT_EQ(v.toRtr(qp, r), mkcclSuccess);
  ASSERT_EQ(v.toRts(qp, 1), mkcclSuccess);
}

// Puts through the proxy: data, inline flags written by the "NIC", batched chains with few
// signalled WRs, the send queue never overfilled, completions interleaved and late.
TEST(NetIb, ProxyDrivenPutsBatchedAndFlowControlled) {
  FakeFabric f;
  ib::IbOptions o;
  o.sqDepth = 16;
  o.maxWrBytes = 3000;  // a large put is split into several WRs
  constexpr uint64_t kW = 1 << 25, kHalf = kW / 2;  // chunks of ~4 KiB: some split
  IbRank a(&f, 0, 2, kW, o), b(&f, 1, 2, kW, o);
  connectPair(a, b);
  a.verbs->holdPolls = 3;
  std::mt19937_64 g(seed());
  for (auto& c : a.window) c = (char)g();
  CpuFifo fifo(64);
  FifoReader reader;
  reader.init(fifo.slots.get(), fifo.ctl.get(), fifo.size);
  ProxyOptions po;
  po.rank = 0;
  po.nranks = 2;
  po.flagsPerPeer = kFlags;
  po.windowBytes = kW;
  po.timeoutMs = 20000;
  std::string err;
  Proxy proxy(po, &reader, a.t.get(), [&](mkcclResult_t, const std::string& m) { err = m; });
  ASSERT_EQ(proxy.start(), mkcclSuccess);
  constexpr int kPuts = 4000;
  const uint64_t chunk = kHalf / kPuts;
  std::vector<uint64_t> sizes(kPuts);
  uint64_t t = 0;
  for (int i = 0; i < kPuts; ++i) {
    sizes[i] = i % 97 == 0 ? 0 : 1 + g() % chunk;  // some flag-only puts
    ASSERT_EQ(cpuFifoPush(fifo.dev(), fifoHeader(kFifoPut, 1, 1 + i % (kFlags - 1), (uint64_t)(i + 1) << 8), i * chunk,
                          kHalf + i * chunk, sizes[i], 10000, &t),
              mkcclSuccess);
  }
  ASSERT_EQ(cpuFifoWaitDone(fifo.dev(), t, 20000), mkcclSuccess) << err;
  EXPECT_TRUE(proxy.stop(5000));
  EXPECT_TRUE(err.empty()) << err;
  for (int i = kPuts - (kFlags - 1); i < kPuts; ++i)
    EXPECT_EQ(b.flags[0 * kFlags + 1 + i % (kFlags - 1)], (uint64_t)(i + 1) << 8) << "put " << i;
  size_t wrong = 0;
  for (int i = 0; i < kPuts; ++i)
    wrong += memcmp(b.window.data() + kHalf + i * chunk, a.window.data() + i * chunk, sizes[i]) != 0;
  EXPECT_EQ(wrong, 0u);
  FakeVerbs* v = a.verbs;
  EXPECT_EQ(v->rejectedFull, 0) << "the transport overfilled the send queue";
  EXPECT_LE(v->maxOutstanding, o.sqDepth);
  EXPECT_GT(v->maxChain, 2) << "no chains: puts were posted one by one";
  EXPECT_LT(v->signalled, v->wrsPosted / 2) << "too many signalled WRs";
  int wrs = 0;
  for (uint64_t sz : sizes) wrs += (int)((sz + o.maxWrBytes - 1) / o.maxWrBytes) + 1;
  EXPECT_EQ(v->wrsPosted, wrs) << "each put is its data WR(s) + one inline flag WR";
}

// A WR that fails (remote access error): the proxy gets one error naming the peer and the status,
// and a producer waiting for completion is released.
TEST(NetIb, CompletionErrorFailsTheProxy) {
  FakeFabric f;
  ib::IbOptions o;
  o.sqDepth = 8;
  IbRank a(&f, 0, 2, 1 << 20, o), b(&f, 1, 2, 1 << 20, o);
  connectPair(a, b);
  f.failWrAt = f.wrsSeen + 25;
  CpuFifo fifo(16);
  FifoReader reader;
  reader.init(fifo.slots.get(), fifo.ctl.get(), fifo.size);
  ProxyOptions po;
  po.rank = 0;
  po.nranks = 2;
  po.flagsPerPeer = kFlags;
  po.windowBytes = 1 << 20;
  std::vector<std::string> errs;
  std::mutex m;
  Proxy proxy(po, &reader, a.t.get(), [&](mkcclResult_t, const std::string& s) {
    std::lock_guard<std::mutex> lock(m);
    errs.push_back(s);
  });
  ASSERT_EQ(proxy.start(), mkcclSuccess);
  mkcclResult_t r = mkcclSuccess;
  uint64_t t = 0;
  for (int i = 0; i < 1000 && r == mkcclSuccess; ++i)
    r = cpuFifoPush(fifo.dev(), fifoHeader(kFifoPut, 1, 2, i + 1), 0, 4096, 512, 10000, &t);
  if (r == mkcclSuccess) r = cpuFifoWaitDone(fifo.dev(), t, 10000);
  EXPECT_EQ(r, mkcclRemoteError);
  EXPECT_TRUE(proxy.stop(5000));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].find("rank 1"), std::string::npos) << errs[0];
  EXPECT_NE(errs[0].find("remote access error"), std::string::npos) << errs[0];
}

// The peer's QP is gone (its process died): the writes cannot be delivered; an error, not a hang.
TEST(NetIb, VanishedPeerIsAnError) {
  FakeFabric f;
  IbRank a(&f, 0, 2, 1 << 16, {});
  {
    IbRank b(&f, 1, 2, 1 << 16, {});
    connectPair(a, b);
  }  // b's QPs are destroyed here
  net::PutOp op;
  op.peer = 1;
  op.bytes = 64;
  op.flag = 1;
  op.value = 5;
  int taken = 0;
  ASSERT_EQ(a.t->post(1, &op, 1, &taken), mkcclSuccess);
  EXPECT_EQ(taken, 1);
  std::vector<net::Event> ev;
  for (int i = 0; i < 10 && ev.empty(); ++i) ASSERT_EQ(a.t->poll(&ev), mkcclSuccess);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev[0].type, net::Event::kError);
  EXPECT_NE(ev[0].message.find("retry"), std::string::npos) << ev[0].message;
}

TEST(NetIb, MalformedConnectionData) {
  FakeFabric f;
  IbRank a(&f, 0, 2, 1 << 16, {}), b(&f, 1, 2, 1 << 16, {});
  std::vector<uint8_t> good, unused;
  ASSERT_EQ(a.t->connData(1, &unused), mkcclSuccess);
  ASSERT_EQ(b.t->connData(0, &good), mkcclSuccess);
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> edit;
    const char* expect;
  } cases[] = {
      {"truncated", [](std::vector<uint8_t>& v) { v.resize(20); }, "truncated"},
      {"magic", [](std::vector<uint8_t>& v) { v[1] ^= 1; }, "malformed"},
      {"addressee", [](std::vector<uint8_t>& v) { v[20] = 5; }, "for rank 5"},
      {"qpn zero", [](std::vector<uint8_t>& v) { memset(v.data() + 32, 0, 4); }, "qpn 0"},
      {"mtu", [](std::vector<uint8_t>& v) { v[43] = 9; }, "mtu 9"},
      {"addressing", [](std::vector<uint8_t>& v) { v[42] = 1; }, "GID addressing"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> bad = good;
    c.edit(bad);
    EXPECT_EQ(a.t->connect(1, bad.data(), bad.size()), mkcclRemoteError) << c.what;
    EXPECT_NE(std::string(lastError()).find(c.expect), std::string::npos) << c.what << ": " << lastError();
  }
  EXPECT_EQ(a.t->connect(1, good.data(), good.size()), mkcclSuccess) << lastError();
}

TEST(NetIb, OversizedPutIsRejected) {
  FakeFabric f;
  ib::IbOptions o;
  o.sqDepth = 4;
  o.maxWrBytes = 16;
  IbRank a(&f, 0, 2, 1 << 16, o), b(&f, 1, 2, 1 << 16, o);
  connectPair(a, b);
  net::PutOp op;
  op.bytes = 1000;
  op.flag = 1;
  int taken = 0;
  EXPECT_EQ(a.t->post(1, &op, 1, &taken), mkcclInvalidUsage);
  EXPECT_NE(std::string(lastError()).find("work requests"), std::string::npos) << lastError();
}

}  // namespace
