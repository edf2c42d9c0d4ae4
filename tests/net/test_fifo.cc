// The FIFO protocol: CPU producers (standing in for the GPU) against the host consumer.
#include <gtest/gtest.h>
#include <atomic>
#include <random>
#include <thread>
#include <vector>
#include "cpu_producer.h"
#include "runtime/proxy_fifo.h"
#include "transport/net.h"

using namespace mkccl;
using namespace mkccl::test;

namespace {

uint64_t seed() {
  static const uint64_t s = std::random_device{}() ^ (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  return s;
}

TEST(NetFifo, HeaderKeepsEveryField) {
  std::mt19937_64 rng(seed());
  for (int i = 0; i < 10000; ++i) {
    const uint32_t op = 1 + rng() % 15, peer = rng() % kFifoMaxRanks, flag = rng() % kFifoMaxFlags;
    const uint64_t value = rng();
    const uint64_t h = fifoHeader(op, peer, flag, value);
    ASSERT_NE(h, 0u);
    EXPECT_EQ(fifoOp(h), op);
    EXPECT_EQ(fifoPeer(h), peer);
    EXPECT_EQ(fifoFlag(h), flag);
    EXPECT_EQ(fifoValue(h), (uint32_t)value);
  }
  EXPECT_EQ(fifoPeer(fifoHeader(kFifoPut, 65535, 4095, ~0ull)), 65535u);
  EXPECT_EQ(fifoFlag(fifoHeader(kFifoPut, 65535, 4095, ~0ull)), 4095u);
}

TEST(NetFifo, ValueExtensionFollowsTheClock) {
  using net::extendValue;
  EXPECT_EQ(extendValue(0, 5, 32), 5u);
  EXPECT_EQ(extendValue(0xffffffffull, 3, 32), 0x100000003ull);        // wrapped forward
  EXPECT_EQ(extendValue(0x100000003ull, 0xfffffffeull, 32), 0xfffffffeull);  // a late, older value
  EXPECT_EQ(extendValue(5ull << 40, 7, 64), 7u);
  EXPECT_EQ(extendValue((1ull << 20) * 9 + 10, 12, 20), (1ull << 20) * 9 + 12);
  EXPECT_EQ(extendValue((1ull << 20) * 9 + 10, 8, 20), (1ull << 20) * 9 + 8);
  EXPECT_EQ(extendValue(3, 0xfffff, 20), 0xfffffu);  // near zero, nothing below: forward
  std::mt19937_64 rng(seed());
  for (int i = 0; i < 100000; ++i) {
    const uint64_t base = rng() >> 2;
    const int64_t delta = (int64_t)(rng() % (1ull << 30)) - (1ll << 29);
    const uint64_t v = base + delta;
    ASSERT_EQ(extendValue(base, v & 0xffffffffull, 32), v) << "base " << base << " delta " << delta;
  }
}

// Many producers, a small ring (wrap-around thousands of times), every command exactly once and
// intact, each producer's commands in its order; completions out of order give a correct prefix.
TEST(NetFifo, ManyProducersWrapAroundExactlyOnce) {
  constexpr int kProducers = 3, kPer = 40000;
  CpuFifo fifo(16);
  FifoReader reader;
  reader.init(fifo.slots.get(), fifo.ctl.get(), fifo.size);
  std::atomic<int> failures{0};
  std::vector<std::thread> producers;
  const uint64_t s = seed();
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < (uint64_t)kPer; ++i) {
        const uint64_t big = (1ull << 40) + i * 0x10001ull;  // offsets past 32 and 40 bits
        if (cpuFifoPush(fifo.dev(), fifoHeader(kFifoPut, p, i % 4096, i ^ s), big, big * 3 + p, (s + i) ^ p, 20000) !=
            mkcclSuccess)
          ++failures;
      }
    });
  std::vector<uint64_t> next(kProducers, 0);
  std::mt19937_64 rng(s);
  std::vector<uint64_t> held;
  uint64_t got = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (got < (uint64_t)kProducers * kPer && std::chrono::steady_clock::now() < end) {
    FifoCmd c[8];
    uint64_t first = 0;
    const int n = reader.poll(c, 1 + rng() % 8, &first);
    for (int i = 0; i < n; ++i) {
      const int p = (int)fifoPeer(c[i].hdr);
      ASSERT_LT(p, kProducers);
      const uint64_t k = next[p]++;
      const uint64_t big = (1ull << 40) + k * 0x10001ull;
      ASSERT_EQ(fifoOp(c[i].hdr), (uint32_t)kFifoPut);
      ASSERT_EQ(fifoFlag(c[i].hdr), k % 4096);
      ASSERT_EQ(fifoValue(c[i].hdr), (uint32_t)(k ^ s));
      ASSERT_EQ(c[i].srcOff, big);
      ASSERT_EQ(c[i].dstOff, big * 3 + p);
      ASSERT_EQ(c[i].bytes, (s + k) ^ p);
      held.push_back(first + i);
    }
    got += n;
    // Complete a random subset, out of order; done must be the completed prefix.
    std::shuffle(held.begin(), held.end(), rng);
    const size_t keep = held.size() > 4 ? rng() % 4 : held.size();
    while (held.size() > keep) {
      reader.complete(held.back());
      held.pop_back();
    }
    if (n == 0) std::this_thread::yield();
  }
  for (uint64_t t : held) reader.complete(t);
  for (auto& t : producers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(got, (uint64_t)kProducers * kPer);
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], (uint64_t)kPer);
  EXPECT_EQ(reader.done(), got);
  EXPECT_EQ(fifo.ctl->done, got);
  EXPECT_EQ(fifo.ctl->tail, got);
}

TEST(NetFifo, DoneIsTheCompletedPrefix) {
  CpuFifo fifo(8);
  FifoReader reader;
  reader.init(fifo.slots.get(), fifo.ctl.get(), fifo.size);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(cpuFifoPush(fifo.dev(), fifoHeader(kFifoNop, 0, 0, 0), 0, 0, 0, 1000), mkcclSuccess);
  FifoCmd c[8];
  uint64_t first;
  ASSERT_EQ(reader.poll(c, 8, &first), 5);
  reader.complete(3);
  reader.complete(1);
  EXPECT_EQ(fifo.ctl->done, 0u);
  reader.complete(0);
  EXPECT_EQ(fifo.ctl->done, 2u);
  reader.complete(2);
  EXPECT_EQ(fifo.ctl->done, 4u);
  reader.complete(7);  // never consumed: ignored
  reader.complete(4);
  EXPECT_EQ(fifo.ctl->done, 5u);
  EXPECT_EQ(cpuFifoWaitDone(fifo.dev(), 4, 100), mkcclSuccess);
  EXPECT_EQ(cpuFifoWaitDone(fifo.dev(), 5, 100), mkcclTimeout);
}

// Nobody consumes: the producer that finds no room gives up after the timeout, not before.
TEST(NetFifo, FullQueueWaitIsBounded) {
  CpuFifo fifo(8);
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(cpuFifoPush(fifo.dev(), fifoHeader(kFifoNop, 0, 0, i), 0, 0, 0, 1000), mkcclSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(cpuFifoPush(fifo.dev(), fifoHeader(kFifoNop, 0, 0, 8), 0, 0, 0, 300), mkcclTimeout);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 290);
  EXPECT_LT(ms, 5000);
}

// A full queue drains: the waiting producer goes on as soon as the consumer makes room.
TEST(NetFifo, FullQueueResumesWhenConsumed) {
  CpuFifo fifo(4);
  FifoReader reader;
  reader.init(fifo.slots.get(), fifo.ctl.get(), fifo.size);
  std::thread prod([&] {
    for (int i = 0; i < 64; ++i)
      ASSERT_EQ(cpuFifoPush(fifo.dev(), fifoHeader(kFifoNop, 0, 0, i + 1), i, 0, 0, 20000), mkcclSuccess);
  });
  int got = 0;
  while (got < 64) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a slow consumer: the ring stays full
    FifoCmd c[2];
    uint64_t first;
    const int n = reader.poll(c, 2, &first);
    for (int i = 0; i < n; ++i) ASSERT_EQ(c[i].srcOff, (uint64_t)(got + i));
    got += n;
  }
  prod.join();
}

// The proxy failed: a producer waiting for room gets its error at once, not the timeout.
TEST(NetFifo, ProxyErrorReleasesWaitingProducer) {
  CpuFifo fifo(8);
  FifoReader reader;
  reader.init(fifo.slots.get(), fifo.ctl.get(), fifo.size);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(cpuFifoPush(fifo.dev(), fifoHeader(kFifoNop, 0, 0, 1), 0, 0, 0, 1000), mkcclSuccess);
  std::thread failer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reader.fail(mkcclRemoteError);
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(cpuFifoPush(fifo.dev(), fifoHeader(kFifoNop, 0, 0, 1), 0, 0, 0, 30000), mkcclRemoteError);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  failer.join();
}

}  // namespace
