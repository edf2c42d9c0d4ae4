// mkcclAllGatherGemm on GPUs, against a reference built here: every rank's shard regenerated from
// its seed (fillRandom is a function of seed and index) into one gathered A, then cuBLAS.
//   - one process per GPU (mkccl-run -n 2 / 4; alone it is a world of 1): shapes with tails and
//     small M, gathered A absent / separate / in place, every plan (forced through the tuner's
//     ag_gemm.* keys), 80 back-to-back calls with different inputs, a back-to-back sequence of
//     changing shapes and plans (the issue-6 failure), argument and tuning errors;
//   - one process over 1, 2 and all GPUs (mkcclCommInitAll, a thread per rank: growing the
//     symmetric region is a host collective), a rank that never joins (the wait times out, the
//     kernel leaves). Across nodes: ag_gemm_net_test.cc.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>
#include "rank_threads.h"
#include "test_util.h"

using namespace mkccl::test;

namespace {

struct Shape {
  size_t m, N, K;  // m: rows per rank (M = m * ws)
};

enum class Gathered { None, Separate, InPlace };

const char* gatheredName(Gathered g) {
  return g == Gathered::None ? "no gatheredA" : g == Gathered::Separate ? "gatheredA" : "gatheredA in place";
}

constexpr size_t kEs = 2;  // bf16 / fp16

uint64_t seedA(uint64_t seed, int q) { return seed * 1000003ull + 17ull * q + 1; }
uint64_t seedW(uint64_t seed, int r) { return seed * 1000003ull + 17ull * r + 7; }

// The tuning string of a plan name: "fused", "fused:<comm CTAs>", "ce", "ce/ring", "sequential";
// null: auto.
std::string tuningFor(const char* plan) {
  if (!plan) return "";
  const std::string s(plan);
  const size_t colon = s.find(':'), slash = s.find('/');
  std::string t = "ag_gemm.plan=" + s.substr(0, std::min(colon, slash));
  if (colon != std::string::npos) t += ";ag_gemm.comm_ctas=" + s.substr(colon + 1);
  if (slash != std::string::npos) t += ";ag_gemm.ce=" + s.substr(slash + 1);
  return t;
}

// Switches this rank's plan (its communicator's tuning). Every rank calls it at the same point of
// its sequence of calls: a plan is the same on every rank.
void setPlan(mkcclComm_t comm, const char* plan) {
  ASSERT_EQ(mkcclSuccess, mkcclSetTuning(comm, tuningFor(plan).c_str())) << mkcclGetLastError(nullptr);
}

// One rank's buffers for one call.
struct Call {
  size_t M = 0, N = 0, K = 0, m = 0;
  mkcclDataType_t t = mkcclBfloat16;
  Gathered g = Gathered::None;
  uint64_t seed = 0;
  char *A = nullptr, *W = nullptr, *C = nullptr, *G = nullptr;
  bool ok = false;

  void alloc(int rank, int ws, const Shape& s, mkcclDataType_t type, Gathered gathered, uint64_t sd,
             cudaStream_t stream) {
    m = s.m;
    M = s.m * ws;
    N = s.N;
    K = s.K;
    t = type;
    g = gathered;
    seed = sd;
    ok = cudaMalloc(&W, N * K * kEs) == cudaSuccess && cudaMalloc(&C, M * N * kEs) == cudaSuccess;
    if (g != Gathered::None) ok = ok && cudaMalloc(&G, M * K * kEs) == cudaSuccess;
    if (g == Gathered::InPlace) A = G + rank * m * K * kEs;
    else ok = ok && cudaMalloc(&A, m * K * kEs) == cudaSuccess;
    EXPECT_TRUE(ok) << "cudaMalloc";
    if (!ok) return;
    poison(C, M * N * kEs, stream);
    if (G) poison(G, M * K * kEs, stream);
    fillRandom(A, m * K, t, seedA(seed, rank), 1.0f, stream);
    fillRandom(W, N * K, t, seedW(seed, rank), 1.0f, stream);
  }
  mkcclResult_t run(mkcclComm_t comm, cudaStream_t stream) const {
    return mkcclAllGatherGemm(A, W, C, G, M, N, K, t, comm, stream);
  }
  // C against gathered A (regenerated) . W^T by cuBLAS; G against the gathered A, exactly.
  void check(int rank, int ws) const {
    char *ref = nullptr, *R = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&ref, M * K * kEs));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&R, M * N * kEs));
    for (int q = 0; q < ws; ++q) fillRandom(ref + q * m * K * kEs, m * K, t, seedA(seed, q));
    cublasGemmRef(ref, W, R, M, N, K, t, t);
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    const ErrStats e = compare(toHostDouble(C, M * N, t), toHostDouble(R, M * N, t), 1e-2);
    EXPECT_EQ(0u, e.wrong) << "rank " << rank << ": C: first wrong element " << e.firstWrong << " (row "
                           << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ")";
    EXPECT_LE(e.maxRelErr, 1e-2) << "rank " << rank;
    if (G) {
      const ErrStats eg = compare(toHostDouble(G, M * K, t), toHostDouble(ref, M * K, t), 0.0);
      EXPECT_EQ(0u, eg.wrong) << "rank " << rank << ": gatheredA: first wrong element " << eg.firstWrong << " (row "
                              << (eg.firstWrong == (size_t)-1 ? 0 : eg.firstWrong / K) << ")";
    }
    cudaFree(ref);
    cudaFree(R);
  }
  void release() {
    if (g != Gathered::InPlace) cudaFree(A);
    cudaFree(W);
    cudaFree(C);
    cudaFree(G);
    A = W = C = G = nullptr;
  }
};

void expectNoAsyncError(mkcclComm_t comm) {
  mkcclResult_t async = mkcclSuccess;
  EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comm, &async));
  EXPECT_EQ(mkcclSuccess, async) << mkcclGetLastError(comm);
}

// Shapes with tails: m not a multiple of 128 (tiles straddle shards), N not a multiple of the
// tile width, K not a multiple of 64, small and tiny M, several chunks and slices per shard.
const Shape kShapes[] = {
    {256, 512, 512},    // two 128-row blocks per rank
    {200, 392, 520},    // every tail at once
    {64, 256, 256},     // several ranks per tile
    {1, 8, 8},          // one row per rank, the smallest pitches
    {384, 256, 1024},   // odd number of blocks per rank (clusters straddle shards)
    {1024, 1024, 768},  // whole cluster rows per rank: the arrival-ordered schedule
    {256, 264, 4096},   // many slices per chunk
    {1000, 136, 1032},  // slices of 32 rows; a short last slice and claim
    {2048, 256, 2048},  // 32 claims per shard
};

// Every shape x gathered variant x plan on this rank's comm. Every rank of the comm runs it.
void runShapes(mkcclComm_t comm, int rank, int ws, uint64_t seed, mkcclDataType_t t) {
  // fused: the model's comm CTAs; fused:0 the side teams; fused:2 two CTAs taken from the GEMM;
  // ce: every SM computes, the copy engines push (ce/ring: along the ring).
  const char* plans[] = {"fused", "fused:0", "fused:2", "sequential", "ce", "ce/ring", nullptr};
  const Gathered gs[] = {Gathered::None, Gathered::Separate, Gathered::InPlace};
  cudaStream_t stream;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int i = 0;
  for (const char* plan : plans) {
    setPlan(comm, plan);
    for (const Shape& s : kShapes)
      for (Gathered g : gs) {
        ++i;
        SCOPED_TRACE(testing::Message() << "plan " << (plan ? plan : "auto") << ", M=" << s.m * ws << " N=" << s.N
                                        << " K=" << s.K << ", " << gatheredName(g) << ", rank " << rank << "/" << ws
                                        << ", seed " << seed);
        // No fatal assertion in here: every rank (thread) must reach the next plan switch.
        Call c;
        c.alloc(rank, ws, s, t, g, seed + i, stream);
        if (c.ok && cudaStreamSynchronize(stream) == cudaSuccess) {
          EXPECT_EQ(mkcclSuccess, c.run(comm, stream)) << mkcclGetLastError(comm);
          const cudaError_t e = cudaStreamSynchronize(stream);
          EXPECT_EQ(cudaSuccess, e) << "the kernel must not fault: " << cudaGetErrorString(e);
          expectNoAsyncError(comm);
          if (e == cudaSuccess) c.check(rank, ws);
        } else {
          ADD_FAILURE() << "allocation or fill failed";
        }
        c.release();
      }
  }
  setPlan(comm, nullptr);
  cudaStreamDestroy(stream);
}

// 80 calls queued back to back on one stream, each with its own inputs and outputs (half with a
// gathered A), switching plan every 16: no call may pass on another's flags or data.
void runBackToBack(mkcclComm_t comm, int rank, int ws, uint64_t seed) {
  cudaStream_t stream;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int calls = 80;
  const Shape s{256, 256, 512};
  std::vector<Call> cs(calls);
  bool ok = true;  // no fatal assertion before the last plan switch: every rank must get there
  for (int i = 0; i < calls; ++i) {
    cs[i].alloc(rank, ws, s, mkcclBfloat16, i % 2 ? Gathered::Separate : Gathered::None, seed + 100 + i, stream);
    ok = ok && cs[i].ok;
  }
  EXPECT_TRUE(ok) << "allocations";
  ok = ok && cudaStreamSynchronize(stream) == cudaSuccess;
  const char* plans[] = {"fused", "sequential", "ce", "fused:0", nullptr};
  for (int i = 0; i < calls; ++i) {
    if (i % 16 == 0) setPlan(comm, plans[(i / 16) % 5]);  // the calls already queued keep running
    if (ok && cs[i].run(comm, stream) != mkcclSuccess) {
      ADD_FAILURE() << "call " << i << ": " << mkcclGetLastError(comm);
      ok = false;  // keep switching with the other ranks
    }
  }
  setPlan(comm, nullptr);
  ASSERT_TRUE(ok);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
  expectNoAsyncError(comm);
  for (int i = 0; i < calls; ++i) {
    SCOPED_TRACE(testing::Message() << "call " << i << ", seed " << seed);
    cs[i].check(rank, ws);
    cs[i].release();
  }
  cudaStreamDestroy(stream);
}

// The sequence that failed in mkccl-perf ag_gemm (issue 6, 9.5M wrong elements): shapes changing on
// one comm and plans alternating, everything queued back to back without a host sync. Every call
// here moves the counters (they follow the gathered A, whose size shrinks with K) onto rows the
// call before wrote, so until this rank's leader resets them they hold random data; there are
// more tiles than SMs (no free comm CTA: with fused:0 the leader is a compute CTA's side team, as
// in the failing run) and most of the first wave needs peers' rows, so producers wait at once.
// Before the fix they could read a stale "complete" counter and load rows not yet pushed.
void runShapeSequence(mkcclComm_t comm, int rank, int ws, uint64_t seed) {
  cudaStream_t stream;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t m = 128;                                      // one M-block per rank
  const size_t N = 256 * static_cast<size_t>((160 + ws - 1) / ws);  // >= 160 tiles of 128 x 256
  const size_t Ks[] = {2560, 2048, 1536, 1024, 512};         // the first call is the largest: grows once
  const char* plans[] = {"fused:0", "fused", "sequential", nullptr, "ce", "ce/ring"};
  const int calls = 30;                                      // every (K, plan) pair once
  std::vector<Call> cs(calls);
  bool ok = true;  // no fatal assertion before the last plan switch: every rank must get there
  for (int i = 0; i < calls; ++i) {
    cs[i].alloc(rank, ws, Shape{m, N, Ks[i % 5]}, mkcclBfloat16, i % 7 == 3 ? Gathered::Separate : Gathered::None,
                seed + 300 + i, stream);
    ok = ok && cs[i].ok;
  }
  EXPECT_TRUE(ok) << "allocations";
  ok = ok && cudaStreamSynchronize(stream) == cudaSuccess;
  for (int i = 0; i < calls; ++i) {
    setPlan(comm, plans[i % 6]);  // host-side only: the calls already queued keep running
    if (ok && cs[i].run(comm, stream) != mkcclSuccess) {
      ADD_FAILURE() << "call " << i << ": " << mkcclGetLastError(comm);
      ok = false;  // keep switching with the other ranks
    }
  }
  setPlan(comm, nullptr);
  ASSERT_TRUE(ok);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
  expectNoAsyncError(comm);
  for (int i = 0; i < calls; ++i) {
    SCOPED_TRACE(testing::Message() << "call " << i << ": K=" << Ks[i % 5] << ", plan "
                                    << (plans[i % 6] ? plans[i % 6] : "auto") << ", seed " << seed);
    cs[i].check(rank, ws);
    cs[i].release();
  }
  cudaStreamDestroy(stream);
}

// Mistakes the API must refuse before anything is queued (so every rank may make them alone).
void runBadArguments(mkcclComm_t comm, int rank, int ws) {
  const size_t m = 128, N = 256, K = 256, M = m * ws;
  char *A, *W, *C, *G;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&A, m * K * kEs));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&W, N * K * kEs));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&C, M * N * kEs));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&G, M * K * kEs));
  std::vector<char> host(M * N * kEs);
  const mkcclDataType_t t = mkcclBfloat16;
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(nullptr, W, C, nullptr, M, N, K, t, comm, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, nullptr, C, nullptr, M, N, K, t, comm, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, nullptr, nullptr, M, N, K, t, comm, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A + 2, W, C, nullptr, M, N, K - 8, t, comm, 0))
      << "A not 16-byte aligned";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, nullptr, M, N, 12, t, comm, 0))
      << "rows of 24 bytes";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, nullptr, M, 4, K, t, comm, 0)) << "rows of C of 8 bytes";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, nullptr, M, N, K, mkcclFloat32, comm, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, nullptr, 0, N, K, t, comm, 0));
  if (ws > 1) {
    EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, nullptr, M + 1, N, K, t, comm, 0));
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("divisible")) << mkcclGetLastError(nullptr);
  }
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, host.data(), nullptr, M, N, K, t, comm, 0)) << "host C";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, nullptr, M, N * 2, K, t, comm, 0)) << "C too small";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, W, nullptr, m, N / 2, K, t, comm, 0)) << "C overlaps W";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, C, M, N, K, t, comm, 0)) << "gatheredA overlaps C";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(G + kEs * K, W, C, G, M, N, K, t, comm, 0))
      << "A inside gatheredA but not at this rank's block";
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(A, W, C, nullptr, M, N, K, t, nullptr, 0)) << "no comm";
  // Rejected calls leave the communicator healthy: a real call works (every rank makes it).
  fillRandom(A, m * K, t, 5 + rank);
  fillRandom(W, N * K, t, 9 + rank);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_EQ(mkcclSuccess, mkcclAllGatherGemm(A, W, C, nullptr, M, N, K, t, comm, 0)) << mkcclGetLastError(comm);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  expectNoAsyncError(comm);
  for (char* p : {A, W, C, G}) cudaFree(p);
}

uint64_t worldSeed() {
  uint64_t seed = 0;
  if (world().rank == 0) seed = freshSeed();
  std::string err;
  EXPECT_EQ(0, mkccl::launch::worldBroadcast(&seed, sizeof(seed), 0, &err)) << err;
  return seed;
}

bool multiProcess() { return world().nranks > 1; }

#define WORLD_COMM_OR_SKIP(comm)                                                        \
  MKCCL_REQUIRE_GPUS(1);                                                                \
  if (gpuCount() < world().localRanks) GTEST_SKIP() << "fewer GPUs than processes"; \
  mkcclComm_t comm = worldComm();                                                       \
  ASSERT_NE(nullptr, comm)

// ---------------- one process per GPU (also run alone: a world of 1) ----------------

TEST(AgGemmWorld, ShapesPlansAndGatheredA) {
  WORLD_COMM_OR_SKIP(comm);
  const uint64_t seed = worldSeed();
  runShapes(comm, world().rank, world().nranks, seed, mkcclBfloat16);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

TEST(AgGemmWorld, Fp16) {
  WORLD_COMM_OR_SKIP(comm);
  const uint64_t seed = worldSeed();
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s));
  Call c;
  c.alloc(world().rank, world().nranks, Shape{320, 520, 1040}, mkcclFloat16, Gathered::Separate, seed, s);
  ASSERT_TRUE(c.ok);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(mkcclSuccess, c.run(comm, s)) << mkcclGetLastError(comm);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  expectNoAsyncError(comm);
  c.check(world().rank, world().nranks);
  c.release();
  cudaStreamDestroy(s);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

TEST(AgGemmWorld, BackToBack) {
  WORLD_COMM_OR_SKIP(comm);
  runBackToBack(comm, world().rank, world().nranks, worldSeed());
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

TEST(AgGemmWorld, ShapeSequenceBackToBack) {
  WORLD_COMM_OR_SKIP(comm);
  runShapeSequence(comm, world().rank, world().nranks, worldSeed());
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

TEST(AgGemmWorld, BadArguments) {
  WORLD_COMM_OR_SKIP(comm);
  runBadArguments(comm, world().rank, world().nranks);
  char *A, *W, *C;
  const size_t m = 128, N = 128, K = 128, M = m * world().nranks;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&A, m * K * kEs));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&W, N * K * kEs));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&C, M * N * kEs));
  // Tuning the op cannot take is refused, naming the key, and changes nothing.
  auto refused = [&](const char* tuning, const char* key) {
    EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(comm, tuning)) << tuning;
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find(key)) << mkcclGetLastError(nullptr);
  };
  refused("ag_gemm.plan=fastest", "ag_gemm.plan");
  refused("ag_gemm.plan=fused:2", "ag_gemm.plan");
  refused("ag_gemm.comm_ctas=-1", "ag_gemm.comm_ctas");
  refused("ag_gemm.comm_ctas=2000", "ag_gemm.comm_ctas");
  refused("ag_gemm.comm_ctas=4x", "ag_gemm.comm_ctas");
  refused("ag_gemm.ce_group_kib=0", "ag_gemm.ce_group_kib");
  refused("ag_gemm.ce_group_kib=4M", "ag_gemm.ce_group_kib");
  refused("ag_gemm.ce=Ring", "ag_gemm.ce");
  refused("ag_gemm.push=bulk", "ag_gemm.push");
  refused("ag_gemm.plan", "key=value");
  // The communicator kept its plan: a call still works (every rank makes it).
  fillRandom(A, m * K, mkcclBfloat16, 11 + world().rank);
  fillRandom(W, N * K, mkcclBfloat16, 13 + world().rank);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_EQ(mkcclSuccess, mkcclAllGatherGemm(A, W, C, nullptr, M, N, K, mkcclBfloat16, comm, 0))
      << mkcclGetLastError(comm);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  for (char* p : {A, W, C}) cudaFree(p);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

// ---------------- in one process (skipped under mkccl-run: every process would do it) ----------------

// Runs fn(rank, comm) on a thread per rank (a call may grow the symmetric region: a host
// collective that every rank must join at once).
template <class Fn>
void onEveryRank(std::vector<mkcclComm_t>& comms, Fn fn) {
  std::vector<std::thread> th;
  for (int r = 0; r < (int)comms.size(); ++r)
    th.emplace_back([&, r] {
      cudaSetDevice(r);
      fn(r, comms[r]);
    });
  for (auto& x : th) x.join();
}

TEST(AgGemmInProcess, InitAllOneTwoAllGpus) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  const int n = gpuCount();
  std::vector<int> sizes = {1};
  if (n >= 2) sizes.push_back(2);
  if (n > 2) sizes.push_back(n);
  for (int ranks : sizes) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks in one process");
    std::vector<mkcclComm_t> comms(ranks);
    ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(comms.data(), ranks, nullptr)) << mkcclGetLastError(nullptr);
    const uint64_t seed = freshSeed();
    onEveryRank(comms, [&](int r, mkcclComm_t c) { runShapes(c, r, ranks, seed, mkcclBfloat16); });
    onEveryRank(comms, [&](int r, mkcclComm_t c) { runBackToBack(c, r, ranks, seed + 1); });
    onEveryRank(comms, [&](int r, mkcclComm_t c) { runShapeSequence(c, r, ranks, seed + 2); });
    for (auto c : comms) EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(c));
  }
}

// Ranks sharing GPUs (SharedGpus): the world sizes beyond the GPUs at hand, for correctness only,
// every plan -- 2, 3 and 4 ranks on one GPU, or 3 and 4 on two. Buffers are made and freed while
// no rank is inside a call (a free may wait for the whole GPU, where another rank's kernel may wait
// for this rank).
TEST(AgGemmInProcess, RanksSharingGpus) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  const char* plans[] = {"fused", "fused:0", "ce", "ce/ring", "sequential", nullptr};
  for (const std::vector<int>& devs : sharedGpuWorlds()) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    const int ranks = w.size();
    uint64_t seed = freshSeed();
    for (const char* plan : plans) {
      for (int r = 0; r < ranks; ++r) setPlan(w.comms[r], plan);
      for (const Shape& s : kShapes)
        for (Gathered g : {Gathered::None, Gathered::InPlace}) {
          SCOPED_TRACE(testing::Message() << ranks << " ranks on " << gpusOf(devs) << " GPUs, plan "
                                          << (plan ? plan : "auto") << ", M="
                                          << s.m * ranks << " N=" << s.N << " K=" << s.K << ", " << gatheredName(g));
          ++seed;
          std::vector<Call> calls(ranks);
          for (int r = 0; r < ranks; ++r) {
            cudaSetDevice(w.devs[r]);
            calls[r].alloc(r, ranks, s, mkcclBfloat16, g, seed, w.streams[r]);
            ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
            ASSERT_TRUE(calls[r].ok);
          }
          std::vector<mkcclResult_t> res(ranks, mkcclInternalError);
          std::vector<cudaError_t> sync(ranks, cudaErrorUnknown);
          w.onEveryRank([&](int r) {
            res[r] = calls[r].run(w.comms[r], w.streams[r]);
            sync[r] = cudaStreamSynchronize(w.streams[r]);
          });
          for (int r = 0; r < ranks; ++r) {
            EXPECT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
            ASSERT_EQ(cudaSuccess, sync[r]) << "rank " << r;
            expectNoAsyncError(w.comms[r]);
            cudaSetDevice(w.devs[r]);
            calls[r].check(r, ranks);
          }
          for (int r = 0; r < ranks; ++r) {
            cudaSetDevice(w.devs[r]);
            calls[r].release();
          }
        }
    }
  }
}

// Rank 1 never joins a call: rank 0's waits time out, its kernel leaves cleanly (no trap, no
// hang), and the error reaches mkcclCommGetAsyncError and the next call. Every plan (ce: the
// copy engines, released by the kernel after its failed wait, do not hang either).
TEST(AgGemmInProcess, PeerNeverJoins) {
  MKCCL_REQUIRE_GPUS(2);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  for (const char* plan : {"fused", "sequential", "ce"}) {
    SCOPED_TRACE(plan);
    setenv("MKCCL_TIMEOUT_MS", "1500", 1);
    std::vector<mkcclComm_t> comms(2);
    const mkcclResult_t init = mkcclCommInitAll(comms.data(), 2, nullptr);
    unsetenv("MKCCL_TIMEOUT_MS");
    ASSERT_EQ(mkcclSuccess, init) << mkcclGetLastError(nullptr);
    for (mkcclComm_t c : comms) setPlan(c, plan);
    std::vector<Call> calls(2);
    // A first call on both ranks sizes the region (a collective), so the lone call needs none.
    onEveryRank(comms, [&](int r, mkcclComm_t c) {
      calls[r].alloc(r, 2, Shape{512, 512, 1024}, mkcclBfloat16, Gathered::Separate, 42, 0);
      ASSERT_TRUE(calls[r].ok);
      EXPECT_EQ(mkcclSuccess, calls[r].run(c, 0)) << mkcclGetLastError(c);
      EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
    });
    cudaSetDevice(0);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(mkcclSuccess, calls[0].run(comms[0], 0)) << mkcclGetLastError(comms[0]);
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize()) << "the kernel must exit cleanly";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(secs, 1.3);
    EXPECT_LT(secs, 20.0);
    mkcclResult_t async = mkcclSuccess;
    ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comms[0], &async));
    EXPECT_EQ(mkcclTimeout, async) << mkcclGetLastError(comms[0]);
    EXPECT_EQ(mkcclTimeout, calls[0].run(comms[0], 0));
    EXPECT_EQ(mkcclSuccess, mkcclCommAbort(comms[0]));
    cudaSetDevice(1);
    EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comms[1]));
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(r);
      calls[r].release();
    }
  }
}

TEST(AgGemmInProcess, StreamOfAnotherDevice) {
  MKCCL_REQUIRE_GPUS(2);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  mkcclComm_t comm;
  int dev = 0;
  ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(&comm, 1, &dev));
  cudaSetDevice(1);
  cudaStream_t s1;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s1));
  char* onDev1 = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&onDev1, 1 << 20));
  cudaSetDevice(0);
  Call c;
  c.alloc(0, 1, Shape{128, 128, 128}, mkcclBfloat16, Gathered::None, 3, 0);
  ASSERT_TRUE(c.ok);
  EXPECT_EQ(mkcclInvalidArgument, c.run(comm, s1));
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("device 1")) << mkcclGetLastError(nullptr);
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm(onDev1, c.W, c.C, nullptr, c.M, c.N, c.K, c.t, comm, 0))
      << "A on another device";
  c.release();
  cudaSetDevice(1);
  cudaFree(onDev1);
  cudaStreamDestroy(s1);
  cudaSetDevice(0);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

// Across nodes: tests/fused/ag_gemm_net_test.cc.

}  // namespace
