// The whole GPU-driven path, for real, in two processes (they may share one GPU): a kernel pushes
// puts into the FIFO -> the proxy stages them to host memory -> libfabric tcp -> the peer's proxy
// copies them into its GPU window and raises the arrival flags -> the peer's kernel, waiting on
// them, goes on; a verify kernel checks every byte. Skips without a GPU or libfabric's tcp.
#include <gtest/gtest.h>
#include <cuda_runtime.h>
#include <random>
#include <thread>
#include "fork_ranks.h"
#include "kernels/net/selftest/net_selftest.h"
#include "runtime/log.h"
#include "runtime/proxy.h"
#include "runtime/proxy_stage.h"
#include "transport/net.h"

using namespace mkccl;
using namespace mkccl::test;

namespace {

constexpr int kSkip = 77;
constexpr int kFlags = 4096;

#define CHILD_CHECK(cond, ...)                           \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "rank %d: ", rank);                \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, " [%s:%d]\n", __FILE__, __LINE__); \
      return 1;                                          \
    }                                                    \
  } while (0)

// Waits for the stream with a bound (a hung kernel must not hang the test).
bool streamDone(cudaStream_t s, int timeoutMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (cudaStreamQuery(s) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return cudaStreamQuery(s) == cudaSuccess;
}

int rankMain(int rank, int n, RankLink& link, uint32_t seed) {
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) return kSkip;
  if (!net::fabricUnavailableReason("tcp").empty()) return kSkip;
  CHILD_CHECK(cudaSetDevice(rank % ngpu) == cudaSuccess, "cudaSetDevice");
  constexpr uint64_t kBytes = (64ull << 20) + 4096 + 16, kDst = 72ull << 20, kWindow = 2 * kDst;
  constexpr int kTimeoutMs = 60000;
  netselftest::Harness h;
  CHILD_CHECK(netselftest::harnessCreate(rank, n, kWindow, kFlags, 64, kTimeoutMs, &h) == mkcclSuccess, "harness: %s",
              lastError());
  char* mirror = nullptr;
  CHILD_CHECK(cudaHostAlloc((void**)&mirror, kWindow, cudaHostAllocDefault) == cudaSuccess, "mirror");
  std::unique_ptr<Stager> stager;
  CHILD_CHECK(makeCudaStager(rank % ngpu, h.window, mirror, &stager) == mkcclSuccess, "stager: %s", lastError());
  std::unique_ptr<net::Transport> t;
  CHILD_CHECK(net::fabricCreate("tcp", &t) == mkcclSuccess, "create");
  net::Setup s;
  s.rank = rank;
  s.nranks = n;
  s.window = net::Memory{mirror, kWindow, false, -1};
  s.flagsPerPeer = kFlags;
  s.wantRanges = true;
  s.loopbackOnly = true;
  CHILD_CHECK(t->setup(s) == mkcclSuccess, "setup: %s", lastError());
  std::vector<uint8_t> blob;
  CHILD_CHECK(t->connData(-1, &blob) == mkcclSuccess, "connData");
  std::vector<std::vector<uint8_t>> all;
  CHILD_CHECK(link.allGather(blob, &all, n), "exchange");
  const int peer = 1 - rank;
  CHILD_CHECK(t->connect(peer, all[peer].data(), all[peer].size()) == mkcclSuccess, "connect: %s", lastError());
  FifoReader reader;
  reader.init(h.slots, h.ctl, h.fifoSlots);
  ProxyOptions po;
  po.rank = rank;
  po.nranks = n;
  po.flagsPerPeer = kFlags;
  po.timeoutMs = kTimeoutMs;
  po.windowBytes = kWindow;
  po.flags = h.flags;
  po.stager = stager.get();
  std::string err;
  std::mutex m;
  Proxy proxy(po, &reader, t.get(), [&](mkcclResult_t, const std::string& msg) {
    std::lock_guard<std::mutex> lock(m);
    err = msg;
    ((volatile DevError*)h.errHost)->abort = 1;
  });
  CHILD_CHECK(proxy.start() == mkcclSuccess, "proxy");
  cudaStream_t st;
  CHILD_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "stream");
  unsigned long long* bad;
  CHILD_CHECK(cudaMalloc(&bad, sizeof(*bad)) == cudaSuccess, "malloc");
  // Round 1: 64 MiB in 4 MiB chunks. Round 2: 1 MiB in 1000-byte chunks (the 64-slot FIFO wraps).
  struct Round {
    uint64_t bytes, chunk;
  } rounds[] = {{kBytes, 4ull << 20}, {(1 << 20) + 7, 1000}};
  uint64_t seq = 1;
  for (const Round& r : rounds) {
    CHILD_CHECK(cudaMemsetAsync(h.window + kDst, 0xee, r.bytes, st) == cudaSuccess, "poison");
    CHILD_CHECK(netselftest::launchFill(h, r.bytes, seed + (uint32_t)seq, st) == mkcclSuccess, "fill");
    CHILD_CHECK(cudaStreamSynchronize(st) == cudaSuccess, "sync");
    CHILD_CHECK(link.allGather({1}, &all, n), "barrier");  // the peer's destination is poisoned before we put
    CHILD_CHECK(netselftest::launchExchange(h, peer, r.bytes, r.chunk, kDst, seq, st) == mkcclSuccess, "exchange");
    CHILD_CHECK(cudaMemsetAsync(bad, 0, sizeof(*bad), st) == cudaSuccess, "memset");
    CHILD_CHECK(netselftest::launchVerify(h, peer, r.bytes, kDst, seed + (uint32_t)seq, bad, st) == mkcclSuccess, "verify");
    CHILD_CHECK(streamDone(st, 3 * kTimeoutMs), "kernels did not finish");
    CHILD_CHECK(h.errHost->code == 0, "device error %d at site %d (flag %llu, wanted %llu); proxy: %s", h.errHost->code,
                h.errHost->site, (unsigned long long)h.errHost->seen, (unsigned long long)h.errHost->want, err.c_str());
    unsigned long long nbad = 0;
    CHILD_CHECK(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
    CHILD_CHECK(nbad == 0, "%llu of %llu bytes from rank %d are wrong (chunk %llu)", nbad, (unsigned long long)r.bytes,
                peer, (unsigned long long)r.chunk);
    fprintf(stderr, "rank %d: round %llu: %llu bytes in %llu-byte chunks arrived intact\n", rank,
            (unsigned long long)seq, (unsigned long long)r.bytes, (unsigned long long)r.chunk);
    ++seq;
  }
  CHILD_CHECK(link.allGather({1}, &all, n), "final barrier");
  CHILD_CHECK(proxy.stop(10000), "proxy did not stop");
  CHILD_CHECK(err.empty(), "proxy error: %s", err.c_str());
  stager.reset();
  cudaFree(bad);
  cudaStreamDestroy(st);
  cudaFreeHost(mirror);
  netselftest::harnessDestroy(&h);
  return 0;
}

TEST(NetGpu, KernelToKernelOverTcpTwoProcesses) {
  const uint32_t seed = (uint32_t)std::random_device{}();
  auto st = runRanks(2, 280, [&](int rank, int n, RankLink& link) { return rankMain(rank, n, link, seed); });
  if (st[0] == kSkip || st[1] == kSkip) GTEST_SKIP() << "needs a GPU and libfabric's tcp provider: GPU test skipped";
  EXPECT_EQ(st[0], 0);
  EXPECT_EQ(st[1], 0);
}

}  // namespace
