// Inputs and references of the GEMM+ReduceScatter / GEMM+AllReduce tests (gemm_rs_check.h).
#include "gemm_rs_check.h"
#include <stdlib.h>
#include "rank_threads.h"

namespace mkccl {
namespace test {

namespace {

size_t elemBytes(mkcclDataType_t t) { return t == mkcclFloat32 ? 4 : 2; }
uint64_t seedA(uint64_t seed, int q) { return seed + 1000003ull * (2 * q + 1); }
uint64_t seedW(uint64_t seed, int q) { return seed + 1000003ull * (2 * q + 2); }

}  // namespace

ReduceBuffers::~ReduceBuffers() {
  cudaFree(A);
  cudaFree(W);
  cudaFree(C);
}

void makeRankBuffers(ReduceBuffers* b, const ReduceShape& s, mkcclDataType_t t, uint64_t seed, int rank, int ws,
                     bool allReduce) {
  const size_t es = elemBytes(t);
  b->cRows = allReduce ? s.M : s.M / ws;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&b->A, s.M * s.Kr * es));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&b->W, s.N * s.Kr * es));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&b->C, b->cRows * s.N * es));
  fillRandom(b->A, s.M * s.Kr, t, seedA(seed, rank));
  fillRandom(b->W, s.N * s.Kr, t, seedW(seed, rank));
  poison(b->C, b->cRows * s.N * es);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
}

std::vector<double> referenceRows(const ReduceShape& s, mkcclDataType_t t, uint64_t seed, int ws, size_t row0,
                                  size_t rows) {
  const size_t es = elemBytes(t), K = s.Kr * ws;
  char *A = nullptr, *W = nullptr, *share = nullptr;
  float* C = nullptr;
  std::vector<double> out;
  EXPECT_EQ(cudaSuccess, cudaMalloc(&A, s.M * K * es));
  EXPECT_EQ(cudaSuccess, cudaMalloc(&W, s.N * K * es));
  EXPECT_EQ(cudaSuccess, cudaMalloc(&share, std::max(s.M, s.N) * s.Kr * es));
  EXPECT_EQ(cudaSuccess, cudaMalloc(&C, s.M * s.N * sizeof(float)));
  if (A && W && share && C) {
    // Rank q's shares are columns [q*Kr, (q+1)*Kr) of the whole A and W.
    for (int q = 0; q < ws; ++q) {
      fillRandom(share, s.M * s.Kr, t, seedA(seed, q));
      EXPECT_EQ(cudaSuccess, cudaMemcpy2D(A + q * s.Kr * es, K * es, share, s.Kr * es, s.Kr * es, s.M,
                                          cudaMemcpyDeviceToDevice));
      fillRandom(share, s.N * s.Kr, t, seedW(seed, q));
      EXPECT_EQ(cudaSuccess, cudaMemcpy2D(W + q * s.Kr * es, K * es, share, s.Kr * es, s.Kr * es, s.N,
                                          cudaMemcpyDeviceToDevice));
    }
    cublasGemmRef(A, W, C, s.M, s.N, K, t, mkcclFloat32);
    EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
    out = toHostDouble(C + row0 * s.N, rows * s.N, mkcclFloat32);
  }
  cudaFree(A);
  cudaFree(W);
  cudaFree(share);
  cudaFree(C);
  return out;
}

ErrStats checkOutput(const void* C, size_t rows, size_t N, mkcclDataType_t t, const std::vector<double>& ref) {
  return compare(toHostDouble(C, rows * N, t), ref, kTolerance);
}

mkcclResult_t runReduceOp(bool allReduce, const ReduceBuffers& b, const ReduceShape& s, mkcclDataType_t t,
                          mkcclComm_t comm, cudaStream_t stream) {
  if (allReduce) return mkcclGemmAllReduce(b.A, b.W, b.C, s.M, s.N, s.Kr, t, comm, stream);
  return mkcclGemmReduceScatter(b.A, b.W, b.C, s.M, s.N, s.Kr, t, comm, stream);
}

std::string Tune::str(bool allReduce) const {
  const std::string op = allReduce ? "gemm_ar." : "gemm_rs.";
  std::string s;
  auto add = [&](const std::string& key, const char* value) {
    if (value) s += (s.empty() ? "" : ";") + key + "=" + value;
  };
  add(op + "plan", plan);
  add(op + "push", push);
  add("gemm.variant", variant);
  add(op + "order", order);
  add(op + "publish", publish);
  add(op + "ce_batch", ceBatch);
  add(op + "ce_streams", ceStreams);
  add(op + "reduce", reduce);
  return s;
}

void setTune(mkcclComm_t comm, bool allReduce, const Tune& t) {
  ASSERT_EQ(mkcclSuccess, mkcclSetTuning(comm, t.str(allReduce).c_str())) << mkcclGetLastError(nullptr);
}

}  // namespace test
}  // namespace mkccl

// ------------------------------------------------------------------------------------------------
// Test bodies.

#include <chrono>
#include <string>
#include <thread>
#include <utility>

namespace mkccl {
namespace test {

namespace {

bool multiProcess() { return world().nranks > 1; }

// Rank 0's fresh seed, the same on every rank of the world.
uint64_t worldSeed() {
  uint64_t seed = 0;
  if (world().rank == 0) seed = freshSeed();
  std::string err;
  EXPECT_EQ(0, launch::worldBroadcast(&seed, sizeof(seed), 0, &err)) << err;
  return seed;
}

const char* typeLabel(mkcclDataType_t t) { return t == mkcclBfloat16 ? "bf16" : "fp16"; }

// The reference rows this rank's output must hold.
void outputRows(bool allReduce, const ReduceShape& s, int rank, int ws, size_t* row0, size_t* rows) {
  *row0 = allReduce ? 0 : rank * (s.M / ws);
  *rows = allReduce ? s.M : s.M / ws;
}

void expectNoAsyncError(mkcclComm_t comm) {
  mkcclResult_t async = mkcclSuccess;
  EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comm, &async));
  EXPECT_EQ(mkcclSuccess, async) << mkcclGetLastError(comm);
}

void expectMatches(const ReduceBuffers& b, const ReduceShape& s, mkcclDataType_t t, uint64_t seed, int rank, int ws,
                   bool allReduce) {
  size_t row0, rows;
  outputRows(allReduce, s, rank, ws, &row0, &rows);
  const std::vector<double> ref = referenceRows(s, t, seed, ws, row0, rows);
  const ErrStats st = checkOutput(b.C, rows, s.N, t, ref);
  EXPECT_EQ(0u, st.wrong) << "max relative error " << st.maxRelErr << ", first wrong element " << st.firstWrong
                          << " (row " << (st.firstWrong == (size_t)-1 ? 0 : st.firstWrong / s.N) << ")";
  EXPECT_LE(st.maxRelErr, kTolerance);
}

// Odd shapes: M / ws not a multiple of 128, N not a multiple of the tile, K / ws small, tiny.
std::vector<ReduceShape> oddShapes(int ws, bool allReduce) {
  const size_t w = size_t(ws);
  std::vector<ReduceShape> v = {{w * 256, 512, 128}, {w * 200, 264, 72},   {w * 8, 8, 8},
                                {w * 1000, 1032, 264}, {w * 1024, 2048, 512}, {w * 128, 4096, 64}};
  if (allReduce && ws > 1) v.push_back({w * 200 + 1, 136, 64});  // AR: M need not split evenly
  return v;
}

}  // namespace

void worldShapes(bool allReduce) {
  MKCCL_REQUIRE_GPUS(1);
  const auto& w = world();
  if (gpuCount() < w.localRanks) GTEST_SKIP() << "fewer GPUs than processes on this host";
  mkcclComm_t comm = worldComm();
  ASSERT_NE(nullptr, comm);
  cudaStream_t stream;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint64_t seed = worldSeed();
  // The fused plan with every way of sending partials (the copy engines, the paced push team, bulk
  // stores), with the other tile configurations (clusters of 2 CTAs, 128-wide tiles), with early
  // publication and the interleaved order, and the ring reduction; AllReduce also as the fused
  // ReduceScatter then an AllGather (M not divisible: sequential). Null fields: the default.
  std::vector<Tune> runs;
  auto run = [&](const char* plan, const char* push) {
    Tune t;
    t.plan = plan;
    t.push = push;
    runs.push_back(t);
    return &runs.back();
  };
  run("auto", "team");
  run("fused", "bulk");
  run("fused", "team");
  run("sequential", "team");
  run("fused", "team")->variant = "256x2";
  run("fused", "bulk")->variant = "128x1";
  run("fused", "team")->variant = "128x2";
  {
    Tune* t = run("fused", "team");
    t->order = "interleaved";
    t->publish = "early";
  }
  run("fused", "ce");
  {
    // Copy engines in batches of 3 tiles (a short last batch), 128-wide tiles in clusters of 2.
    Tune* t = run("fused", "ce");
    t->variant = "128x2";
    t->ceBatch = "3";
  }
  run("fused", "ce")->ceBatch = "2";
  // The ring reduction with each way of sending (copy engines in batches of 3 tiles over 2
  // streams, 128-wide tiles in clusters of 2 with bulk stores).
  {
    Tune* t = run("fused", "ce");
    t->ceBatch = "3";
    t->ceStreams = "2";
    t->reduce = "ring";
  }
  run("fused", "team")->reduce = "ring";
  {
    Tune* t = run("fused", "bulk");
    t->variant = "128x2";
    t->reduce = "ring";
  }
  if (allReduce) run("rs_ag", "bulk");
  for (const Tune& tune : runs) {
    setTune(comm, allReduce, tune);
    for (const ReduceShape& s : oddShapes(w.nranks, allReduce)) {
      for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat16}) {
        if (t == mkcclFloat16 && s.N != 264 && s.N != 2048) continue;  // fp16 on two shapes
        SCOPED_TRACE(testing::Message() << "tuning \"" << tune.str(allReduce) << "\", M " << s.M << " N " << s.N
                                        << " K/rank " << s.Kr << ", " << typeLabel(t) << ", " << w.nranks << " ranks");
        seed += 7919;
        ReduceBuffers b;
        makeRankBuffers(&b, s, t, seed, w.rank, w.nranks, allReduce);
        ASSERT_EQ(mkcclSuccess, runReduceOp(allReduce, b, s, t, comm, stream)) << mkcclGetLastError(comm);
        ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
        expectNoAsyncError(comm);
        expectMatches(b, s, t, seed, w.rank, w.nranks, allReduce);
      }
    }
  }
  cudaStreamDestroy(stream);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

void worldBackToBack(bool allReduce) {
  MKCCL_REQUIRE_GPUS(1);
  const auto& w = world();
  if (gpuCount() < w.localRanks) GTEST_SKIP() << "fewer GPUs than processes on this host";
  mkcclComm_t comm = worldComm();
  ASSERT_NE(nullptr, comm);
  cudaStream_t stream;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const ReduceShape s{size_t(w.nranks) * 384, 768, 256};
  const mkcclDataType_t t = mkcclBfloat16;
  constexpr int kSets = 3, kCalls = 64;
  const uint64_t seed = worldSeed();
  // Inputs rotate over three sets; every call has its own output, checked after all ran.
  ReduceBuffers sets[kSets];
  for (int i = 0; i < kSets; ++i) makeRankBuffers(&sets[i], s, t, seed + i, w.rank, w.nranks, allReduce);
  const size_t es = 2, cBytes = sets[0].cRows * s.N * es;
  std::vector<void*> out(kCalls, nullptr);
  for (auto& p : out) {
    ASSERT_EQ(cudaSuccess, cudaMalloc(&p, cBytes));
    poison(p, cBytes);
  }
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  for (int i = 0; i < kCalls; ++i) {
    // 50 fused calls in a row, then fused and sequential interleaved (collectives in between).
    // AllReduce: every third call the fused ReduceScatter then an AllGather (two kernels).
    Tune tune;
    tune.plan = allReduce && i % 3 == 1 ? "rs_ag" : i < 50 || i % 2 ? "fused" : "sequential";
    // Push paths, publication and the direct orders mixed across calls and across ranks (both
    // ends' formats and flags agree; publication is local; receivers key partials by slot).
    tune.push = (i + w.rank) % 3 == 0 ? "team" : "bulk";
    tune.publish = (i + w.rank) % 4 < 2 ? "early" : "late";
    tune.order = (i + w.rank) % 5 < 2 ? "interleaved" : "phases";
    // Copy engines (every rank alike): every eighth call, batches of 1 or 2 tiles.
    if (i % 8 == 1 || i % 8 == 6) {
      tune.push = "ce";
      tune.ceBatch = i % 16 < 8 ? "1" : "2";
      tune.ceStreams = i % 16 == 6 ? "3" : "1";
    }
    // The ring reduction (every rank alike, phase order): with the team and bulk stores mixed
    // across ranks, and with copy engines.
    if (i % 8 == 5 || i % 16 == 6) {
      tune.reduce = "ring";
      tune.order = "phases";
    }
    setTune(comm, allReduce, tune);
    const ReduceBuffers& in = sets[i % kSets];
    const mkcclResult_t r = allReduce
                                ? mkcclGemmAllReduce(in.A, in.W, out[i], s.M, s.N, s.Kr, t, comm, stream)
                                : mkcclGemmReduceScatter(in.A, in.W, out[i], s.M, s.N, s.Kr, t, comm, stream);
    ASSERT_EQ(mkcclSuccess, r) << "call " << i << ": " << mkcclGetLastError(comm);
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
  expectNoAsyncError(comm);
  size_t row0, rows;
  outputRows(allReduce, s, w.rank, w.nranks, &row0, &rows);
  for (int k = 0; k < kSets; ++k) {
    const std::vector<double> ref = referenceRows(s, t, seed + k, w.nranks, row0, rows);
    for (int i = k; i < kCalls; i += kSets) {
      const ErrStats st = checkOutput(out[i], rows, s.N, t, ref);
      EXPECT_EQ(0u, st.wrong) << "call " << i << ": max relative error " << st.maxRelErr << ", first wrong "
                              << st.firstWrong;
    }
  }
  for (void* p : out) cudaFree(p);
  cudaStreamDestroy(stream);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

void worldBadArguments(bool allReduce) {
  MKCCL_REQUIRE_GPUS(1);
  const auto& w = world();
  if (gpuCount() < w.localRanks) GTEST_SKIP() << "fewer GPUs than processes on this host";
  mkcclComm_t comm = worldComm();
  ASSERT_NE(nullptr, comm);
  const int ws = w.nranks;
  const ReduceShape s{size_t(ws) * 128, 256, 64};
  const mkcclDataType_t t = mkcclBfloat16;
  const uint64_t seed = worldSeed();
  ReduceBuffers b;
  makeRankBuffers(&b, s, t, seed, w.rank, ws, allReduce);
  auto op = [&](const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t type) {
    return allReduce ? mkcclGemmAllReduce(A, W, C, M, N, K, type, comm, 0)
                     : mkcclGemmReduceScatter(A, W, C, M, N, K, type, comm, 0);
  };
  if (!allReduce && ws > 1) {
    EXPECT_EQ(mkcclInvalidArgument, op(b.A, b.W, b.C, s.M - 1, s.N, s.Kr, t));  // M not divisible by ws
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("divisible"));
  }
  EXPECT_EQ(mkcclInvalidArgument, op(b.A, b.W, b.C, s.M, s.N, 12, t));          // rows of A: 24 bytes
  EXPECT_EQ(mkcclInvalidArgument, op(b.A, b.W, b.C, s.M, 12, s.Kr, t));         // rows of C: 24 bytes
  EXPECT_EQ(mkcclInvalidArgument, op(b.A, b.W, b.C, s.M, s.N, s.Kr, mkcclFloat32));
  EXPECT_EQ(mkcclInvalidArgument, op(nullptr, b.W, b.C, s.M, s.N, s.Kr, t));
  EXPECT_EQ(mkcclInvalidArgument, op(b.A, b.W, b.C, 0, s.N, s.Kr, t));
  std::vector<char> host(s.N * s.Kr * 2);
  EXPECT_EQ(mkcclInvalidArgument, op(b.A, host.data(), b.C, s.M, s.N, s.Kr, t));
  EXPECT_EQ(mkcclInvalidArgument, op(b.A, b.W, b.A, s.M, s.N, s.Kr, t));        // C overlaps A
  EXPECT_EQ(mkcclInvalidArgument, op(b.A, b.W, b.C, s.M * 4, s.N, s.Kr, t));    // past the end of A
  if (ws > 1) {
    const std::string key = allReduce ? "gemm_ar." : "gemm_rs.";
    // Tuning the op cannot take is refused at mkcclSetTuning, naming the key.
    auto refused = [&](const std::string& tuning, const std::string& needle) {
      EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(comm, tuning.c_str())) << tuning;
      EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find(needle)) << mkcclGetLastError(nullptr);
    };
    refused(key + "plan=bogus", key + "plan");
    if (!allReduce) refused("gemm_rs.plan=rs_ag", "gemm_rs.plan");  // rs_ag is an AllReduce plan
    refused(key + "push=bogus", key + "push");
    refused(key + "order=spread", key + "order");
    refused(key + "publish=soon", key + "publish");
    refused(key + "reduce=tree", key + "reduce");
    refused(key + "ce_batch=0", key + "ce_batch");
    refused(key + "ce_streams=17", key + "ce_streams");
    refused(key + "lag=1", "unknown key");
    // Accepted, but refused by the call: the ring needs the phase order.
    ASSERT_EQ(mkcclSuccess, mkcclSetTuning(comm, (key + "plan=fused;" + key + "reduce=ring;" + key +
                                                  "order=interleaved").c_str()));
    EXPECT_EQ(mkcclInvalidUsage, op(b.A, b.W, b.C, s.M, s.N, s.Kr, t));
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("reduce=ring")) << mkcclGetLastError(nullptr);
    ASSERT_EQ(mkcclSuccess, mkcclSetTuning(comm, nullptr));
  }
  // Rejected calls left the communicator healthy.
  EXPECT_EQ(mkcclSuccess, op(b.A, b.W, b.C, s.M, s.N, s.Kr, t)) << mkcclGetLastError(comm);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  expectNoAsyncError(comm);
  expectMatches(b, s, t, seed, w.rank, ws, allReduce);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

void inProcessWorlds(bool allReduce) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  const int n = gpuCount();
  std::vector<int> sizes = {1};
  if (n >= 2) sizes.push_back(2);
  if (n > 2) sizes.push_back(n);
  for (int ranks : sizes) {
    std::vector<mkcclComm_t> comms(ranks);
    ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(comms.data(), ranks, nullptr)) << mkcclGetLastError(nullptr);
    const ReduceShape s{size_t(ranks) * 320, 392, 200};
    const mkcclDataType_t t = mkcclBfloat16;
    for (const char* plan : {"fused", "sequential", "rs_ag"}) {
      if (!allReduce && std::string(plan) == "rs_ag") continue;
      SCOPED_TRACE(testing::Message() << ranks << " ranks in one process, plan " << plan);
      Tune tune;
      tune.plan = plan;
      for (mkcclComm_t c : comms) setTune(c, allReduce, tune);
      const uint64_t seed = freshSeed();
      std::vector<ReduceBuffers> bufs(ranks);
      for (int r = 0; r < ranks; ++r) {
        cudaSetDevice(r);
        makeRankBuffers(&bufs[r], s, t, seed, r, ranks, allReduce);
      }
      // One thread per rank: a call may grow the symmetric scratch, which is collective.
      std::vector<mkcclResult_t> res(ranks, mkcclInternalError);
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
          cudaSetDevice(r);
          res[r] = runReduceOp(allReduce, bufs[r], s, t, comms[r], 0);
        });
      for (auto& th : threads) th.join();
      for (int r = 0; r < ranks; ++r) {
        EXPECT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(comms[r]);
        cudaSetDevice(r);
        ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
        expectNoAsyncError(comms[r]);
        SCOPED_TRACE(testing::Message() << "rank " << r);
        expectMatches(bufs[r], s, t, seed, r, ranks, allReduce);
      }
    }
    for (auto c : comms) EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(c));
  }
}

void inProcessSharedGpus(bool allReduce) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  // The copy engines in batches of 3 tiles (a short last batch), the ring's over 2 streams.
  std::vector<Tune> runs(7);
  runs[0].plan = "fused";
  runs[1].plan = "fused", runs[1].push = "ce", runs[1].order = "phases", runs[1].ceBatch = "3";
  runs[2].plan = "fused", runs[2].push = "team", runs[2].order = "interleaved";
  runs[3].plan = "fused", runs[3].push = "ce", runs[3].reduce = "ring", runs[3].ceBatch = "3", runs[3].ceStreams = "2";
  runs[4].plan = "fused", runs[4].push = "team", runs[4].reduce = "ring", runs[4].variant = "128x2",
  runs[4].ceStreams = "2";
  runs[5].plan = "fused", runs[5].push = "bulk", runs[5].reduce = "ring", runs[5].ceStreams = "2";
  runs[6].plan = "sequential";
  if (allReduce) {
    Tune t;
    t.plan = "rs_ag", t.push = "ce", t.reduce = "ring", t.ceBatch = "3", t.ceStreams = "2";
    runs.push_back(t);
  }
  for (const std::vector<int>& devs : sharedGpuWorlds()) {
    const SharedGpus shared(devs);  // the ranks' kernels fit on a GPU together
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    const int ranks = w.size();
    const int gpus = gpusOf(devs);
    for (const Tune& run : runs) {
      for (mkcclComm_t c : w.comms) setTune(c, allReduce, run);
      for (const ReduceShape& s : oddShapes(ranks, allReduce)) {
        SCOPED_TRACE(testing::Message() << ranks << " ranks on " << gpus << " GPUs, tuning \"" << run.str(allReduce)
                                        << "\", M " << s.M << " N " << s.N << " K/rank " << s.Kr);
        const uint64_t seed = freshSeed();
        const mkcclDataType_t t = mkcclBfloat16;
        // Inputs made (on the default stream) before any rank calls: nothing else runs meanwhile.
        std::vector<ReduceBuffers> bufs(ranks);
        for (int r = 0; r < ranks; ++r) {
          cudaSetDevice(w.devs[r]);
          makeRankBuffers(&bufs[r], s, t, seed, r, ranks, allReduce);
          ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
        }
        // One thread per rank: a call may grow the symmetric scratch, which is collective.
        std::vector<mkcclResult_t> res(ranks, mkcclInternalError);
        std::vector<cudaError_t> sync(ranks, cudaErrorUnknown);
        w.onEveryRank([&](int r) {
          res[r] = runReduceOp(allReduce, bufs[r], s, t, w.comms[r], w.streams[r]);
          sync[r] = cudaStreamSynchronize(w.streams[r]);
        });
        for (int r = 0; r < ranks; ++r) {
          SCOPED_TRACE(testing::Message() << "rank " << r);
          EXPECT_EQ(mkcclSuccess, res[r]) << mkcclGetLastError(w.comms[r]);
          ASSERT_EQ(cudaSuccess, sync[r]);
          expectNoAsyncError(w.comms[r]);
          cudaSetDevice(w.devs[r]);
          expectMatches(bufs[r], s, t, seed, r, ranks, allReduce);
        }
      }
    }
    // Back to back: calls queued on each rank's stream with no sync between them, the way of
    // reducing switched from call to call (every rank alike, each on its own communicator), then
    // every output checked. A call must not take another's flags or data.
    {
      constexpr int kCalls = 12;
      const ReduceShape s{size_t(ranks) * 256 + (allReduce ? 3 : 0), 512, 128};
      const mkcclDataType_t t = mkcclBfloat16;
      const uint64_t seed = freshSeed();
      std::vector<std::vector<ReduceBuffers>> bufs;  // [call][rank]
      for (int i = 0; i < kCalls; ++i) {
        bufs.emplace_back(ranks);
        for (int r = 0; r < ranks; ++r) {
          cudaSetDevice(w.devs[r]);
          makeRankBuffers(&bufs[i][r], s, t, seed + i, r, ranks, allReduce);
          ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
        }
      }
      auto tuneFor = [&](int i) {
        Tune t;
        t.plan = allReduce && i % 6 == 5 ? "rs_ag" : "fused";
        const char* push[] = {"ce", nullptr, "team", "bulk"};
        t.push = push[i % 4];
        t.reduce = i % 4 == 1 ? nullptr : "ring";
        t.ceBatch = i % 4 == 0 ? "2" : nullptr;
        // Three copy streams per peer only where at most two ranks share a GPU: the ranks of one
        // process share its CUDA_DEVICE_MAX_CONNECTIONS (32) hardware queues, and beyond them a
        // stream waiting for a copy-engine word (cuStreamWaitValue64) can hold up another rank's
        // kernel queued behind it (4 ranks x 3 peers x 3 streams = 36 queues: a call timed out).
        t.ceStreams = i % 8 == 0 && ranks <= 2 * gpus ? "3" : nullptr;
        return t;
      };
      std::vector<std::string> errors(ranks);
      std::vector<cudaError_t> sync(ranks, cudaErrorUnknown);
      w.onEveryRank([&](int r) {
        for (int i = 0; i < kCalls; ++i) {
          if (mkcclSetTuning(w.comms[r], tuneFor(i).str(allReduce).c_str()) != mkcclSuccess && errors[r].empty())
            errors[r] = "call " + std::to_string(i) + ": tuning: " + mkcclGetLastError(nullptr);
          const mkcclResult_t res = runReduceOp(allReduce, bufs[i][r], s, t, w.comms[r], w.streams[r]);
          if (res != mkcclSuccess && errors[r].empty())
            errors[r] = "call " + std::to_string(i) + ": " + mkcclGetLastError(w.comms[r]);
        }
        sync[r] = cudaStreamSynchronize(w.streams[r]);
      });
      for (int r = 0; r < ranks; ++r) {
        SCOPED_TRACE(testing::Message() << ranks << " ranks on " << gpus << " GPUs, back to back, rank " << r);
        EXPECT_EQ("", errors[r]);
        ASSERT_EQ(cudaSuccess, sync[r]);
        expectNoAsyncError(w.comms[r]);
        cudaSetDevice(w.devs[r]);
        for (int i = 0; i < kCalls; ++i) {
          SCOPED_TRACE(testing::Message() << "call " << i);
          expectMatches(bufs[i][r], s, t, seed + i, r, ranks, allReduce);
        }
      }
    }
  }
}

// Every rank driven from one thread, auto plan: once the scratch is sized (the first call, one
// thread per rank: growing it is collective) a call only enqueues, so one thread can issue every
// rank's calls in turn. (The timed trial this replaced blocked such a program on the 7th call of a
// shape, waiting for events and a bootstrap exchange inside a stream-ordered call.)
void inProcessOneThread(bool allReduce) {
  MKCCL_REQUIRE_GPUS(2);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  const int ranks = gpuCount();
  std::vector<mkcclComm_t> comms(ranks);
  ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(comms.data(), ranks, nullptr)) << mkcclGetLastError(nullptr);
  const ReduceShape s{size_t(ranks) * 512 + (allReduce ? 5 : 0), 1032, 264};
  const mkcclDataType_t t = mkcclBfloat16;
  const uint64_t seed = freshSeed();
  std::vector<ReduceBuffers> bufs(ranks);
  std::vector<cudaStream_t> streams(ranks, nullptr);
  for (int r = 0; r < ranks; ++r) {
    cudaSetDevice(r);
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    makeRankBuffers(&bufs[r], s, t, seed, r, ranks, allReduce);
  }
  std::vector<mkcclResult_t> res(ranks, mkcclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      res[r] = runReduceOp(allReduce, bufs[r], s, t, comms[r], streams[r]);
    });
  for (auto& th : threads) th.join();
  for (int r = 0; r < ranks; ++r)
    ASSERT_EQ(mkcclSuccess, res[r]) << "first call, rank " << r << ": " << mkcclGetLastError(comms[r]);
  constexpr int kCalls = 10;
  for (int i = 0; i < kCalls; ++i)
    for (int r = 0; r < ranks; ++r) {
      cudaSetDevice(r);
      poison(bufs[r].C, bufs[r].cRows * s.N * 2, streams[r]);
      ASSERT_EQ(mkcclSuccess, runReduceOp(allReduce, bufs[r], s, t, comms[r], streams[r]))
          << "call " << i << ", rank " << r << ": " << mkcclGetLastError(comms[r]);
    }
  for (int r = 0; r < ranks; ++r) {
    SCOPED_TRACE(testing::Message() << "rank " << r << " of " << ranks << ", one thread");
    cudaSetDevice(r);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(streams[r]));
    expectNoAsyncError(comms[r]);
    expectMatches(bufs[r], s, t, seed, r, ranks, allReduce);
    cudaStreamDestroy(streams[r]);
  }
  for (auto c : comms) EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(c));
}

void inProcessTimeout(bool allReduce) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  // Two GPUs, or two ranks sharing one.
  const int devs[2] = {0, gpuCount() > 1 ? 1 : 0};
  const SharedGpus shared({devs[0], devs[1]});
  setenv("MKCCL_TIMEOUT_MS", "1500", 1);
  mkcclComm_t comms[2];
  const mkcclResult_t init = mkcclCommInitAll(comms, 2, devs);
  unsetenv("MKCCL_TIMEOUT_MS");
  ASSERT_EQ(mkcclSuccess, init) << mkcclGetLastError(nullptr);
  Tune fused;
  fused.plan = "fused";
  for (mkcclComm_t c : comms) setTune(c, allReduce, fused);
  const ReduceShape s{2 * 512, 1024, 256};
  const mkcclDataType_t t = mkcclBfloat16;
  const uint64_t seed = freshSeed();
  ReduceBuffers bufs[2];
  cudaStream_t streams[2];  // their own streams: two ranks may share a GPU
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(devs[r]);
    makeRankBuffers(&bufs[r], s, t, seed, r, 2, allReduce);
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
  }
  // Both ranks once (this also sizes the scratch, which is collective) ...
  mkcclResult_t res[2];
  std::thread other([&] {
    cudaSetDevice(devs[1]);
    res[1] = runReduceOp(allReduce, bufs[1], s, t, comms[1], streams[1]);
  });
  cudaSetDevice(devs[0]);
  res[0] = runReduceOp(allReduce, bufs[0], s, t, comms[0], streams[0]);
  other.join();
  ASSERT_EQ(mkcclSuccess, res[0]) << mkcclGetLastError(comms[0]);
  ASSERT_EQ(mkcclSuccess, res[1]) << mkcclGetLastError(comms[1]);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(devs[r]);
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  }
  // ... then rank 0 alone: its waits for rank 1 give up, the kernel drains and ends cleanly.
  cudaSetDevice(devs[0]);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(mkcclSuccess, runReduceOp(allReduce, bufs[0], s, t, comms[0], streams[0])) << mkcclGetLastError(comms[0]);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize()) << "the kernel must exit cleanly (no trap)";
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(secs, 1.4);
  EXPECT_LT(secs, 20.0);
  mkcclResult_t async = mkcclSuccess;
  ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comms[0], &async));
  EXPECT_EQ(mkcclTimeout, async) << mkcclGetLastError(comms[0]);
  EXPECT_EQ(mkcclTimeout, runReduceOp(allReduce, bufs[0], s, t, comms[0], streams[0]));
  EXPECT_EQ(mkcclSuccess, mkcclCommAbort(comms[0]));
  cudaSetDevice(devs[1]);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comms[1]));
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(devs[r]);
    cudaStreamDestroy(streams[r]);
  }
}

}  // namespace test
}  // namespace mkccl
