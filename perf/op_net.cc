// mkccl-perf fifo / netbw: the inter-node path's own numbers (docs/INTERNODE.md).
//   fifo   commands per second through the device->host FIFO and the proxy thread: a kernel of
//          C CTAs x W warps pushes no-op commands (one pusher thread per warp), the proxy consumes
//          and completes them, each pusher waits for its last one. Baseline: an empty kernel.
//          One process per GPU; each measures its own FIFO.
//   netbw  bandwidth between two ranks as two "nodes" (run with -g 2; MKCCL_RANKS_PER_NODE is not
//          needed: this op builds its own transport): a kernel on each rank puts [0, bytes) of its
//          window to the other in 4 MiB chunks through FIFO -> proxy -> libfabric (MKCCL_NET_PROVIDER,
//          default tcp) -> peer proxy -> arrival flags, and waits for the peer's data. The window is
//          pinned host memory mapped into the GPU, as netInitComm makes it for tcp. algbw is per
//          direction (both directions run at once). Baseline: copying the same bytes from GPU memory
//          into the window and back out (what a collective adds around the wire).
// The inter-node collectives themselves are measured by the allgather / reducescatter / allreduce
// ops with MKCCL_RANKS_PER_NODE set (e.g. MKCCL_RANKS_PER_NODE=2 MKCCL_NET=efa
// MKCCL_NET_PROVIDER=tcp mkccl-perf allreduce -g 4).
// Needs mkccl_net_core (the network core outside libmkccl's hidden symbols) linked in and
// MKCCL_PERF_NET defined (tests/net/CMakeLists.txt does both for now); compiles to nothing otherwise.
#ifdef MKCCL_PERF_NET
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include "transport/selftest/net_selftest.h"
#include "launch/launch.h"
#include "perf.h"
#include "base/log.h"
#include "runtime/proxy.h"
#include "transport/net.h"

namespace mkccl {
namespace perf {
namespace {

constexpr int kFlags = 4096;
constexpr int kTimeoutMs = 60000;

// The fifo op's proxy never posts: no-op commands complete in the proxy itself.
class NullTransport final : public net::Transport {
 public:
  const char* name() const override { return "null"; }
  net::Caps caps() const override { return net::Caps{false, false, 64}; }
  mkcclResult_t setup(const net::Setup&) override { return mkcclSuccess; }
  mkcclResult_t connData(int, std::vector<uint8_t>* out) override {
    out->clear();
    return mkcclSuccess;
  }
  mkcclResult_t connect(int, const void*, size_t) override { return mkcclSuccess; }
  mkcclResult_t post(int, const net::PutOp*, int, int* taken) override {
    *taken = 0;
    return setError(mkcclInternalError, "null transport: no puts");
  }
  mkcclResult_t poll(std::vector<net::Event>*) override { return mkcclSuccess; }
};

// Everything one rank needs to drive the network path from a kernel.
struct Path {
  netselftest::Harness h{};
  char* dbuf = nullptr;  // GPU memory for the baseline copies
  std::unique_ptr<net::Transport> t;
  FifoReader reader;
  std::unique_ptr<Proxy> proxy;
  std::mutex m;
  std::string error;

  ~Path() {
    if (proxy) proxy->stop(10000);
    proxy.reset();
    t.reset();
    if (dbuf) cudaFree(dbuf);
    if (h.window) netselftest::harnessDestroy(&h);
  }
  int startProxy(int rank, int nranks, uint64_t windowBytes, bool flags) {
    reader.init(h.slots, h.ctl, h.fifoSlots);
    ProxyOptions po;
    po.rank = rank;
    po.nranks = nranks;
    po.flagsPerPeer = kFlags;
    po.timeoutMs = kTimeoutMs;
    po.windowBytes = windowBytes;
    po.flags = flags ? h.flags : nullptr;
    DevError* err = h.errHost;
    proxy.reset(new Proxy(po, &reader, t.get(), [this, err](mkcclResult_t, const std::string& msg) {
      std::lock_guard<std::mutex> lock(m);
      error = msg;
      ((volatile DevError*)err)->abort = 1;
    }));
    if (proxy->start() != mkcclSuccess) {
      fprintf(stderr, "net: proxy: %s\n", lastError());
      return 1;
    }
    return 0;
  }
  // Non-zero (with a message) if the device or the proxy recorded an error.
  int check(const char* op) {
    if (cudaStreamSynchronize(nullptr) != cudaSuccess || h.errHost->code != 0 || proxy->failed()) {
      std::lock_guard<std::mutex> lock(m);
      fprintf(stderr, "%s: device error %d (site %d), proxy: %s\n", op, h.errHost->code, h.errHost->site, error.c_str());
      return 1;
    }
    return 0;
  }
};

int runFifo(const Args& a, Env& env, std::vector<Result>* out) {
  Path p;
  if (netselftest::harnessCreate(0, 1, 1 << 20, kFlags, 4096, kTimeoutMs, &p.h) != mkcclSuccess) {
    fprintf(stderr, "fifo: %s\n", lastError());
    return 1;
  }
  p.t.reset(new NullTransport());
  if (p.startProxy(0, 1, 1 << 20, false)) return 1;
  uint64_t seq = 1;
  // Baseline in the same run: a kernel of the same grid that pushes nothing.
  struct Cfg {
    int ctas, warps, per;
  } cfgs[] = {{1, 1, 4096}, {8, 1, 1024}, {32, 1, 512}, {132, 1, 128}, {132, 4, 32}};
  for (const Cfg& c : cfgs) {
    const long long total = (long long)c.ctas * c.warps * c.per;
    Result r;
    r.op = "fifo";
    r.worldSize = env.nranks;
    r.dtype = "-";
    r.count = (size_t)total;
    r.timeUs = timeMedianUs([&](int) { netselftest::launchFifoNops(p.h, ++seq, c.ctas, c.warps, c.per, env.stream); },
                            a.warmup, a.iters, env.stream);
    if (p.check("fifo")) return 1;
    r.baseline = "empty kernel";
    r.baselineTimeUs = timeMedianUs([&](int) { netselftest::launchFifoNops(p.h, ++seq, c.ctas, c.warps, 0, env.stream); },
                                    a.warmup, a.iters, env.stream);
    if (p.check("fifo")) return 1;
    r.extra["cmds_per_s"] = total / (r.timeUs * 1e-6);
    r.extra["ns_per_cmd"] = r.timeUs * 1e3 / total;
    char note[96];
    snprintf(note, sizeof(note), "%d CTAs x %d pushers, %d commands each", c.ctas, c.warps, c.per);
    r.note = note;
    if (env.emit) env.emit(r);
    else out->push_back(r);
  }
  return 0;
}

int runNetbw(const Args& a, Env& env, std::vector<Result>* out) {
  if (env.nranks != 2) {
    fprintf(stderr, "netbw: needs exactly 2 ranks (mkccl-perf -g 2 netbw), got %d\n", env.nranks);
    return 1;
  }
  const char* prov = getenv("MKCCL_NET_PROVIDER");
  const std::string provider = prov && *prov ? prov : "tcp";
  const std::string why = net::fabricUnavailableReason(provider);
  if (!why.empty()) {
    fprintf(stderr, "netbw: %s\n", why.c_str());
    return 1;
  }
  const uint64_t maxBytes = std::max<uint64_t>(a.maxBytes, 8), half = (maxBytes + (4 << 20)) & ~(uint64_t)4095;
  const uint64_t window = 2 * half;
  const int rank = env.rank, peer = 1 - rank;
  Path p;
  if (netselftest::harnessCreate(rank, 2, window, kFlags, 4096, kTimeoutMs, &p.h, /*hostWindow=*/true) != mkcclSuccess ||
      cudaMalloc((void**)&p.dbuf, half) != cudaSuccess || net::fabricCreate(provider, &p.t) != mkcclSuccess) {
    fprintf(stderr, "netbw: setup: %s\n", lastError());
    return 1;
  }
  net::Setup s;
  s.rank = rank;
  s.nranks = 2;
  s.window = net::Memory{p.h.window, window, false, -1};
  s.flagsPerPeer = kFlags;
  s.wantRanges = false;
  s.loopbackOnly = true;
  std::vector<uint8_t> blob;
  if (p.t->setup(s) != mkcclSuccess || p.t->connData(peer, &blob) != mkcclSuccess || blob.size() > 1020) {
    fprintf(stderr, "netbw: transport: %s\n", lastError());
    return 1;
  }
  std::vector<uint8_t> mine(1024, 0), all(2048, 0);
  const uint32_t len = (uint32_t)blob.size();
  memcpy(mine.data(), &len, 4);
  memcpy(mine.data() + 4, blob.data(), len);
  std::string err;
  if (launch::worldAllGather(mine.data(), 1024, all.data(), &err) != 0) {
    fprintf(stderr, "netbw: exchange: %s\n", err.c_str());
    return 1;
  }
  uint32_t plen;
  memcpy(&plen, all.data() + 1024 * peer, 4);
  if (plen > 1020 || p.t->connect(peer, all.data() + 1024 * peer + 4, plen) != mkcclSuccess) {
    fprintf(stderr, "netbw: connect: %s\n", lastError());
    return 1;
  }
  if (p.startProxy(rank, 2, window, true)) return 1;
  unsigned long long* bad = nullptr;
  cudaMalloc(&bad, sizeof(*bad));
  uint64_t seq = 1;
  for (uint64_t bytes = std::max<uint64_t>(a.minBytes, 8); bytes <= maxBytes;
       bytes = std::max<uint64_t>(bytes + 1, (uint64_t)(bytes * a.factor))) {
    const uint64_t chunk = std::min<uint64_t>(bytes, 4ull << 20);
    Result r;
    r.op = "netbw";
    r.worldSize = 2;
    r.dtype = "u8";
    r.bytes = bytes;
    r.count = bytes;
    if (a.check) {
      const uint32_t seed = (uint32_t)(a.seed + bytes);
      cudaStreamSynchronize(env.stream);
      memset(p.h.window + half, 0xee, bytes);
      netselftest::launchFill(p.h, bytes, seed, env.stream);
      cudaStreamSynchronize(env.stream);
      launch::worldBarrier(&err);
      cudaMemsetAsync(bad, 0, sizeof(*bad), env.stream);
      netselftest::launchExchange(p.h, peer, bytes, chunk, half, ++seq, env.stream);
      netselftest::launchVerify(p.h, peer, bytes, half, seed, bad, env.stream);
      unsigned long long nbad = 0;
      cudaMemcpyAsync(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost, env.stream);
      cudaStreamSynchronize(env.stream);
      if (p.check("netbw")) return 1;
      r.wrong = (long long)nbad;
      launch::worldBarrier(&err);
    }
    r.timeUs = timeMedianUs([&](int) { netselftest::launchExchange(p.h, peer, bytes, chunk, half, ++seq, env.stream); },
                            a.warmup, a.iters, env.stream);
    if (p.check("netbw")) return 1;
    r.baseline = "gpu->window->gpu copy";
    r.baselineTimeUs = timeMedianUs(
        [&](int) {
          cudaMemcpyAsync(p.h.window, p.dbuf, bytes, cudaMemcpyDefault, env.stream);
          cudaMemcpyAsync(p.dbuf, p.h.window + half, bytes, cudaMemcpyDefault, env.stream);
        },
        a.warmup, a.iters, env.stream);
    r.algbwGbps = bytes / (r.timeUs * 1e3);
    r.note = "provider " + provider + ", host window, " + std::to_string(chunk >> 10) + " KiB chunks";
    launch::worldBarrier(&err);
    if (env.emit) env.emit(r);
    else out->push_back(r);
  }
  cudaFree(bad);
  launch::worldBarrier(&err);
  return 0;
}

}  // namespace

MKCCL_PERF_OP("fifo", runFifo,
              "commands/s through the device->host FIFO and the proxy thread (a kernel pushing no-ops)");
MKCCL_PERF_OP("netbw", runNetbw,
              "GPU-to-GPU bandwidth through FIFO, proxy and libfabric (tcp) between 2 ranks (-g 2)");

}  // namespace perf
}  // namespace mkccl

#endif  // MKCCL_PERF_NET
