// mkcclGemmReduceScatter / mkcclGemmAllReduce across emulated nodes (MKCCL_RANKS_PER_NODE,
// libfabric tcp between them), in one process (a thread per rank; ranks share the GPUs there are):
// 2 x 1, 2 x 2 and 4 x 1. Against a reference computed on the CPU in fp64 from the device inputs
// (fresh random data each run), outputs poisoned first:
//   - odd shapes (M per rank not a multiple of 128, AllReduce M not divisible by the ranks, N and K
//     tails), the auto plan and a forced fused plan (runs the sequential route across nodes), and
//     the exact route (bias, fp32 output); AllReduce results bit-identical on every rank;
//   - 20 calls queued back to back, ReduceScatter and AllReduce alternating, each with its own
//     inputs and outputs;
//   - a rank of the other node that never joins: the others' waits end in an error, no hang.
// GemmRsNet* set gemm_rs.net / gemm_ar.net = sequential (the hierarchical collectives after the GEMM);
// GemmRsNetSplit* the split route, on request and auto (the default: over tcp, as here, the split
// route) (GEMMs of row
// pieces, the other nodes' rows first, their sums put on the network while this node's rows are
// computed, each piece summed as it lands; the same references, shapes of 1, 2 and 5 pieces, 20
// calls back to back, the absent counterpart).
// GemmRsNetFused* run the fused route on request, gemm_rs.net / gemm_ar.net = fused
// (GEMM+ReduceScatter with the network inside the
// persistent kernel, a put per 128-row M-block waited for per piece; the AllReduce as that
// ReduceScatter then the hierarchical AllGather): the same references, odd shapes (several pieces
// per rank in the 200-, 333- and 1000-row shapes, the last clipped), cluster tiles
// (gemm.variant=256x2), 20 calls back to back alternating the two, and the absent counterpart.
// The overlap benchmark (*Overlap*, disabled by default) times the call against the GEMM alone and
// the transfer alone.
#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>
#include "net_world.h"

using namespace mkccl::test;

namespace {

constexpr size_t kEs = 2;

// One rank's buffers for one call. RS: C [M / ws, N]; AR: C [M, N]. Exact: fp32 C and an fp32 bias
// (the same on every rank: seeded alike).
struct Call {
  bool ar = false, exact = false;
  int ws = 1;
  size_t M = 0, N = 0, K = 0;
  char *A = nullptr, *W = nullptr, *C = nullptr, *bias = nullptr;
  bool ok = false;
  size_t rows() const { return ar ? M : M / ws; }
  size_t cBytes() const { return rows() * N * (exact ? 4 : kEs); }
  mkcclDataType_t outType() const { return exact ? mkcclFloat32 : mkcclBfloat16; }
  void alloc(bool ar_, bool exact_, int ws_, size_t M_, size_t N_, size_t K_, uint64_t seed, int rank,
             cudaStream_t s) {
    ar = ar_;
    exact = exact_;
    ws = ws_;
    M = M_;
    N = N_;
    K = K_;
    ok = cudaMalloc(&A, M * K * kEs) == cudaSuccess && cudaMalloc(&W, N * K * kEs) == cudaSuccess &&
         cudaMalloc(&C, cBytes()) == cudaSuccess && (!exact || cudaMalloc(&bias, N * 4) == cudaSuccess);
    if (!ok) return;
    fillRandom(A, M * K, mkcclBfloat16, seed * 7919 + rank * 2 + 1, 1.0f, s);
    fillRandom(W, N * K, mkcclBfloat16, seed * 7919 + rank * 2 + 2, 1.0f, s);
    if (exact) fillRandom(bias, N, mkcclFloat32, seed * 7919 + 99991, 1.0f, s);
    poison(C, cBytes(), s);
  }
  mkcclResult_t run(mkcclComm_t c, cudaStream_t s) const {
    if (!exact)
      return ar ? mkcclGemmAllReduce(A, W, C, M, N, K, mkcclBfloat16, c, s)
                : mkcclGemmReduceScatter(A, W, C, M, N, K, mkcclBfloat16, c, s);
    mkcclFusedGemmArgs_t x = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
    x.A = A;
    x.M = M;
    x.K = K;
    x.inType = mkcclBfloat16;
    x.outType = mkcclFloat32;
    x.biasType = mkcclFloat32;
    x.weights[0].W = W;
    x.weights[0].C = C;
    x.weights[0].bias = bias;
    x.weights[0].N = N;
    return ar ? mkcclGemmAllReduceEx(&x, c, s) : mkcclGemmReduceScatterEx(&x, c, s);
  }
  void release() {
    for (char* p : {A, W, C, bias}) cudaFree(p);
    A = W = C = bias = nullptr;
  }
};

// S = sum over ranks of A_q . W_q^T in fp64 (after a sync), plus the bias for the exact route.
std::vector<double> sumRef(const std::vector<Call*>& calls) {
  const Call& c0 = *calls[0];
  std::vector<double> S(c0.M * c0.N, 0.0);
  for (const Call* c : calls) {
    const std::vector<double> a = toHostDouble(c->A, c->M * c->K, mkcclBfloat16);
    const std::vector<double> w = toHostDouble(c->W, c->N * c->K, mkcclBfloat16);
    for (size_t i = 0; i < c->M; ++i)
      for (size_t j = 0; j < c->N; ++j) {
        double acc = 0;
        const double* x = &a[i * c->K];
        const double* y = &w[j * c->K];
        for (size_t k = 0; k < c->K; ++k) acc += x[k] * y[k];
        S[i * c->N + j] += acc;
      }
  }
  if (c0.exact) {
    const std::vector<double> b = toHostDouble(c0.bias, c0.N, mkcclFloat32);
    for (size_t i = 0; i < c0.M; ++i)
      for (size_t j = 0; j < c0.N; ++j) S[i * c0.N + j] += b[j];
  }
  return S;
}

// Rank r's C against its rows of S. Returns a failure message or "".
std::string check(const Call& c, int r, const std::vector<double>& S) {
  const size_t first = c.ar ? 0 : size_t(r) * c.rows();
  const std::vector<double> ref(S.begin() + first * c.N, S.begin() + (first + c.rows()) * c.N);
  const ErrStats e = compare(toHostDouble(c.C, c.rows() * c.N, c.outType()), ref, 1e-2);
  if (e.wrong == 0) return "";
  return "C: " + std::to_string(e.wrong) + " wrong, first at row " + std::to_string(e.firstWrong / c.N) + " col " +
         std::to_string(e.firstWrong % c.N) + " (max rel err " + std::to_string(e.maxRelErr) + ")";
}

// AllReduce: every rank's C has the same bits as rank 0's.
std::string sameBits(const std::vector<Call*>& calls) {
  if (!calls[0]->ar) return "";
  std::vector<char> c0(calls[0]->cBytes()), ci(calls[0]->cBytes());
  cudaMemcpy(c0.data(), calls[0]->C, c0.size(), cudaMemcpyDeviceToHost);
  for (size_t i = 1; i < calls.size(); ++i) {
    cudaMemcpy(ci.data(), calls[i]->C, ci.size(), cudaMemcpyDeviceToHost);
    if (memcmp(c0.data(), ci.data(), c0.size()) != 0) return "rank " + std::to_string(i) + "'s C differs from rank 0's";
  }
  return "";
}

struct Shape {
  bool ar;
  size_t mPerRank;  // RS: M = mPerRank * ws; AR: M = mPerRank (not divisible by the ranks)
  size_t N, K;
};

// RS: 200 and 72 rows per rank (tiles straddle ranks and nodes), 256; AR: 333 and 77 rows. N and K
// tails (multiples of 8, not of the tiles).
const Shape kShapes[] = {{false, 200, 392, 520}, {false, 72, 136, 264}, {false, 256, 256, 512},
                         {true, 333, 392, 520},  {true, 77, 136, 264},  {true, 256, 200, 512}};

void runOne(NetWorld& w, const Shape& s, bool exact, const std::string& where, uint64_t seed) {
  const int ws = w.size();
  const size_t M = s.ar ? s.mPerRank : s.mPerRank * ws;
  std::vector<Call> calls(ws);
  std::vector<Call*> ptrs;
  for (Call& c : calls) ptrs.push_back(&c);
  w.onEveryRank([&](int r) {
    Call& c = calls[r];
    c.alloc(s.ar, exact, ws, M, s.N, s.K, seed, r, w.streams[r]);
    EXPECT_TRUE(c.ok);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    const mkcclResult_t res = c.ok ? c.run(w.comms[r], w.streams[r]) : mkcclInternalError;
    EXPECT_EQ(mkcclSuccess, res) << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    mkcclResult_t async = mkcclSuccess;
    mkcclCommGetAsyncError(w.comms[r], &async);
    EXPECT_EQ(mkcclSuccess, async) << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
  });
  const std::vector<double> S = sumRef(ptrs);
  for (int r = 0; r < ws; ++r) EXPECT_EQ("", check(calls[r], r, S)) << where << ", rank " << r;
  EXPECT_EQ("", sameBits(ptrs)) << where;
  for (Call& c : calls) c.release();
}

std::string describe(const Shape& s, const char* plan, bool exact, uint64_t seed) {
  return std::string(s.ar ? "AllReduce" : "ReduceScatter") + ", plan '" + plan + "', m=" +
         std::to_string(s.mPerRank) + " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) +
         (exact ? ", exact route" : "") + ", seed " + std::to_string(seed);
}

// The sequential route across nodes (gemm_rs.net / gemm_ar.net).
constexpr const char* kSequential = "gemm_rs.net=sequential;gemm_ar.net=sequential";
// The fused route on request (the default, auto, takes the sequential one for a GEMM of one wave
// of tiles, as most of these test shapes are).
constexpr const char* kFused = "gemm_rs.net=fused;gemm_ar.net=fused";
// The split route on request (auto, the default, takes it with one rank per node or over tcp, and
// for a GEMM of one wave of fused tiles).
constexpr const char* kSplit = "gemm_rs.net=split;gemm_ar.net=split";

void runShapes(NetWorld& w, uint64_t seed) {
  const char* plans[] = {kSequential, "gemm_rs.plan=fused;gemm_ar.plan=fused;gemm_rs.net=sequential;gemm_ar.net=sequential"};
  int i = 0;
  for (const char* plan : plans) {
    w.onEveryRank([&](int r) { EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], plan)); });
    for (const Shape& s : kShapes) {
      ++i;
      runOne(w, s, false, describe(s, plan, false, seed + i), seed + i);
      if (testing::Test::HasFailure()) return;
    }
  }
  w.onEveryRank([&](int r) { mkcclSetTuning(w.comms[r], ""); });
  // The exact route (fp32 out, bias added once) on two shapes.
  for (const Shape& s : {kShapes[0], kShapes[3]}) {
    ++i;
    runOne(w, s, true, describe(s, "", true, seed + i), seed + i);
    if (testing::Test::HasFailure()) return;
  }
}

// 20 calls queued without a host sync, ReduceScatter and AllReduce alternating, each with its own
// fresh inputs and poisoned outputs.
void runBackToBack(NetWorld& w, uint64_t seed, const char* tuning = kSequential) {
  const int ws = w.size(), n = 20;
  w.onEveryRank([&](int r) { EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)); });
  std::vector<std::vector<Call>> cs(n, std::vector<Call>(ws));
  w.onEveryRank([&](int r) {
    for (int i = 0; i < n; ++i) {
      const bool ar = i % 2 == 1;
      const size_t M = ar ? 136 + 8 * (i % 3) : size_t(72) * ws;
      cs[i][r].alloc(ar, false, ws, M, 200, 264 + 8 * (i % 3), seed + 1000 + i, r, w.streams[r]);
      EXPECT_TRUE(cs[i][r].ok);
    }
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(mkcclSuccess, cs[i][r].run(w.comms[r], w.streams[r])) << "call " << i << ": "
                                                                        << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    mkcclResult_t async = mkcclSuccess;
    mkcclCommGetAsyncError(w.comms[r], &async);
    EXPECT_EQ(mkcclSuccess, async) << mkcclGetLastError(w.comms[r]);
  });
  for (int i = 0; i < n; ++i) {
    std::vector<Call*> ptrs;
    for (Call& c : cs[i]) ptrs.push_back(&c);
    const std::vector<double> S = sumRef(ptrs);
    for (int r = 0; r < ws; ++r) EXPECT_EQ("", check(cs[i][r], r, S)) << "call " << i << ", rank " << r << ", seed " << seed;
    EXPECT_EQ("", sameBits(ptrs)) << "call " << i;
    for (Call& c : cs[i]) c.release();
  }
  w.onEveryRank([&](int r) { mkcclSetTuning(w.comms[r], ""); });
}

// gemm_rs.net=fused / gemm_ar.net=fused: ReduceScatter shapes whose rows per
// rank straddle tiles and nodes (200, 72, 8, 130 rows), N and K tails, and rows that cross the
// network in several pieces (333 rows: 3 pieces, the last of 77 rows; 1000: 8, the last of 104);
// AllReduce shapes (M = 392, 136, 1332: divisible by the ranks, 1332 in pieces of 128 rows; M =
// 333 is not, and falls back to the sequential route); both tile widths, cluster tiles (256x2: a
// cluster row of 2 M-blocks, one of them padding at 333 rows) and both publications. AllReduce
// results must be bit-identical on every rank.
void runFusedShapes(NetWorld& w, uint64_t seed) {
  const Shape shapes[] = {{false, 200, 392, 520}, {false, 72, 136, 264},   {false, 8, 64, 136},
                          {false, 130, 264, 64},  {false, 256, 256, 512},  {false, 333, 136, 264},
                          {false, 1000, 200, 72}, {true, 392, 392, 520},   {true, 136, 136, 264},
                          {true, 1332, 136, 136}, {true, 333, 392, 520}};
  const char* tunings[] = {"gemm_rs.net=fused;gemm_ar.net=fused",
                           "gemm_rs.net=fused;gemm_ar.net=fused;gemm.variant=128x1",
                           "gemm_rs.net=fused;gemm_ar.net=fused;gemm_rs.publish=early",
                           "gemm_rs.net=fused;gemm_ar.net=fused;gemm.variant=256x2"};
  int i = 100;
  for (const char* tuning : tunings) {
    w.onEveryRank([&](int r) { EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)); });
    for (const Shape& s : shapes) {
      ++i;
      runOne(w, s, false, describe(s, tuning, false, seed + i), seed + i);
      if (testing::Test::HasFailure()) break;
    }
    if (testing::Test::HasFailure()) break;
  }
  w.onEveryRank([&](int r) { mkcclSetTuning(w.comms[r], ""); });
}

// gemm_rs.net=split / gemm_ar.net=split: GEMMs of row pieces, the other nodes' rows first. Shapes
// whose blocks cross in one piece (200, 72 rows), in 2 pieces (512 rows of 1 KiB; 1000 rows of
// 528 bytes; 333 rows of 2 KiB, cut 166 + 167) and in 5 (AllReduce, 1332 rows at 2 ranks: 666 rows
// of 2 KiB; at 4 ranks 333 rows, 2 pieces) by netSplitPieces; N and K tails; AllReduce M = 333 is
// not divisible by the ranks and runs the sequential route. On request and with auto (the default).
// AllReduce results bit-identical on every rank.
void runSplitShapes(NetWorld& w, uint64_t seed) {
  const Shape shapes[] = {{false, 200, 392, 520}, {false, 72, 136, 264},  {false, 512, 512, 64},
                          {false, 1000, 264, 72}, {false, 333, 1024, 72}, {true, 392, 392, 520},
                          {true, 1332, 1024, 136}, {true, 333, 392, 520}};
  int i = 200;
  for (const char* tuning : {kSplit, ""}) {  // on request, and auto
    w.onEveryRank([&](int r) { EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)); });
    for (const Shape& s : shapes) {
      ++i;
      runOne(w, s, false, describe(s, tuning, false, seed + i), seed + i);
      if (testing::Test::HasFailure()) break;
    }
    if (testing::Test::HasFailure()) break;
  }
  w.onEveryRank([&](int r) { mkcclSetTuning(w.comms[r], ""); });
}

class GemmRsNet : public testing::TestWithParam<Split> {};

TEST_P(GemmRsNet, ShapesAndRoutes) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runShapes(w, seedOf());
}

TEST_P(GemmRsNet, TwentyCallsBackToBack) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runBackToBack(w, seedOf());
}

INSTANTIATE_TEST_SUITE_P(Splits, GemmRsNet, MKCCL_NET_SPLITS);

// The fused route across nodes (gemm_rs.net=fused).
class GemmRsNetFused : public testing::TestWithParam<Split> {};

TEST_P(GemmRsNetFused, Shapes) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runFusedShapes(w, seedOf());
}

TEST_P(GemmRsNetFused, TwentyCallsBackToBack) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runBackToBack(w, seedOf(), kFused);
}

INSTANTIATE_TEST_SUITE_P(Splits, GemmRsNetFused, MKCCL_NET_SPLITS);

// The split route across nodes (gemm_rs.net=split).
class GemmRsNetSplit : public testing::TestWithParam<Split> {};

TEST_P(GemmRsNetSplit, Shapes) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runSplitShapes(w, seedOf());
}

TEST_P(GemmRsNetSplit, TwentyCallsBackToBack) {
  NET_WORLD_OR_SKIP(w, GetParam());
  runBackToBack(w, seedOf(), kSplit);
}

INSTANTIATE_TEST_SUITE_P(Splits, GemmRsNetSplit, MKCCL_NET_SPLITS);

// Rank 1 (the other node) never makes the call: rank 0's waits end in an error within the
// timeout, and its kernels leave.
// tuning: kSequential (the sequential route) or kFused (the fused route).
void counterpartNeverJoins(const char* tuning) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}), 0, 3000);
  std::vector<Call> calls(2);
  w.onEveryRank([&](int r) { EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)); });
  w.onEveryRank([&](int r) {  // a first call on both: sizes the regions
    calls[r].alloc(false, false, 2, 512, 256, 512, 4, r, w.streams[r]);
    ASSERT_TRUE(calls[r].ok);
    EXPECT_EQ(mkcclSuccess, calls[r].run(w.comms[r], w.streams[r])) << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  });
  expectCounterpartNeverJoins(w, calls);
}

TEST(GemmRsNetErrors, CounterpartNeverJoins) { counterpartNeverJoins(kSequential); }

// The fused route's waits (the counterpart's window, its node sums: 256 rows per rank, 2 pieces)
// end in an error too. Passed on one H200 with one put per counterpart; the per-piece waits have
// not yet run on a GPU.
TEST(GemmRsNetErrors, FusedCounterpartNeverJoins) { counterpartNeverJoins(kFused); }

// The split route's waits (the handshake of its first piece, the pieces, the sends) too.
TEST(GemmRsNetErrors, SplitCounterpartNeverJoins) { counterpartNeverJoins(kSplit); }

// Overlap on emulated nodes (2 x 1, or MKCCL_NET_BENCH_SPLIT; the ranks in this process; run with
// --gtest_also_run_disabled_tests --gtest_filter='*Overlap*'): per shape and op, the median over
// iterations of the call, of the GEMM alone (mkcclGemm, this rank's M x N x K) and of the transfer
// alone (mkcclReduceScatter / mkcclAllReduce of an M x N partial across the same nodes), every rank
// running at once; ratio = call / max(GEMM, transfer). The default route across nodes is sequential
// (GEMM, then the collective), so its ratio shows what the missing overlap costs. One JSON line per case
// ("BENCH {...}"), with the fused and split routes (gemm_rs.net / gemm_ar.net = fused, split)
// timed in the same run: fused_call_us / split_call_us, their overlap ratios, and each / sequential;
// the split route also with 1, 2 and 8 pieces (split_piecesP_us). Ranks sharing one
// GPU compete for it: the numbers are this setup's, not a node's.
TEST(GemmRsNetBench, DISABLED_Overlap) {
  const Split netSplit = benchSplit();
  NET_WORLD_OR_SKIP(w, netSplit);
  const int ws = w.size(), warm = 3, iters = 11;
  struct B {
    bool ar;
    size_t M, N, K;
  };
  // tcp bounds the first of each op; the K = 65536 ones make the GEMM comparable with the transfer.
  const B cases[] = {{false, 2048, 4096, 8192}, {false, 2048, 4096, 32768}, {false, 1024, 2048, 65536},
                     {true, 2048, 4096, 8192},  {true, 1024, 2048, 65536}};
  const int kPieceCounts[3] = {1, 2, 8};
  HostBarrier bar(ws);
  for (const B& b : cases) {
    std::vector<double> call(ws), fused(ws), split(ws), gemm(ws), xfer(ws);
    std::vector<std::vector<double>> splitP(3, std::vector<double>(ws));
    w.onEveryRank([&](int r) {
      cudaStream_t st = w.streams[r];
      Call c;
      c.alloc(b.ar, false, ws, b.M, b.N, b.K, 77, r, st);
      char* P = nullptr;
      ASSERT_TRUE(c.ok && cudaMalloc(&P, b.M * b.N * kEs) == cudaSuccess);
      fillRandom(P, b.M * b.N, mkcclBfloat16, 5 + r, 1.0f, st);
      RankTimer timeIt(st, bar, w.comms[r], warm, iters);
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], kSequential));
      call[r] = timeIt([&] { return c.run(w.comms[r], st); });
      // The fused route across nodes, timed in the same run.
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], kFused));
      fused[r] = timeIt([&] { return c.run(w.comms[r], st); });
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], kSplit));
      split[r] = timeIt([&] { return c.run(w.comms[r], st); });
      // The split route with other piece counts (gemm_rs.net_pieces / gemm_ar.net_pieces).
      for (int i = 0; i < 3; ++i) {
        const std::string t = std::string(kSplit) + ";gemm_rs.net_pieces=" + std::to_string(kPieceCounts[i]) +
                              ";gemm_ar.net_pieces=" + std::to_string(kPieceCounts[i]);
        EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], t.c_str()));
        splitP[i][r] = timeIt([&] { return c.run(w.comms[r], st); });
      }
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], ""));
      gemm[r] = timeIt([&] { return mkcclGemm(c.A, c.W, P, b.M, b.N, b.K, mkcclBfloat16, mkcclBfloat16, st); });
      xfer[r] = timeIt([&] {
        return b.ar ? mkcclAllReduce(P, P, b.M * b.N, mkcclBfloat16, mkcclSum, w.comms[r], st)
                    : mkcclReduceScatter(P, c.C, b.M * b.N / ws, mkcclBfloat16, mkcclSum, w.comms[r], st);
      });
      cudaFree(P);
      c.release();
    });
    const double f = *std::max_element(call.begin(), call.end());
    const double ff = *std::max_element(fused.begin(), fused.end());
    const double sp = *std::max_element(split.begin(), split.end());
    const double g = *std::max_element(gemm.begin(), gemm.end());
    const double x = *std::max_element(xfer.begin(), xfer.end());
    std::printf("BENCH {\"op\":\"%s\",\"split\":\"%s\",\"route\":\"sequential\",\"M\":%zu,\"N\":%zu,\"K\":%zu,"
                "\"partial_bytes\":%zu,\"call_us\":%.1f,\"gemm_alone_us\":%.1f,\"transfer_alone_us\":%.1f,"
                "\"floor_us\":%.1f,\"overlap_ratio\":%.3f,\"fused_call_us\":%.1f,\"fused_overlap_ratio\":%.3f,"
                "\"fused_vs_sequential\":%.3f,\"split_call_us\":%.1f,\"split_overlap_ratio\":%.3f,"
                "\"split_vs_sequential\":%.3f,\"split_pieces1_us\":%.1f,\"split_pieces2_us\":%.1f,"
                "\"split_pieces8_us\":%.1f,\"iters\":%d}\n",
                b.ar ? "gemm_ar_net" : "gemm_rs_net", splitText(netSplit).c_str(), b.M, b.N, b.K, b.M * b.N * kEs, f, g, x, std::max(g, x),
                f / std::max(g, x), ff, ff / std::max(g, x), ff / f, sp, sp / std::max(g, x), sp / f,
                *std::max_element(splitP[0].begin(), splitP[0].end()), *std::max_element(splitP[1].begin(), splitP[1].end()),
                *std::max_element(splitP[2].begin(), splitP[2].end()), iters);
    std::fflush(stdout);
  }
}

}  // namespace
