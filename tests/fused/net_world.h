// Emulated nodes for the fused ops' GPU tests across nodes (ag_gemm_net_test, gemm_rs_net_test):
// MKCCL_RANKS_PER_NODE splits the ranks of one process (a thread per rank, ranks sharing the GPUs
// there are, MKCCL_SHARE_GPUS) into nodes joined by libfabric tcp on loopback.
#pragma once
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include "rank_threads.h"
#include "test_util.h"

#ifndef MKCCL_HAVE_LIBFABRIC
#define MKCCL_HAVE_LIBFABRIC 1
#endif

namespace mkccl {
namespace test {

struct Split {
  int nodes, perNode;
};

// Emulated nodes over the GPUs at hand (rank r on GPU r % gpus). Env set only around init.
struct NetWorld {
  std::vector<mkcclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<int> devs;
  std::string why;  // why it could not be set up (then comms is empty)

  NetWorld(const Split& s, long long windowBytes = 0, int timeoutMs = 30000) {
    const int n = s.nodes * s.perNode, gpus = gpuCount();
    for (int r = 0; r < n; ++r) devs.push_back(r % gpus);
    SharedGpus share(devs);
    setenv("MKCCL_RANKS_PER_NODE", std::to_string(s.perNode).c_str(), 1);
    if (!getenv("MKCCL_NET")) setenv("MKCCL_NET", "efa", 1);
    if (!getenv("MKCCL_NET_PROVIDER")) setenv("MKCCL_NET_PROVIDER", "tcp", 1);
    if (windowBytes) setenv("MKCCL_NET_BUFFER_BYTES", std::to_string(windowBytes).c_str(), 1);
    setenv("MKCCL_TIMEOUT_MS", std::to_string(timeoutMs).c_str(), 1);
    comms.assign(n, nullptr);
    const mkcclResult_t init = mkcclCommInitAll(comms.data(), n, devs.data());
    unsetenv("MKCCL_RANKS_PER_NODE");
    unsetenv("MKCCL_NET_BUFFER_BYTES");
    unsetenv("MKCCL_TIMEOUT_MS");
    if (init != mkcclSuccess) {
      why = mkcclGetLastError(nullptr);
      comms.clear();
      return;
    }
    streams.assign(n, nullptr);
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(devs[r]);
      cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
    }
  }
  ~NetWorld() {
    for (size_t r = 0; r < streams.size(); ++r) {
      cudaSetDevice(devs[r]);
      cudaStreamSynchronize(streams[r]);
      cudaStreamDestroy(streams[r]);
    }
    for (mkcclComm_t c : comms) EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(c));
  }
  bool ok() const { return !comms.empty(); }
  int size() const { return static_cast<int>(devs.size()); }
  template <class Fn>
  void onEveryRank(Fn fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r)
      threads.emplace_back([&, r] {
        cudaSetDevice(devs[r]);
        fn(r);
      });
    for (auto& t : threads) t.join();
  }
};

#define NET_WORLD_OR_SKIP(w, split, ...)                                                            \
  MKCCL_REQUIRE_GPUS(1);                                                                            \
  if (!MKCCL_HAVE_LIBFABRIC) GTEST_SKIP() << "built without libfabric: emulated nodes have no wire"; \
  NetWorld w(split, ##__VA_ARGS__);                                                                 \
  if (!w.ok()) GTEST_SKIP() << "emulated nodes could not be set up here: " << w.why

inline double medianOf(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The overlap benches' timer of one rank: each call alone on the stream after a host barrier of
// the ranks (every rank times the same sequence), the median in us over `iters` calls after `warm`.
struct RankTimer {
  cudaStream_t st;
  HostBarrier& bar;
  mkcclComm_t comm;
  int warm, iters;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  RankTimer(cudaStream_t s, HostBarrier& b, mkcclComm_t c, int w, int i) : st(s), bar(b), comm(c), warm(w), iters(i) {
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
  }
  ~RankTimer() {
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  template <class Fn>
  double operator()(const Fn& fn) {
    std::vector<float> ms;
    for (int i = 0; i < warm + iters; ++i) {
      cudaStreamSynchronize(st);
      bar.wait();
      cudaEventRecord(e0, st);
      EXPECT_EQ(mkcclSuccess, fn()) << mkcclGetLastError(comm);
      cudaEventRecord(e1, st);
      cudaEventSynchronize(e1);
      float t = 0;
      cudaEventElapsedTime(&t, e0, e1);
      if (i >= warm) ms.push_back(t);
    }
    return medianOf(ms) * 1e3;
  }
};

// A fresh seed, printed so that a failure can be replayed.
inline uint64_t seedOf() {
  const uint64_t s = freshSeed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(s));
  return s;
}

// The node splits every emulated-node suite runs (nodes x ranks per node), named "2x1" and so on.
inline std::string splitName(const testing::TestParamInfo<Split>& i) {
  return std::to_string(i.param.nodes) + "x" + std::to_string(i.param.perNode);
}
#define MKCCL_NET_SPLITS testing::Values(Split{2, 1}, Split{2, 2}, Split{4, 1}), splitName

// The overlap benches' split: MKCCL_NET_BENCH_SPLIT=<nodes>x<ranks per node> (default 2x1; with as
// many GPUs as ranks, each rank has its own).
inline Split benchSplit() {
  Split s{2, 1};
  if (const char* e = getenv("MKCCL_NET_BENCH_SPLIT")) {
    int n = 0, l = 0;
    if (sscanf(e, "%dx%d", &n, &l) == 2 && n >= 2 && l >= 1) s = Split{n, l};
  }
  return s;
}
inline std::string splitText(const Split& s) { return std::to_string(s.nodes) + "x" + std::to_string(s.perNode); }

// Two ranks, each of which has made one call of its op (`calls[r]`, with run(comm, stream) and
// release()): rank 0 calls again and rank 1 never does. Rank 0's kernel must leave with the
// communicator's error within the timeout (not hang), then both communicators go.
template <class Call>
void expectCounterpartNeverJoins(NetWorld& w, std::vector<Call>& calls) {
  cudaSetDevice(w.devs[0]);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(mkcclSuccess, calls[0].run(w.comms[0], w.streams[0])) << mkcclGetLastError(w.comms[0]);
  EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[0])) << "the kernels must exit cleanly";
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 60.0);
  mkcclResult_t async = mkcclSuccess;
  mkcclCommGetAsyncError(w.comms[0], &async);
  EXPECT_NE(mkcclSuccess, async) << "a wait for the absent counterpart must fail";
  std::printf("absent counterpart: error after %.1f s: %s\n", secs, mkcclGetLastError(w.comms[0]));
  mkcclCommAbort(w.comms[0]);
  const mkcclResult_t d = mkcclCommDestroy(w.comms[1]);  // its peer is gone: whatever it says, no hang
  std::printf("rank 1 destroyed: %s\n", mkcclGetErrorString(d));
  w.comms.clear();
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(w.devs[r]);
    calls[r].release();
  }
}

}  // namespace test
}  // namespace mkccl
