// mkcclAllGatherGemm across emulated nodes (MKCCL_RANKS_PER_NODE, libfabric tcp between them), in
// one process (a thread per rank; ranks share the GPUs there are, MKCCL_SHARE_GPUS): 2 x 1, 2 x 2
// and 4 x 1. Against a reference computed on the CPU in fp64 from the device inputs (fresh random
// data each run), outputs poisoned first:
//   - odd shapes (shards not multiples of 128 rows, N and K tails), with and without gatheredA:
//     the fused kernel (ag_gemm.net=fused) with its fused plan (model's comm CTAs, side teams only)
//     and its sequential plan; auto, the default (over tcp, as here, the split route: this node's
//     rows while the other nodes' shards cross, then theirs piece by piece; 1 piece at 72 and 200
//     rows, 2 at 256, 3 at 1000 by the rule); the split route with 3 pieces forced
//     (ag_gemm.net_pieces);
//   - 20 calls queued back to back, each with its own inputs and outputs, on both routes;
//   - a window too small for one shard per node: mkcclInvalidUsage that says what to raise;
//   - a rank of the other node that never joins: the others' waits end in an error, no hang.
// (GEMM+ReduceScatter / GEMM+AllReduce across nodes: gemm_rs_net_test.)
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdlib.h>
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>
#include "net_world.h"

using namespace mkccl::test;

namespace {

constexpr size_t kEs = 2;

// One rank's buffers for one call; the reference from every rank's A (host copies) and this W.
struct Call {
  size_t m = 0, M = 0, N = 0, K = 0;
  mkcclDataType_t t = mkcclBfloat16;
  char *A = nullptr, *W = nullptr, *C = nullptr, *G = nullptr;
  bool ok = false;
  void alloc(int ws, size_t m_, size_t N_, size_t K_, mkcclDataType_t type, bool gathered, uint64_t seed, int rank,
             cudaStream_t s) {
    m = m_;
    M = m * ws;
    N = N_;
    K = K_;
    t = type;
    ok = cudaMalloc(&A, m * K * kEs) == cudaSuccess && cudaMalloc(&W, N * K * kEs) == cudaSuccess &&
         cudaMalloc(&C, M * N * kEs) == cudaSuccess && (!gathered || cudaMalloc(&G, M * K * kEs) == cudaSuccess);
    if (!ok) return;
    fillRandom(A, m * K, t, seed * 7919 + rank * 2 + 1, 1.0f, s);
    fillRandom(W, N * K, t, seed * 7919 + rank * 2 + 2, 1.0f, s);
    poison(C, M * N * kEs, s);
    if (G) poison(G, M * K * kEs, s);
  }
  mkcclResult_t run(mkcclComm_t c, cudaStream_t s) const { return mkcclAllGatherGemm(A, W, C, G, M, N, K, t, c, s); }
  void release() {
    for (char* p : {A, W, C, G}) cudaFree(p);
    A = W = C = G = nullptr;
  }
};

// Every rank's shard as doubles (after a sync), gathered in rank order.
std::vector<double> gatheredRef(const std::vector<Call*>& calls) {
  std::vector<double> g;
  for (const Call* c : calls) {
    const std::vector<double> a = toHostDouble(c->A, c->m * c->K, c->t);
    g.insert(g.end(), a.begin(), a.end());
  }
  return g;
}

// C of rank r against gathered A . W_r^T in fp64; G exactly. Returns a failure message or "".
std::string check(const Call& c, const std::vector<double>& gA) {
  const std::vector<double> w = toHostDouble(c.W, c.N * c.K, c.t);
  std::vector<double> ref(c.M * c.N);
  for (size_t i = 0; i < c.M; ++i)
    for (size_t j = 0; j < c.N; ++j) {
      double acc = 0;
      const double* a = &gA[i * c.K];
      const double* b = &w[j * c.K];
      for (size_t k = 0; k < c.K; ++k) acc += a[k] * b[k];
      ref[i * c.N + j] = acc;
    }
  const ErrStats e = compare(toHostDouble(c.C, c.M * c.N, c.t), ref, 1e-2);
  if (e.wrong != 0)
    return "C: " + std::to_string(e.wrong) + " wrong, first at row " + std::to_string(e.firstWrong / c.N) + " col " +
           std::to_string(e.firstWrong % c.N) + " (max rel err " + std::to_string(e.maxRelErr) + ")";
  if (c.G) {
    const ErrStats eg = compare(toHostDouble(c.G, c.M * c.K, c.t), gA, 0.0);
    if (eg.wrong != 0)
      return "gatheredA: " + std::to_string(eg.wrong) + " wrong, first at row " + std::to_string(eg.firstWrong / c.K);
  }
  return "";
}

struct Shape {
  size_t m, N, K;
};

// Shards of 200 and 72 rows (tiles straddle shards and nodes), N and K tails, several pieces per
// shard (1000 x 520: slices of 64 rows, pieces of 512).
const Shape kShapes[] = {{200, 392, 520}, {72, 136, 264}, {1000, 136, 520}, {256, 256, 512}};

void runShapes(NetWorld& w, uint64_t seed) {
  const int ws = w.size();
  const char* plans[] = {"ag_gemm.net=fused;ag_gemm.plan=fused", "ag_gemm.net=fused;ag_gemm.plan=fused;ag_gemm.comm_ctas=0",
                         "ag_gemm.net=fused;ag_gemm.plan=sequential", "", "ag_gemm.net=split;ag_gemm.net_pieces=3"};
  std::vector<Call> calls(ws);
  std::vector<Call*> ptrs;
  for (Call& c : calls) ptrs.push_back(&c);
  int i = 0;
  for (const char* plan : plans)
    for (const Shape& s : kShapes)
      for (int g = 0; g < 2; ++g) {
        ++i;
        const std::string where = std::string("plan '") + plan + "', m=" + std::to_string(s.m) + " N=" +
                                  std::to_string(s.N) + " K=" + std::to_string(s.K) + (g ? ", gatheredA" : "") +
                                  ", seed " + std::to_string(seed);
        w.onEveryRank([&](int r) {
          EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], plan));
          Call& c = calls[r];
          c.alloc(ws, s.m, s.N, s.K, mkcclBfloat16, g != 0, seed + i, r, w.streams[r]);
          EXPECT_TRUE(c.ok);
          EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
          const mkcclResult_t res = c.ok ? c.run(w.comms[r], w.streams[r]) : mkcclInternalError;
          EXPECT_EQ(mkcclSuccess, res) << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
          EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
          mkcclResult_t async = mkcclSuccess;
          mkcclCommGetAsyncError(w.comms[r], &async);
          EXPECT_EQ(mkcclSuccess, async) << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
        });
        const std::vector<double> gA = gatheredRef(ptrs);
        w.onEveryRank([&](int r) {
          const std::string err = check(calls[r], gA);
          EXPECT_EQ("", err) << where << ", rank " << r;
          calls[r].release();
        });
        if (testing::Test::HasFailure()) return;
      }
  w.onEveryRank([&](int r) { mkcclSetTuning(w.comms[r], ""); });
}

// 20 calls queued without a host sync, each with its own fresh inputs and poisoned outputs.
void runBackToBack(NetWorld& w, uint64_t seed, const char* tuning) {
  const int ws = w.size(), calls = 20;
  w.onEveryRank([&](int r) { EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)); });
  std::vector<std::vector<Call>> cs(calls, std::vector<Call>(ws));
  w.onEveryRank([&](int r) {
    for (int i = 0; i < calls; ++i) {
      cs[i][r].alloc(ws, 136, 200, 264 + 8 * (i % 3), mkcclBfloat16, i % 4 == 1, seed + 1000 + i, r, w.streams[r]);
      EXPECT_TRUE(cs[i][r].ok);
    }
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    for (int i = 0; i < calls; ++i)
      EXPECT_EQ(mkcclSuccess, cs[i][r].run(w.comms[r], w.streams[r])) << "call " << i << ": " << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    mkcclResult_t async = mkcclSuccess;
    mkcclCommGetAsyncError(w.comms[r], &async);
    EXPECT_EQ(mkcclSuccess, async) << mkcclGetLastError(w.comms[r]);
  });
  for (int i = 0; i < calls; ++i) {
    std::vector<Call*> ptrs;
    for (Call& c : cs[i]) ptrs.push_back(&c);
    const std::vector<double> gA = gatheredRef(ptrs);
    w.onEveryRank([&](int r) {
      EXPECT_EQ("", check(cs[i][r], gA)) << "call " << i << ", rank " << r << ", tuning '" << tuning << "', seed "
                                          << seed;
      cs[i][r].release();
    });
  }
  w.onEveryRank([&](int r) { mkcclSetTuning(w.comms[r], ""); });
}

class AgGemmNet : public testing::TestWithParam<Split> {};

TEST_P(AgGemmNet, ShapesPlansAndGatheredA) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runShapes(w, seedOf());
}

TEST_P(AgGemmNet, TwentyCallsBackToBack) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runBackToBack(w, seedOf(), "ag_gemm.net=fused");
}

TEST_P(AgGemmNet, TwentyCallsBackToBackSplit) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runBackToBack(w, seedOf(), "ag_gemm.net=split");
}

INSTANTIATE_TEST_SUITE_P(Splits, AgGemmNet, MKCCL_NET_SPLITS);

// A window (2 MiB: 1 MiB per node) too small for 2 MiB shards: a clear mkcclInvalidUsage on every
// rank, nothing queued; a call that fits still works afterwards.
TEST(AgGemmNetErrors, WindowTooSmall) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}), 2 << 20);
  w.onEveryRank([&](int r) {
    Call big, small;
    big.alloc(2, 1024, 128, 1024, mkcclBfloat16, false, 1, r, w.streams[r]);
    small.alloc(2, 128, 128, 256, mkcclBfloat16, false, 2, r, w.streams[r]);
    ASSERT_TRUE(big.ok && small.ok);
    EXPECT_EQ(mkcclInvalidUsage, big.run(w.comms[r], w.streams[r]));
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(w.comms[r])).find("MKCCL_NET_BUFFER_BYTES"))
        << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(mkcclSuccess, small.run(w.comms[r], w.streams[r])) << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    big.release();
    small.release();
  });
}

// Rank 1 (the other node) never makes the call: rank 0's waits (its counterpart's "ready", the
// pieces) end in an error within the timeout, and its kernel leaves.
// tuning: "ag_gemm.net=fused" (the fused kernel) or "" (auto: the split route).
void counterpartNeverJoins(const char* tuning) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}), 0, 3000);
  std::vector<Call> calls(2);
  w.onEveryRank([&](int r) { EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)); });
  w.onEveryRank([&](int r) {  // a first call on both: sizes the regions
    calls[r].alloc(2, 256, 256, 512, mkcclBfloat16, false, 4, r, w.streams[r]);
    ASSERT_TRUE(calls[r].ok);
    EXPECT_EQ(mkcclSuccess, calls[r].run(w.comms[r], w.streams[r])) << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  });
  expectCounterpartNeverJoins(w, calls);
}

TEST(AgGemmNetErrors, CounterpartNeverJoins) { counterpartNeverJoins("ag_gemm.net=fused"); }
TEST(AgGemmNetErrors, SplitCounterpartNeverJoins) { counterpartNeverJoins(""); }

// Overlap on emulated nodes (2 x 1, or MKCCL_NET_BENCH_SPLIT; the ranks in this process; run with
// --gtest_also_run_disabled_tests --gtest_filter='*Overlap*'): per shape, the median over
// iterations of the fused call, of the GEMM alone (mkcclGemm on the gathered shape) and of the
// transfer alone (mkcclAllGather of the shards across the same nodes: window in, tcp, window out),
// every rank running at once as in the fused call; ratio = fused / max(GEMM, transfer); the fused
// call again with pieces of 128 and 64 KiB (ag_gemm.net_piece_kib), and the split route
// (ag_gemm.net=split, split_us). Prints one JSON
// line per shape ("BENCH {...}"). Ranks sharing one GPU compete for it: the numbers are this
// setup's, not a node's.
TEST(AgGemmNetBench, DISABLED_Overlap) {
  const Split netSplit = benchSplit();
  NET_WORLD_OR_SKIP(w, netSplit);
  const int ws = w.size(), warm = 3, iters = 15;
  const Shape shapes[] = {{2048, 8192, 2048}, {2048, 32768, 2048}, {4096, 16384, 4096}, {1024, 65536, 4096}};
  HostBarrier bar(ws);
  for (const Shape& s : shapes) {
    std::vector<double> fused(ws), fused128(ws), fused64(ws), split(ws), gemm(ws), xfer(ws);
    w.onEveryRank([&](int r) {
      cudaStream_t st = w.streams[r];
      Call c;
      c.alloc(ws, s.m, s.N, s.K, mkcclBfloat16, false, 77, r, st);
      char* gA = nullptr;
      ASSERT_TRUE(c.ok && cudaMalloc(&gA, c.M * c.K * kEs) == cudaSuccess);
      fillRandom(gA, c.M * c.K, c.t, 5 + r, 1.0f, st);
      RankTimer timeIt(st, bar, w.comms[r], warm, iters);
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], "ag_gemm.net=fused"));
      fused[r] = timeIt([&] { return c.run(w.comms[r], st); });
      // Finer pieces on the network (ag_gemm.net_piece_kib; default 512 KiB), in the same run.
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], "ag_gemm.net=fused;ag_gemm.net_piece_kib=128"));
      fused128[r] = timeIt([&] { return c.run(w.comms[r], st); });
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], "ag_gemm.net=fused;ag_gemm.net_piece_kib=64"));
      fused64[r] = timeIt([&] { return c.run(w.comms[r], st); });
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], "ag_gemm.net=split"));
      split[r] = timeIt([&] { return c.run(w.comms[r], st); });
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], ""));
      gemm[r] = timeIt([&] { return mkcclGemm(gA, c.W, c.C, c.M, c.N, c.K, c.t, c.t, st); });
      xfer[r] = timeIt([&] { return mkcclAllGather(c.A, gA, c.m * c.K, c.t, w.comms[r], st); });
      cudaFree(gA);
      c.release();
    });
    const double f = *std::max_element(fused.begin(), fused.end());
    const double f128 = *std::max_element(fused128.begin(), fused128.end());
    const double f64 = *std::max_element(fused64.begin(), fused64.end());
    const double sp = *std::max_element(split.begin(), split.end());
    const double g = *std::max_element(gemm.begin(), gemm.end());
    const double x = *std::max_element(xfer.begin(), xfer.end());
    std::printf("BENCH {\"op\":\"ag_gemm_net\",\"split\":\"%s\",\"M\":%zu,\"N\":%zu,\"K\":%zu,\"shard_bytes\":%zu,"
                "\"fused_us\":%.1f,\"gemm_alone_us\":%.1f,\"transfer_alone_us\":%.1f,\"floor_us\":%.1f,"
                "\"overlap_ratio\":%.3f,\"fused_piece128_us\":%.1f,\"overlap_ratio_piece128\":%.3f,"
                "\"fused_piece64_us\":%.1f,\"overlap_ratio_piece64\":%.3f,\"split_us\":%.1f,"
                "\"split_overlap_ratio\":%.3f,\"iters\":%d}\n",
                splitText(netSplit).c_str(), s.m * ws, s.N, s.K, s.m * s.K * kEs, f, g, x, std::max(g, x), f / std::max(g, x), f128,
                f128 / std::max(g, x), f64, f64 / std::max(g, x), sp, sp / std::max(g, x), iters);
    std::fflush(stdout);
  }
}

}  // namespace
