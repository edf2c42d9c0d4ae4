// The whole GPU-driven path, for real, in two processes (they may share one GPU): a kernel pushes
// puts into the FIFO -> the proxy -> libfabric tcp -> the peer's proxy raises the arrival flags ->
// the peer's kernel, waiting on them, goes on; a verify kernel checks every byte. Skips without a
// GPU or libfabric's tcp.
//
// Two paths:
//  - HostWindow (what netInitComm does for tcp): the window is pinned host memory mapped into the
//    GPU; the transport reads and writes it, the proxy makes no CUDA call.
//  - Staged: a device window with a host mirror and CudaStager copies issued by the proxy. Its
//    kernels are preloaded; DISABLED_StagedLazyLoading runs it without, which is how the first GPU
//    run failed (the verify kernel's lazy load waits for the context to go idle, i.e. for the
//    exchange kernel, whose data waits behind that load): run it by hand to confirm the diagnosis.
//
// On failure each rank prints which stage of the path stopped (kernel -> FIFO -> proxy -> staging
// -> post -> wire -> arrival -> staging -> flag -> kernel), from the proxy's counters and the flags.
#include <gtest/gtest.h>
#include <cuda_runtime.h>
#include <random>
#include <thread>
#include "fork_ranks.h"
#include "transport/selftest/net_selftest.h"
#include "base/log.h"
#include "runtime/proxy.h"
#include "runtime/proxy_stage.h"
#include "transport/net.h"

using namespace mkccl;
using namespace mkccl::test;

namespace {

constexpr int kSkip = 77;
constexpr int kFlags = 4096;

enum class Path { kHostWindow, kStaged, kStagedLazy };

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

struct Counts {
  uint64_t commands, stagedOut, posted, sendDone, arrivals, stagedIn, flagsRaised;
};
Counts snap(const Proxy& p) {
  const Proxy::Stats& s = p.stats();
  return Counts{s.commands.load(), s.stagedOut.load(), s.posted.load(), s.sendDone.load(),
                s.arrivals.load(), s.stagedIn.load(), s.flagsRaised.load()};
}

// The first stage of this round's `puts` puts (and the peer's, which arrive here) that fell short.
std::string verdict(const Counts& a, const Counts& b, uint64_t puts, uint64_t flagsSeen, bool staged) {
  char m[400];
  auto d = [](uint64_t x, uint64_t y) { return (unsigned long long)(y - x); };
  const unsigned long long P = puts;
  if (b.commands - a.commands < puts)
    snprintf(m, sizeof(m),
             "stage 1 (kernel -> FIFO -> proxy): the proxy consumed %llu of %llu commands: the kernel stopped pushing "
             "(see its device error) or the proxy does not see the FIFO's writes",
             d(a.commands, b.commands), P);
  else if (staged && b.stagedOut - a.stagedOut < puts)
    snprintf(m, sizeof(m),
             "stage 2 (GPU->host staging): %llu of %llu copies completed: the proxy's copies wait behind other GPU "
             "work (a lazy kernel load? a blocking stream?)",
             d(a.stagedOut, b.stagedOut), P);
  else if (b.posted - a.posted < puts)
    snprintf(m, sizeof(m), "stage 3 (post): the transport accepted %llu of %llu puts", d(a.posted, b.posted), P);
  else if (b.sendDone - a.sendDone < puts)
    snprintf(m, sizeof(m),
             "stage 4 (wire): %llu of %llu puts completed: the peer's side does not progress (is its proxy alive?)",
             d(a.sendDone, b.sendDone), P);
  else if (b.arrivals - a.arrivals < puts)
    snprintf(m, sizeof(m), "stage 5 (arrivals): %llu of the peer's %llu puts arrived here: see the peer's verdict",
             d(a.arrivals, b.arrivals), P);
  else if (staged && b.stagedIn - a.stagedIn < puts)
    snprintf(m, sizeof(m), "stage 6 (host->GPU staging): %llu of %llu copies completed", d(a.stagedIn, b.stagedIn), P);
  else if (flagsSeen < puts)
    snprintf(m, sizeof(m),
             "stage 7 (flags): %llu flags raised by the proxy, %llu of %llu hold the expected value (value extension?)",
             d(a.flagsRaised, b.flagsRaised), (unsigned long long)flagsSeen, P);
  else
    snprintf(m, sizeof(m),
             "every stage completed and every flag holds its value: the kernel did not see the host-mapped flags, or "
             "failed elsewhere (see the device error)");
  return m;
}

int rankMain(int rank, int n, RankLink& link, uint32_t seed, Path path) {
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) return kSkip;
  if (!net::fabricUnavailableReason("tcp").empty()) return kSkip;
  const int dev = rank % ngpu;
  CHILD_CHECK(cudaSetDevice(dev) == cudaSuccess, "cudaSetDevice");
  const bool staged = path != Path::kHostWindow;
  if (path == Path::kStaged)
    CHILD_CHECK(netselftest::preloadKernels() == mkcclSuccess, "preload: %s", lastError());
  constexpr uint64_t kBytes = (64ull << 20) + 4096 + 16, kDst = 72ull << 20, kWindow = 2 * kDst;
  // Short enough that a stalled path is reported well within the test's own deadline.
  const int kTimeoutMs = path == Path::kStagedLazy ? 10000 : 20000;
  netselftest::Harness h;
  CHILD_CHECK(netselftest::harnessCreate(rank, n, kWindow, kFlags, 64, kTimeoutMs, &h, !staged) == mkcclSuccess,
              "harness: %s", lastError());
  char* mirror = nullptr;
  std::unique_ptr<Stager> stager;
  if (staged) {
    CHILD_CHECK(cudaHostAlloc((void**)&mirror, kWindow, cudaHostAllocDefault) == cudaSuccess, "mirror");
    CHILD_CHECK(makeCudaStager(dev, h.window, mirror, &stager) == mkcclSuccess, "stager: %s", lastError());
  }
  std::unique_ptr<net::Transport> t;
  CHILD_CHECK(net::fabricCreate("tcp", &t) == mkcclSuccess, "create");
  net::Setup s;
  s.rank = rank;
  s.nranks = n;
  s.window = net::Memory{staged ? mirror : h.window, kWindow, false, -1};
  s.flagsPerPeer = kFlags;
  s.wantRanges = staged;  // the stager must know which range arrived; the host window needs only the flag
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
    const uint64_t chunks = (r.bytes + r.chunk - 1) / r.chunk;
    if (staged) {
      CHILD_CHECK(cudaMemsetAsync(h.window + kDst, 0xee, r.bytes, st) == cudaSuccess, "poison");
    } else {
      CHILD_CHECK(cudaStreamSynchronize(st) == cudaSuccess, "sync");
      memset(h.window + kDst, 0xee, r.bytes);
    }
    CHILD_CHECK(netselftest::launchFill(h, r.bytes, seed + (uint32_t)seq, st) == mkcclSuccess, "fill");
    CHILD_CHECK(cudaStreamSynchronize(st) == cudaSuccess, "sync");
    CHILD_CHECK(link.allGather({1}, &all, n), "barrier");  // the peer's destination is poisoned before we put
    const Counts before = snap(proxy);
    CHILD_CHECK(netselftest::launchExchange(h, peer, r.bytes, r.chunk, kDst, seq, st) == mkcclSuccess, "exchange");
    CHILD_CHECK(cudaMemsetAsync(bad, 0, sizeof(*bad), st) == cudaSuccess, "memset");
    CHILD_CHECK(netselftest::launchVerify(h, peer, r.bytes, kDst, seed + (uint32_t)seq, bad, st) == mkcclSuccess,
                "verify");
    const bool finished = streamDone(st, 3 * kTimeoutMs);
    const volatile DevError* e = h.errHost;
    if (!finished || e->code != 0) {
      const uint64_t want = (seq << 8);  // netFlagValue(seq)
      uint64_t seen = 0, firstMissing = chunks;
      for (uint64_t k = 0; k < chunks; ++k) {
        const uint64_t v = __atomic_load_n(&h.flags[(size_t)peer * kFlags + 1 + k], __ATOMIC_ACQUIRE);
        if (v >= want) ++seen;
        else if (firstMissing == chunks) firstMissing = k;
      }
      const Counts now = snap(proxy);
      std::lock_guard<std::mutex> lock(m);
      fprintf(stderr,
              "rank %d: round %llu (%llu puts of %llu bytes) %s; device error %d at site %d (flag %llu, wanted %llu)\n"
              "rank %d: flags from rank %d: %llu of %llu hold %llu (first missing: chunk %llu); FIFO tail %llu, done %llu, "
              "error %llu\nrank %d: proxy: %s\nrank %d: proxy error: %s\nrank %d: VERDICT: %s\n",
              rank, (unsigned long long)seq, (unsigned long long)chunks, (unsigned long long)r.chunk,
              finished ? "finished with an error" : "did not finish", e->code, e->site, (unsigned long long)e->seen,
              (unsigned long long)e->want, rank, peer, (unsigned long long)seen, (unsigned long long)chunks,
              (unsigned long long)want, (unsigned long long)firstMissing,
              (unsigned long long)__atomic_load_n(&h.ctl->tail, __ATOMIC_ACQUIRE),
              (unsigned long long)__atomic_load_n(&h.ctl->done, __ATOMIC_ACQUIRE),
              (unsigned long long)__atomic_load_n(&h.ctl->error, __ATOMIC_ACQUIRE), rank, proxy.describe().c_str(),
              rank, err.empty() ? "none" : err.c_str(), rank, verdict(before, now, chunks, seen, staged).c_str());
      return 1;
    }
    unsigned long long nbad = 0;
    CHILD_CHECK(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
    CHILD_CHECK(nbad == 0, "%llu of %llu bytes from rank %d are wrong (chunk %llu)", nbad, (unsigned long long)r.bytes,
                peer, (unsigned long long)r.chunk);
    fprintf(stderr, "rank %d: round %llu: %llu bytes in %llu-byte chunks arrived intact (%s)\n", rank,
            (unsigned long long)seq, (unsigned long long)r.bytes, (unsigned long long)r.chunk,
            staged ? "staged" : "host window");
    ++seq;
  }
  CHILD_CHECK(link.allGather({1}, &all, n), "final barrier");
  CHILD_CHECK(proxy.stop(10000), "proxy did not stop");
  CHILD_CHECK(err.empty(), "proxy error: %s", err.c_str());
  stager.reset();
  cudaFree(bad);
  cudaStreamDestroy(st);
  if (mirror) cudaFreeHost(mirror);
  netselftest::harnessDestroy(&h);
  return 0;
}

void runPath(Path path) {
  const uint32_t seed = (uint32_t)std::random_device{}();
  auto st = runRanks(2, 200, [&](int rank, int n, RankLink& link) { return rankMain(rank, n, link, seed, path); });
  if (st[0] == kSkip || st[1] == kSkip) GTEST_SKIP() << "needs a GPU and libfabric's tcp provider: GPU test skipped";
  EXPECT_EQ(st[0], 0);
  EXPECT_EQ(st[1], 0);
}

TEST(NetGpu, KernelToKernelHostWindow) { runPath(Path::kHostWindow); }
TEST(NetGpu, KernelToKernelStaged) { runPath(Path::kStaged); }
// Expected to FAIL (stage 2) where kernels load lazily: the first GPU run's deadlock, kept to
// confirm the diagnosis (--gtest_also_run_disabled_tests --gtest_filter='*Lazy*').
TEST(NetGpu, DISABLED_StagedLazyLoading) { runPath(Path::kStagedLazy); }

}  // namespace
