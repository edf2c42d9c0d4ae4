// mkcclMoeDispatch / mkcclMoeCombine on GPUs against the host model (moe_reference.h), 1-4 ranks
// in one process (mkcclCommInitAll; ranks share GPUs where there are fewer GPUs than ranks):
//   - dispatch: per-expert counts and padded offsets, every segment's rows (which source, token and
//     slot; the weight; the row's data, bit for bit), sources in rank order, padding rows marked,
//     nothing written past the rows in use;
//   - combine: out[t] = sum_j w_j * Y(t, j) against fp64, Y random, Y = recvX, or Y computed on the
//     device between the two calls;
//   - the scaled-down model shapes and odd ones (T = 0, 1, 3; H = 1, 3, 72, 100, 136; k = 1 .. 16;
//     rowAlign 1 .. 128), uniform / skewed / empty experts / dropped slots / duplicates / one hot
//     rank, bf16 and fp16;
//   - 50 dispatch + compute + combine calls queued back to back with no host sync;
//   - a receive buffer over capacity, a bad expert id, a rank that never joins, bad arguments and
//     mismatched configs: clear errors, no write, no hang.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "moe_check.h"
#include "moe_gpu_cases.h"
#include "moe_reference.h"
#include "rank_threads.h"
#include "test_util.h"

using namespace mkccl;
using namespace mkccl::moetest;
using mkccl::test::HostBarrier;
using mkccl::test::InProcessRanks;
using mkccl::test::freshSeed;
using mkccl::test::gpuCount;

namespace {

// The fused calls' overlapped route for every communicator these tests make (the library's
// default, moe.fused_route=auto, runs them sequentially): the tests of mkcclMoeDispatchGemm and
// mkcclMoeGemmCombine are of their overlapped kernels unless they set another route
// (LayerFusedCallsSequentialRoute). Process-wide, before any communicator exists.
const mkcclResult_t kOverlapRoute = mkcclSetTuning(nullptr, "moe.fused_route=overlap");

// Ranks 0..n-1 on GPUs 0, 1, ..., wrapping: ranks share GPUs when n exceeds them.
std::vector<int> devicesFor(int n) {
  std::vector<int> d(n);
  for (int i = 0; i < n; ++i) d[i] = i % gpuCount();
  return d;
}

// While it lives: ranks may share GPUs, device waits give up after 20 s (a protocol bug fails the
// test instead of hanging it). Set before the communicators are made.
struct TestEnv {
  TestEnv(int timeoutMs = 20000) {
    setenv("MKCCL_SHARE_GPUS", "1", 1);
    setenv("MKCCL_TIMEOUT_MS", std::to_string(timeoutMs).c_str(), 1);
  }
  ~TestEnv() {
    unsetenv("MKCCL_SHARE_GPUS");
    unsetenv("MKCCL_TIMEOUT_MS");
  }
};

// The ranks of one test, on devicesFor(n), with TestEnv's settings for as long as they live: the
// settings are made before the communicators (the base classes are built in order) and unset
// after they are destroyed. (Tests that make several worlds in turn keep one TestEnv around them.)
struct MoeRanks : private TestEnv, public InProcessRanks {
  explicit MoeRanks(int n) : InProcessRanks(devicesFor(n)) {}
  MoeRanks(int n, int timeoutMs) : TestEnv(timeoutMs), InProcessRanks(devicesFor(n)) {}
};


std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](Case c) { v.push_back(c); };
  // The model shapes, scaled down (H, I and T smaller; top-k as the models have it).
  add({"DeepSeek-V3-like", 16, 8, 512, RouteKind::Uniform, 0, false, [](int r) { return 200 + 37 * r; },
       Case::YRandom});
  add({"Qwen3-30B-A3B-like, skewed, Y = recvX", 8, 8, 256, RouteKind::Skewed, 0, false, [](int) { return 300; },
       Case::YInPlace});
  add({"Mixtral-like, fp16, device compute", 2, 2, 1024, RouteKind::Uniform, 0, true,
       [](int r) { return 128 * (r + 1); }, Case::YDevice, 0, 3});
  // Odd shapes: T = 0, 1, 3; H not a multiple of 8 (unaligned rows of X and out); small alignments.
  add({"T 0/1/3, H 100, dropped slots", 3, 5, 100, RouteKind::Dropped, 16, false,
       [](int r) { return r == 0 ? 0 : r == 1 ? 1 : 3; }, Case::YRandom, 4});
  add({"H 72, empty experts", 5, 3, 72, RouteKind::EmptyExperts, 0, false, [](int) { return 77; }, Case::YDevice});
  add({"k 16, duplicates, fp16, H 136", 4, 16, 136, RouteKind::Duplicates, 32, true, [](int r) { return 50 + r; },
       Case::YRandom, 0, 1});
  add({"one hot rank", 4, 4, 64, RouteKind::OneRank, 0, false, [](int) { return 100; }, Case::YInPlace});
  add({"H 3, k 1, one expert per rank, align 1", 1, 1, 3, RouteKind::Uniform, 1, false,
       [](int r) { return 5 + r; }, Case::YRandom});
  add({"T 0 everywhere", 2, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 0; }, Case::YRandom, 8});
  add({"more tokens than CTAs x warps", 8, 4, 128, RouteKind::Uniform, 0, false, [](int r) { return 1500 - 100 * r; },
       Case::YDevice});
  return v;
}

void runAllCases(int ws) {
  MoeRanks w(ws);
  ASSERT_TRUE(w.ok());
  uint64_t seed = freshSeed();
  for (const Case& c : cases()) runCase(w, c, ++seed);
}

TEST(MoeGpu, OneRank) {
  MKCCL_REQUIRE_GPUS(1);
  runAllCases(1);
}
TEST(MoeGpu, TwoRanks) {
  MKCCL_REQUIRE_GPUS(1);
  runAllCases(2);
}
TEST(MoeGpu, ThreeRanks) {
  MKCCL_REQUIRE_GPUS(1);
  runAllCases(3);
}
TEST(MoeGpu, FourRanks) {
  MKCCL_REQUIRE_GPUS(1);
  runAllCases(4);
}

// 50 calls per rank queued without a host sync: dispatch, the experts' compute on the device,
// combine into a fresh output; T changes every call (0 included). Checked at the end.
TEST(MoeGpu, FiftyCallsBackToBack) {
  MKCCL_REQUIRE_GPUS(1);
  const TestEnv env;
  for (int ws : {2, 3}) {
    InProcessRanks w(devicesFor(ws));
    ASSERT_TRUE(w.ok());
    const uint64_t seed = freshSeed();
    SCOPED_TRACE(testing::Message() << ws << " ranks, seed " << seed);
    runBackToBack(w, Case{"back to back", 4, 4, 256, RouteKind::Uniform, 0, false, nullptr, Case::YDevice}, 50, 160,
                  seed);
  }
}

// A dispatch that would put more rows on a rank than its maxRecvRows: every rank stops with the
// same clear error and nothing is written; the host-side capacity (T) is refused at once.
TEST(MoeGpu, CapacityOverflowIsAnErrorNotAWrite) {
  MKCCL_REQUIRE_GPUS(1);
  const int ws = 2;
  MoeRanks w(ws);
  ASSERT_TRUE(w.ok());
  Case c{"overflow", 4, 4, 64, RouteKind::OneRank, 0, false, [](int) { return 100; }, Case::YRandom};
  mkcclMoeConfig_t cfg = configOf(c, ws, 100);
  cfg.maxRecvRows = 512;  // rank 1 would get 2 * 100 * 4 = 800 rows (plus padding)
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  const Dims d = dimsOf(cfg, ws, 512);
  std::vector<RankData> rd(ws);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    RankData& x = rd[r];
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.buf));
    EXPECT_EQ(512u, x.buf.maxRecvRows);
    std::mt19937_64 g(r);
    makeInputs(x, RouteKind::OneRank, 100, d, 5 + r, g);
    EXPECT_EQ(mkcclInvalidArgument,
              mkcclMoeDispatch(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 101, w.streams[r]))
        << "T above maxTokensPerRank";
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("maxTokensPerRank"));
    test::poison(x.buf.recvX, 512 * x.buf.rowPitch * 2, w.streams[r]);
    test::poison(x.buf.rowInfo, 512 * sizeof(mkcclMoeRowInfo), w.streams[r]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  }
  std::vector<mkcclResult_t> res(ws);
  w.onEveryRank([&](int r) {
    res[r] = mkcclMoeDispatch(hs.h[r], rd[r].dX, (const int32_t*)rd[r].dIdx, (const float*)rd[r].dW, 100,
                              w.streams[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r])) << "the kernel must exit cleanly";
  });
  for (int r = 0; r < ws; ++r) {
    EXPECT_EQ(mkcclSuccess, res[r]) << "the error is the call's asynchronous one";
    mkcclResult_t async = mkcclSuccess;
    ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(w.comms[r], &async));
    EXPECT_EQ(mkcclInvalidUsage, async) << "rank " << r;
    const std::string msg = mkcclGetLastError(w.comms[r]);
    EXPECT_NE(std::string::npos, msg.find("maxRecvRows")) << msg;
    cudaSetDevice(w.devs[r]);
    const auto recv = download<uint8_t>(rd[r].buf.recvX, 512 * rd[r].buf.rowPitch * 2);
    const auto info = download<uint8_t>(rd[r].buf.rowInfo, 512 * sizeof(mkcclMoeRowInfo));
    EXPECT_TRUE(std::all_of(recv.begin(), recv.end(), [](uint8_t b) { return b == 0xff; })) << "rank " << r;
    EXPECT_TRUE(std::all_of(info.begin(), info.end(), [](uint8_t b) { return b == 0xff; })) << "rank " << r;
    EXPECT_NE(mkcclSuccess, mkcclMoeDispatch(hs.h[r], rd[r].dX, (const int32_t*)rd[r].dIdx, (const float*)rd[r].dW,
                                             100, w.streams[r]))
        << "the communicator keeps its error";
    rd[r].release();
  }
}

// An expert id outside [-1, E): the slot is dropped, the call completes on every rank, and the
// rank that passed it reports which id.
TEST(MoeGpu, BadExpertIdIsReported) {
  MKCCL_REQUIRE_GPUS(1);
  const int ws = 2;
  MoeRanks w(ws);
  ASSERT_TRUE(w.ok());
  Case c{"bad id", 2, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 10; }, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(c, ws, 10);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  const Dims d = dimsOf(cfg, ws, 0);
  std::vector<RankData> rd(ws);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    rd[r].route = makeRouting(RouteKind::Uniform, 10, d, 9 + r);
    if (r == 1) rd[r].route.idx[7] = 4 * ws + 3;
    std::mt19937_64 g(r);
    rd[r].X = randomHalves(10 * c.H, false, g);
    rd[r].uploadInputs();
  }
  w.onEveryRank([&](int r) {
    EXPECT_EQ(mkcclSuccess, mkcclMoeDispatch(hs.h[r], rd[r].dX, (const int32_t*)rd[r].dIdx, (const float*)rd[r].dW,
                                             10, w.streams[r]));
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  });
  mkcclResult_t async = mkcclSuccess;
  ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(w.comms[1], &async));
  EXPECT_EQ(mkcclInvalidArgument, async);
  const std::string msg = mkcclGetLastError(w.comms[1]);
  EXPECT_NE(std::string::npos, msg.find(std::to_string(4 * ws + 3))) << msg;
  expectNoAsyncError(w.comms[0]);
  for (auto& x : rd) x.release();
}

// Rank 1 never calls dispatch: rank 0's waits give up after the timeout (1.5 s), its kernel
// leaves, the error reaches mkcclCommGetAsyncError and the next call.
TEST(MoeGpu, PeerNeverJoins) {
  MKCCL_REQUIRE_GPUS(1);
  MoeRanks w(2, 1500);
  ASSERT_TRUE(w.ok());
  runAbsentPeer(w, Case{"lonely", 2, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 8; }, Case::YRandom}, 1.3,
                20.0);
}

// Mistakes refused before anything is queued, with a message; the handle stays usable.
TEST(MoeGpu, BadArguments) {
  MKCCL_REQUIRE_GPUS(1);
  MoeRanks w(2);
  ASSERT_TRUE(w.ok());
  // Configs refused on every rank (nothing collective happens before the checks).
  w.onEveryRank([&](int r) {
    mkcclComm_t comm = w.comms[r];
    auto refused = [&](mkcclMoeConfig_t cfg, const char* what, const char* word) {
      mkcclMoe_t h = reinterpret_cast<mkcclMoe_t>(0x1);
      EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCreate(&h, comm, &cfg)) << what;
      EXPECT_EQ(nullptr, h) << what;
      EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find(word))
          << what << ": " << mkcclGetLastError(nullptr);
    };
    mkcclMoeConfig_t ok = MKCCL_MOE_CONFIG_INITIALIZER;
    ok.numExperts = 8;
    ok.topk = 2;
    ok.hidden = 64;
    ok.maxTokensPerRank = 16;
    mkcclMoeConfig_t c = ok;
    c.numExperts = 7;
    refused(c, "E not a multiple of the ranks", "multiple");
    c = ok, c.numExperts = 2048;
    refused(c, "E too large", "numExperts");
    c = ok, c.topk = 0;
    refused(c, "k = 0", "topk");
    c = ok, c.topk = 17;
    refused(c, "k = 17", "topk");
    c = ok, c.hidden = 0;
    refused(c, "H = 0", "hidden");
    c = ok, c.dtype = mkcclFloat32;
    refused(c, "fp32", "dtype");
    c = ok, c.maxTokensPerRank = 0;
    refused(c, "no capacity", "maxTokensPerRank");
    c = ok, c.rowAlign = 96;
    refused(c, "alignment not a power of two", "rowAlign");
    c = ok, c.magic = 0;
    refused(c, "bad magic", "magic");
    c = ok, c.maxRecvRows = (size_t)1 << 32;
    refused(c, "rows beyond 32 bits", "maxRecvRows");
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCreate(nullptr, comm, &ok));
    mkcclMoe_t h = nullptr;
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCreate(&h, comm, nullptr));
    EXPECT_NE(mkcclSuccess, mkcclMoeCreate(&h, nullptr, &ok));
  });
  // Configs that differ between ranks: every rank is told (a collective check).
  {
    std::vector<mkcclResult_t> res(2);
    std::vector<mkcclMoe_t> h(2, nullptr);
    w.onEveryRank([&](int r) {
      mkcclMoeConfig_t c = MKCCL_MOE_CONFIG_INITIALIZER;
      c.numExperts = 8;
      c.topk = 2;
      c.hidden = r == 0 ? 64 : 72;
      c.maxTokensPerRank = 16;
      res[r] = mkcclMoeCreate(&h[r], w.comms[r], &c);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(mkcclInvalidArgument, res[r]) << "rank " << r;
      EXPECT_EQ(nullptr, h[r]);
    }
  }
  Case c{"args", 4, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 16; }, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(c, 2, 16);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  const Dims d = dimsOf(cfg, 2, 0);
  std::vector<RankData> rd(2);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(w.devs[r]);
    RankData& x = rd[r];
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.buf));
    std::mt19937_64 g(r);
    makeInputs(x, RouteKind::Uniform, 16, d, 2 + r, g);
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dOut, 16 * c.H * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dY, x.buf.maxRecvRows * x.buf.rowPitch * 2));
  }
  w.onEveryRank([&](int r) {
    RankData& x = rd[r];
    mkcclMoe_t h = hs.h[r];
    cudaStream_t s = w.streams[r];
    const int32_t* idx = (const int32_t*)x.dIdx;
    const float* wt = (const float*)x.dW;
    std::vector<char> host(16 * c.H * 2);
    EXPECT_EQ(mkcclInvalidUsage, mkcclMoeCombine(h, x.dY, x.dOut, 16, s)) << "combine before any dispatch";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(nullptr, x.dX, idx, wt, 16, s));
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(h, nullptr, idx, wt, 16, s));
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(h, x.dX, nullptr, wt, 16, s));
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(h, x.dX, idx, nullptr, 16, s));
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(h, host.data(), idx, wt, 16, s)) << "host X";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(h, (char*)x.dX + 1, idx, wt, 8, s)) << "X odd address";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(h, x.dX, idx, wt, 17, s)) << "T above capacity";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDispatch(h, x.buf.recvX, idx, wt, 16, s)) << "X inside recvX";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeGetBuffers(h, nullptr));
    // A good pair of calls (every rank), then combine's own mistakes.
    EXPECT_EQ(mkcclSuccess, mkcclMoeDispatch(h, x.dX, idx, wt, 16, s)) << mkcclGetLastError(nullptr);
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCombine(h, x.dY, x.dOut, 15, s)) << "T differs from the dispatch's";
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("T=16"));
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCombine(h, (char*)x.dY + 2, x.dOut, 16, s)) << "Y not 16-byte aligned";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCombine(h, x.dOut, x.dY, 16, s)) << "Y smaller than maxRecvRows rows";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCombine(h, x.dY, nullptr, 16, s));
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCombine(h, x.dY, x.dY, 16, s)) << "out overlaps Y";
    EXPECT_EQ(mkcclInvalidArgument, mkcclMoeCombine(h, x.dY, host.data(), 16, s)) << "host out";
    EXPECT_EQ(mkcclSuccess, mkcclMoeCombine(h, x.buf.recvX, x.dOut, 16, s)) << mkcclGetLastError(nullptr);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    expectNoAsyncError(w.comms[r]);
  });
  for (auto& x : rd) x.release();
  // A destroyed handle is refused.
  cudaSetDevice(w.devs[0]);
  mkcclMoe_t gone = hs.h[0];
  EXPECT_EQ(mkcclSuccess, mkcclMoeDestroy(gone));
  hs.h[0] = nullptr;
  EXPECT_EQ(mkcclInvalidArgument, mkcclMoeDestroy(gone));
  mkcclMoeBuffers b;
  EXPECT_EQ(mkcclInvalidArgument, mkcclMoeGetBuffers(gone, &b));
}

// Dispatch, the experts' compute and combine captured in a CUDA graph on every rank, launched once:
// the calls allocate nothing and never synchronise with the host.
TEST(MoeGpu, CapturedInACudaGraph) {
  MKCCL_REQUIRE_GPUS(1);
  const int ws = 2;
  MoeRanks w(ws);
  ASSERT_TRUE(w.ok());
  Case c{"graph", 4, 4, 128, RouteKind::Uniform, 0, false, [](int) { return 64; }, Case::YDevice};
  const mkcclMoeConfig_t cfg = configOf(c, ws, 64);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  const Dims d = dimsOf(cfg, ws, 0);
  std::vector<RankData> rd(ws);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    RankData& x = rd[r];
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.buf));
    std::mt19937_64 g(60 + r);
    makeInputs(x, RouteKind::Uniform, 64, d, 40 + r, g);
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dOut, 64 * c.H * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dY, x.buf.maxRecvRows * x.buf.rowPitch * 2));
    test::poison(x.dOut, 64 * c.H * 2, w.streams[r]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  }
  std::vector<cudaGraphExec_t> exec(ws, nullptr);
  std::vector<std::string> err(ws);
  w.onEveryRank([&](int r) {
    RankData& x = rd[r];
    cudaStream_t s = w.streams[r];
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      err[r] = "begin capture";
      return;
    }
    mkcclResult_t e = mkcclMoeDispatch(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 64, s);
    expertScale(x.buf.recvX, x.buf.rowInfo, x.buf.expertOffsets, c.El, x.dY, x.buf.rowPitch, c.H, false, s);
    if (e == mkcclSuccess) e = mkcclMoeCombine(hs.h[r], x.dY, x.dOut, 64, s);
    const cudaError_t ce = cudaStreamEndCapture(s, &graph);
    if (e != mkcclSuccess) err[r] = std::string("captured call: ") + mkcclGetLastError(nullptr);
    else if (ce != cudaSuccess) err[r] = std::string("end capture: ") + cudaGetErrorString(ce);
    else if (cudaGraphInstantiate(&exec[r], graph, 0) != cudaSuccess) err[r] = "instantiate";
    if (graph) cudaGraphDestroy(graph);
    // Three launches back to back: each takes its own sequence numbers from the device's counter.
    for (int i = 0; i < 3 && err[r].empty(); ++i)
      if (cudaGraphLaunch(exec[r], s) != cudaSuccess) err[r] = "launch";
    if (err[r].empty() && cudaStreamSynchronize(s) != cudaSuccess) err[r] = "graph run";
  });
  for (int r = 0; r < ws; ++r) {
    EXPECT_EQ("", err[r]) << "rank " << r;
    expectNoAsyncError(w.comms[r]);
    cudaSetDevice(w.devs[r]);
    if (exec[r]) cudaGraphExecDestroy(exec[r]);
  }
  // out against the reference: after the graph's runs, and again after the same calls made eagerly
  // (eager calls may follow replays on the communicator).
  auto checkOut = [&](const char* when) {
    for (int r = 0; r < ws; ++r) {
      SCOPED_TRACE(testing::Message() << when << ", rank " << r);
      cudaSetDevice(w.devs[r]);
      RankData& x = rd[r];
      x.out = download<uint16_t>(x.dOut, 64 * c.H);
      EXPECT_EQ(0u, checkStandInOut(d, x));
      test::poison(x.dOut, 64 * c.H * 2, w.streams[r]);
      EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
    }
  };
  checkOut("graph");
  w.onEveryRank([&](int r) {
    RankData& x = rd[r];
    cudaStream_t s = w.streams[r];
    EXPECT_EQ(mkcclSuccess, mkcclMoeDispatch(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 64, s));
    expertScale(x.buf.recvX, x.buf.rowInfo, x.buf.expertOffsets, c.El, x.dY, x.buf.rowPitch, c.H, false, s);
    EXPECT_EQ(mkcclSuccess, mkcclMoeCombine(hs.h[r], x.dY, x.dOut, 64, s)) << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  });
  for (int r = 0; r < ws; ++r) expectNoAsyncError(w.comms[r]);
  checkOut("eager after the graph");
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    rd[r].release();
  }
}



TEST(MoeGpu, LayerComposedOneToFourRanks) {
  MKCCL_REQUIRE_GPUS(1);
  const TestEnv env;
  uint64_t seed = freshSeed();
  const std::vector<LayerCase> cs = {
      {4, 4, 136, 200, RouteKind::Uniform, [](int r) { return 150 + 29 * r; }},
      {3, 2, 264, 128, RouteKind::Skewed, [](int r) { return r == 0 ? 0 : r == 1 ? 1 : 3 + 40 * r; }},
      {4, 3, 128, 72, RouteKind::Dropped, [](int r) { return 90; }},
      {6, 2, 72, 256, RouteKind::EmptyExperts, [](int r) { return 60 + r; }},
      {4, 2, 200, 136, RouteKind::Skewed, [](int r) { return 50 + 31 * r; }, true},
      {16, 16, 72, 136, RouteKind::Uniform, [](int r) { return 40 + 9 * r; }},
      {4, 3, 136, 200, RouteKind::Uniform, [](int r) { return 80 + 7 * r; }, false, true},
  };
  for (int ws = 1; ws <= 4; ++ws) {
    InProcessRanks w(devicesFor(ws));
    ASSERT_TRUE(w.ok());
    for (const LayerCase& c : cs) runLayer(w, c, ++seed);
  }
}

// The composed layer (dispatch, SwiGLU grouped GEMM, grouped GEMM, combine) captured once in a CUDA
// graph per rank, 2 ranks sharing a GPU, and replayed 100 times interleaved with the same layer
// made eagerly (graph first on even rounds, eager first on odd ones), fresh routing and X every
// round (uploaded into the buffers the graph holds), both outputs poisoned first. Each replay must
// match the eager call of its round, and both the fp32 reference on rounds 0, 1, 50 and 99: a replay
// that reused its capture's sequence number would pass on the flags of the call before and combine
// stale rows (or hang until the device timeout).
// fused: the same with mkcclMoeDispatchGemm for the dispatch and the SwiGLU GEMM (its fork and
// join of the handle's second stream captured too). both: the second half fused too
// (mkcclMoeGemmCombine: its memset, fork and join captured as well).
void runGraphLayer(bool fused, bool both = false) {
  const int ws = 2, rounds = 100;
  MoeRanks w(ws);
  ASSERT_TRUE(w.ok());
  const LayerCase c{4, 3, 136, 128, RouteKind::Uniform, [](int r) { return 96 - 23 * r; }};
  Case base{"graph layer", c.El, c.k, c.H, c.kind, 0, false, c.T, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(base, ws, 96);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  struct Rank : LayerRank {
    RankData d;
    void* dOutE = nullptr;
    cudaGraphExec_t exec = nullptr;
  };
  std::vector<Rank> rk(ws);
  Dims d;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    Rank& x = rk[r];
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.d.buf));
    d = dimsOf(cfg, ws, x.d.buf.maxRecvRows);
    const int T = c.T(r);
    // c is neither plain nor gate-up: W1 blocked, as mkcclGroupedGemmSwiglu below takes it.
    ASSERT_NO_FATAL_FAILURE(x.make(c, x.d.buf.maxRecvRows, g));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.d.dX, (size_t)T * c.H * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.d.dIdx, (size_t)T * c.k * 4));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.d.dW, (size_t)T * c.k * 4));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.d.dOut, (size_t)T * c.H * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dOutE, (size_t)T * c.H * 2));
  }
  // Fresh routing and X for every rank, in the same device buffers.
  auto refill = [&]() {
    for (int r = 0; r < ws; ++r) {
      cudaSetDevice(w.devs[r]);
      RankData& x = rk[r].d;
      const int T = c.T(r);
      x.route = makeRouting(c.kind, T, d, g());
      x.X = randomHalves((size_t)T * c.H, false, g);
      // On the rank's stream, ahead of the layer (see upload).
      cudaStream_t s = w.streams[r];
      ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(x.dX, x.X.data(), x.X.size() * 2, cudaMemcpyHostToDevice, s));
      ASSERT_EQ(cudaSuccess,
                cudaMemcpyAsync(x.dIdx, x.route.idx.data(), x.route.idx.size() * 4, cudaMemcpyHostToDevice, s));
      ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(x.dW, x.route.w.data(), x.route.w.size() * 4, cudaMemcpyHostToDevice, s));
    }
  };
  auto layer = [&](int r, void* out) {
    Rank& x = rk[r];
    const mkcclMoeBuffers& b = x.d.buf;
    cudaStream_t s = w.streams[r];
    mkcclResult_t e;
    if (fused) {
      e = mkcclMoeDispatchGemm(hs.h[r], x.d.dX, (const int32_t*)x.d.dIdx, (const float*)x.d.dW, c.T(r), x.dW1, x.dAct,
                               c.I, 1, s);
    } else {
      e = mkcclMoeDispatch(hs.h[r], x.d.dX, (const int32_t*)x.d.dIdx, (const float*)x.d.dW, c.T(r), s);
      if (e == mkcclSuccess)
        e = mkcclGroupedGemmSwiglu(b.recvX, x.dW1, x.dAct, b.expertOffsets, c.El, b.maxRecvRows, c.I, c.H,
                                   mkcclBfloat16, mkcclBfloat16, s);
    }
    if (both) {
      if (e == mkcclSuccess) e = mkcclMoeGemmCombine(hs.h[r], x.dAct, x.dW2, x.dY, out, c.I, c.T(r), s);
      return e;
    }
    if (e == mkcclSuccess)
      e = mkcclGroupedGemm(x.dAct, x.dW2, x.dY, b.expertOffsets, c.El, b.maxRecvRows, c.H, c.I, mkcclBfloat16,
                           mkcclBfloat16, s);
    if (e == mkcclSuccess) e = mkcclMoeCombine(hs.h[r], x.dY, out, c.T(r), s);
    return e;
  };
  // One eager layer first: the GEMMs' workspace and the plans exist before the capture.
  refill();
  std::vector<std::string> err(ws);
  w.onEveryRank([&](int r) {
    if (layer(r, rk[r].dOutE) != mkcclSuccess) err[r] = std::string("eager: ") + mkcclGetLastError(w.comms[r]);
    if (err[r].empty() && cudaStreamSynchronize(w.streams[r]) != cudaSuccess) err[r] = "eager run";
    if (!err[r].empty()) return;
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(w.streams[r], cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      err[r] = "begin capture";
      return;
    }
    const mkcclResult_t e = layer(r, rk[r].d.dOut);
    const cudaError_t ce = cudaStreamEndCapture(w.streams[r], &graph);
    if (e != mkcclSuccess) err[r] = std::string("captured call: ") + mkcclGetLastError(w.comms[r]);
    else if (ce != cudaSuccess) err[r] = std::string("end capture: ") + cudaGetErrorString(ce);
    else if (cudaGraphInstantiate(&rk[r].exec, graph, 0) != cudaSuccess) err[r] = "instantiate";
    if (graph) cudaGraphDestroy(graph);
  });
  for (int r = 0; r < ws; ++r) ASSERT_EQ("", err[r]) << "rank " << r;
  size_t refChecks = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    refill();
    w.onEveryRank([&](int r) {
      Rank& x = rk[r];
      cudaStream_t s = w.streams[r];
      const size_t outBytes = (size_t)c.T(r) * c.H * 2;
      test::poison(x.d.dOut, outBytes, s);
      test::poison(x.dOutE, outBytes, s);
      mkcclResult_t e = mkcclSuccess;
      if (round % 2 == 1) e = layer(r, x.dOutE);
      if (e == mkcclSuccess && cudaGraphLaunch(x.exec, s) != cudaSuccess) err[r] = "graph launch";
      if (e == mkcclSuccess && round % 2 == 0) e = layer(r, x.dOutE);
      if (e != mkcclSuccess) err[r] = std::string("eager: ") + mkcclGetLastError(w.comms[r]);
      if (cudaStreamSynchronize(s) != cudaSuccess && err[r].empty()) err[r] = "stream";
    });
    bool ok = true;
    for (int r = 0; r < ws; ++r) {
      EXPECT_EQ("", err[r]) << "rank " << r;
      expectNoAsyncError(w.comms[r]);
      ok = ok && err[r].empty() && !::testing::Test::HasFailure();
    }
    ASSERT_TRUE(ok);
    const bool withRef = round == 0 || round == 1 || round == rounds / 2 || round == rounds - 1;
    size_t wrong = 0;
    for (int r = 0; r < ws; ++r) {
      cudaSetDevice(w.devs[r]);
      Rank& x = rk[r];
      const int T = c.T(r);
      const std::vector<uint16_t> got = download<uint16_t>(x.d.dOut, (size_t)T * c.H);
      const std::vector<uint16_t> eager = download<uint16_t>(x.dOutE, (size_t)T * c.H);
      std::vector<double> ref(c.H);
      for (int t = 0; t < T; ++t) {
        const uint16_t* gr = &got[(size_t)t * c.H];
        const uint16_t* er = &eager[(size_t)t * c.H];
        // Same kernels on the same inputs: the replay is expected to equal the eager row; a small
        // tolerance only (a stale or unwritten row is far off).
        double scale = 1e-3;
        for (size_t h = 0; h < c.H; ++h) scale = std::max(scale, (double)fabs(fromBits(er[h], false)));
        for (size_t h = 0; h < c.H; ++h) {
          const double e = fabs((double)fromBits(gr[h], false) - fromBits(er[h], false)) / scale;
          if (!(e <= 1e-2) && wrong++ < 5)
            ADD_FAILURE() << "rank " << r << " replay out[" << t << ", " << h << "] = " << fromBits(gr[h], false)
                          << ", eager " << fromBits(er[h], false);
        }
        if (!withRef) continue;
        layerReference(c, x.d.X, x.d.route, t, [&](int o) -> const LayerWeights& { return rk[o].wt; }, ref.data());
        double rs = 1e-3;
        for (double v : ref) rs = std::max(rs, fabs(v));
        for (size_t h = 0; h < c.H; ++h)
          for (const uint16_t* row : {gr, er}) {
            const double e = fabs(fromBits(row[h], false) - ref[h]) / rs;
            if (!(e <= 3e-2) && wrong++ < 5)
              ADD_FAILURE() << "rank " << r << (row == gr ? " replay" : " eager") << " out[" << t << ", " << h
                            << "] = " << fromBits(row[h], false) << ", reference " << ref[h];
          }
        ++refChecks;
      }
    }
    ASSERT_EQ(0u, wrong);
  }
  EXPECT_EQ(4u * (c.T(0) + c.T(1)), refChecks);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    if (rk[r].exec) cudaGraphExecDestroy(rk[r].exec);
    rk[r].release();
    cudaFree(rk[r].dOutE);
    rk[r].d.release();
  }
}


TEST(MoeGpu, LayerReplayedInACudaGraph) {
  MKCCL_REQUIRE_GPUS(1);
  runGraphLayer(false);
}

TEST(MoeGpu, FusedLayerReplayedInACudaGraph) {
  MKCCL_REQUIRE_GPUS(1);
  runGraphLayer(true);
}

TEST(MoeGpu, FullyFusedLayerReplayedInACudaGraph) {
  MKCCL_REQUIRE_GPUS(1);
  runGraphLayer(true, true);
}

// ---- mkcclMoeDispatchGemm (dispatch fused with the first expert GEMM) ----

// The fused layer against the composed one and the fp32 reference, 1-4 ranks sharing the GPU:
// H and I not multiples of 128, T = 0 (one rank, and every rank), 1, 3 and larger, uniform /
// skewed / dropped / empty-expert routings.
std::vector<LayerCase> fusedLayerCases() {
  return {
      {4, 4, 136, 200, RouteKind::Uniform, [](int r) { return 150 + 29 * r; }},
      {3, 2, 264, 128, RouteKind::Skewed, [](int r) { return r == 0 ? 0 : r == 1 ? 1 : 3 + 40 * r; }},
      {4, 3, 128, 72, RouteKind::Dropped, [](int r) { return 90; }},
      {6, 2, 72, 256, RouteKind::EmptyExperts, [](int r) { return 60 + r; }},
      {2, 2, 72, 136, RouteKind::Uniform, [](int) { return 0; }},
      {8, 8, 200, 144, RouteKind::Uniform, [](int r) { return 3 + 380 * (r % 2); }},
      {4, 2, 136, 200, RouteKind::Dropped, [](int r) { return 70 + 13 * r; }, true},
      {16, 16, 72, 136, RouteKind::Skewed, [](int r) { return 30 + 11 * r; }},
      {4, 3, 200, 72, RouteKind::Uniform, [](int r) { return 90 + 21 * r; }, false, true},
      {3, 2, 136, 264, RouteKind::Skewed, [](int r) { return 60 + 5 * r; }, true, true},
  };
}

// tuning: set on every communicator first ("" leaves the library's defaults: the fused calls'
// sequential route, moe.fused_route=auto).
void runFusedLayers(bool both, int maxRanks = 4, const char* tuning = "moe.fused_route=overlap") {
  ASSERT_EQ(mkcclSuccess, kOverlapRoute);
  const TestEnv env;
  uint64_t seed = freshSeed();
  const std::vector<LayerCase> cs = fusedLayerCases();
  for (int ws = 1; ws <= maxRanks; ++ws) {
    InProcessRanks w(devicesFor(ws));
    ASSERT_TRUE(w.ok());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)) << tuning;
    SCOPED_TRACE(*tuning ? tuning : "default tuning");
    for (const LayerCase& c : cs) runLayer(w, c, ++seed, true, both);
  }
}

TEST(MoeGpu, LayerFusedOneToFourRanks) {
  MKCCL_REQUIRE_GPUS(1);
  runFusedLayers(false);
}

// ---- mkcclMoeGemmCombine (the second expert GEMM fused with combine) ----

// The layer with both halves fused (mkcclMoeDispatchGemm, mkcclMoeGemmCombine) against the
// composed one and the fp32 reference: the same cases, 1-4 ranks sharing the GPU.
TEST(MoeGpu, LayerBothHalvesFusedOneToFourRanks) {
  MKCCL_REQUIRE_GPUS(1);
  runFusedLayers(true);
}

// The same with moe.combine_split=off (the combine returns and reduces beside the GEMM, on its
// own CTAs; the default splits it: a second launch reduces on every CTA), 1-3 ranks.
TEST(MoeGpu, LayerBothHalvesFusedWholeCombine) {
  MKCCL_REQUIRE_GPUS(1);
  runFusedLayers(true, 3, "moe.combine_split=off;moe.fused_route=overlap");
}

// Both fused calls on their default route (moe.fused_route=auto: sequential, the dispatch then
// the GEMM, the GEMM then the combine), and forced sequential: the same cases, 1-4 ranks.
TEST(MoeGpu, LayerFusedCallsSequentialRoute) {
  MKCCL_REQUIRE_GPUS(1);
  runFusedLayers(true, 4, "");
  runFusedLayers(false, 2, "moe.fused_route=sequential");
}

// swiglu = 0: act = recvX . W1_e^T per row, checked row by row against fp32 dot products of the
// source rank's X row (found through rowInfo) and the expert's W1 rows; recvX and act poisoned
// before the call. N not a multiple of 128 (a 128-wide tile) and above (256-wide tiles).
TEST(MoeGpu, DispatchGemmPlainAgainstFp32) {
  MKCCL_REQUIRE_GPUS(1);
  const TestEnv env;
  uint64_t seed = freshSeed();
  struct P {
    int El, k;
    size_t H, N;
    RouteKind kind;
    int T;
  };
  for (const P& p : {P{4, 3, 136, 72, RouteKind::Uniform, 130}, P{3, 2, 64, 264, RouteKind::Skewed, 77}}) {
    for (int ws : {1, 3}) {
      InProcessRanks w(devicesFor(ws));
      ASSERT_TRUE(w.ok());
      SCOPED_TRACE(testing::Message() << ws << " ranks, H " << p.H << " N " << p.N << ", seed " << seed + 1);
      std::mt19937_64 g(++seed);
      Case base{"plain", p.El, p.k, p.H, p.kind, 0, false, [&](int) { return p.T; }, Case::YRandom};
      const mkcclMoeConfig_t cfg = configOf(base, ws, p.T);
      Handles hs(w, cfg);
      ASSERT_TRUE(hs.ok);
      std::vector<RankData> rd(ws);
      std::vector<std::vector<uint16_t>> W(ws);
      std::vector<void*> dW1(ws), dAct(ws);
      for (int r = 0; r < ws; ++r) {
        cudaSetDevice(w.devs[r]);
        RankData& x = rd[r];
        ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.buf));
        const Dims d = dimsOf(cfg, ws, x.buf.maxRecvRows);
        x.route = makeRouting(p.kind, p.T, d, g());
        x.X = randomHalves((size_t)p.T * p.H, false, g);
        W[r] = randomHalves(size_t(p.El) * p.N * p.H, false, g);
        dW1[r] = upload(W[r].data(), W[r].size() * 2);
        x.uploadInputs();
        ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct[r], x.buf.maxRecvRows * p.N * 2));
      }
      std::vector<mkcclResult_t> res(ws, mkcclInternalError);
      w.onEveryRank([&](int r) {
        RankData& x = rd[r];
        cudaMemsetAsync(x.buf.recvX, 0xff, x.buf.maxRecvRows * x.buf.rowPitch * 2, w.streams[r]);
        cudaMemsetAsync(dAct[r], 0xff, x.buf.maxRecvRows * p.N * 2, w.streams[r]);
        res[r] = mkcclMoeDispatchGemm(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, p.T, dW1[r], dAct[r],
                                      p.N, 0, w.streams[r]);
        if (cudaStreamSynchronize(w.streams[r]) != cudaSuccess) res[r] = mkcclUnhandledCudaError;
      });
      size_t wrong = 0, rows = 0;
      for (int r = 0; r < ws; ++r) {
        ASSERT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
        expectNoAsyncError(w.comms[r]);
        cudaSetDevice(w.devs[r]);
        const mkcclMoeBuffers& b = rd[r].buf;
        const std::vector<int32_t> off = download<int32_t>(b.expertOffsets, p.El + 1);
        const std::vector<int32_t> cnt = download<int32_t>(b.expertCounts, p.El);
        const std::vector<mkcclMoeRowInfo> info = download<mkcclMoeRowInfo>(b.rowInfo, b.maxRecvRows);
        const std::vector<uint16_t> act = download<uint16_t>(dAct[r], b.maxRecvRows * p.N);
        for (int e = 0; e < p.El; ++e)
          for (int i = 0; i < cnt[e]; ++i) {
            const size_t row = size_t(off[e]) + i;
            const mkcclMoeRowInfo& ri = info[row];
            ASSERT_EQ(e, ri.expert);
            ASSERT_TRUE(ri.srcRank >= 0 && ri.srcRank < ws && ri.token >= 0 && ri.token < p.T);
            const uint16_t* xr = &rd[ri.srcRank].X[size_t(ri.token) * p.H];
            std::vector<double> ref(p.N);
            double scale = 1e-3;
            for (size_t n = 0; n < p.N; ++n) {
              const uint16_t* wr = &W[r][(size_t(e) * p.N + n) * p.H];
              double acc = 0;
              for (size_t h = 0; h < p.H; ++h) acc += double(fromBits(xr[h], false)) * fromBits(wr[h], false);
              ref[n] = acc;
              scale = std::max(scale, fabs(acc));
            }
            for (size_t n = 0; n < p.N; ++n) {
              const float got = fromBits(act[row * p.N + n], false);
              if (!(fabs(got - ref[n]) / scale <= 1e-2) && wrong++ < 5)
                ADD_FAILURE() << "rank " << r << " act[" << row << ", " << n << "] = " << got << ", expected " << ref[n];
            }
            ++rows;
          }
      }
      EXPECT_EQ(0u, wrong);
      EXPECT_GT(rows, 0u);
      for (int r = 0; r < ws; ++r) {
        cudaSetDevice(w.devs[r]);
        cudaFree(dW1[r]);
        cudaFree(dAct[r]);
        rd[r].release();
      }
    }
  }
}

// 50 layers queued back to back on 2 ranks with no host sync, every output against the fp32
// reference (runLayersBackToBack): fused, the first half fused (on the overlapped route these tests
// set, the arrival counters and the layout flag zeroed on the stream before each call); both, the
// second half fused too (its done words are the arrival words the fused dispatch zeroes and
// fills); neither, the four composed calls with the real expert GEMMs.
void runFifty(bool fused, bool both) {
  MoeRanks w(2);
  ASSERT_TRUE(w.ok());
  runLayersBackToBack(w, LayerCase{4, 3, 72, 136, RouteKind::Uniform, [](int r) { return 40 + 17 * r; }}, 50,
                      freshSeed(), fused, both);
}

TEST(MoeGpu, FusedFiftyCallsBackToBack) {
  MKCCL_REQUIRE_GPUS(1);
  runFifty(true, false);
}

TEST(MoeGpu, ComposedFiftyCallsBackToBack) {
  MKCCL_REQUIRE_GPUS(1);
  runFifty(false, false);
}

TEST(MoeGpu, BothHalvesFusedFiftyCallsBackToBack) {
  MKCCL_REQUIRE_GPUS(1);
  runFifty(true, true);
}

// A rank that never joins: the other rank's fused call (dispatch waiting for the peer's entry, the
// GEMM waiting for the layout) ends within the communicator's timeout with mkcclTimeout recorded,
// both kernels finished (the GEMM drained), and the next call refused.
TEST(MoeGpu, FusedPeerNeverJoins) {
  MKCCL_REQUIRE_GPUS(1);
  MoeRanks w(2, 1500);
  ASSERT_TRUE(w.ok());
  Case c{"lonely fused", 2, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 8; }, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(c, 2, 8);
  {
    Handles hs(w, cfg);
    ASSERT_TRUE(hs.ok);
    const Dims d = dimsOf(cfg, 2, 0);
    cudaSetDevice(w.devs[0]);
    mkcclMoeBuffers b{};
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[0], &b));
    RankData x;
    std::mt19937_64 g(3);
    makeInputs(x, RouteKind::Uniform, 8, d, 1, g);
    const size_t N = 64;
    std::vector<uint16_t> W1 = randomHalves(size_t(c.El) * N * c.H, false, g);
    void* dW1 = upload(W1.data(), W1.size() * 2);
    void* dAct = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct, b.maxRecvRows * N * 2));
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(mkcclSuccess, mkcclMoeDispatchGemm(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 8, dW1,
                                                 dAct, N, 0, w.streams[0]))
        << mkcclGetLastError(w.comms[0]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[0])) << "the kernels must exit cleanly";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_NO_FATAL_FAILURE(expectPeerTimeout(w.comms[0], secs, 1.3, 20.0, "MoE dispatch"));
    EXPECT_EQ(mkcclTimeout, mkcclMoeDispatchGemm(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 8, dW1,
                                                 dAct, N, 0, w.streams[0]));
    cudaFree(dW1);
    cudaFree(dAct);
    x.release();
  }
}

// The single-call tests' start: one rank's buffers of handle h (config cfg) and inputs of 8
// uniformly routed tokens (routing seed 1, X drawn from xSeed).
void oneRankInputs(mkcclMoe_t h, const mkcclMoeConfig_t& cfg, uint64_t xSeed, mkcclMoeBuffers* b, RankData* x) {
  ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(h, b));
  std::mt19937_64 g(xSeed);
  makeInputs(*x, RouteKind::Uniform, 8, dimsOf(cfg, 1, b->maxRecvRows), 1, g);
}

// Mistakes refused before anything is queued, with a message; the handle stays usable.
TEST(MoeGpu, DispatchGemmBadArguments) {
  MKCCL_REQUIRE_GPUS(1);
  MoeRanks w(1);
  ASSERT_TRUE(w.ok());
  Case c{"bad fused args", 2, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 8; }, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(c, 1, 8);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  mkcclMoeBuffers b{};
  RankData x;
  ASSERT_NO_FATAL_FAILURE(oneRankInputs(hs.h[0], cfg, 5, &b, &x));
  const size_t I = 64, Ip = 128;
  void *dW1 = nullptr, *dAct = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dW1, size_t(c.El) * 2 * Ip * c.H * 2));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct, b.maxRecvRows * I * 2));
  cudaStream_t s = w.streams[0];
  auto call = [&](const void* W1, void* act, size_t N, int swiglu, size_t T) {
    return mkcclMoeDispatchGemm(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, T, W1, act, N, swiglu, s);
  };
  EXPECT_EQ(mkcclInvalidArgument, call(dW1, dAct, 60, 1, 8)) << "N not a multiple of 8";
  EXPECT_EQ(mkcclInvalidArgument, call(dW1, dAct, 0, 1, 8)) << "N = 0";
  EXPECT_EQ(mkcclInvalidArgument, call(nullptr, dAct, I, 1, 8)) << "W1 NULL";
  EXPECT_EQ(mkcclInvalidArgument, call(dW1, nullptr, I, 1, 8)) << "act NULL";
  EXPECT_EQ(mkcclInvalidArgument, call(dW1, dAct, 4 * I, 1, 8)) << "act too small for N";
  EXPECT_EQ(mkcclInvalidArgument, call(dW1, b.recvX, I, 1, 8)) << "act inside the handle's buffers";
  EXPECT_EQ(mkcclInvalidArgument, call(dW1, dAct, I, 1, 9)) << "T over capacity";
  ASSERT_EQ(mkcclSuccess, call(dW1, dAct, I, 1, 8)) << "the handle stays usable: " << mkcclGetLastError(w.comms[0]);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  expectNoAsyncError(w.comms[0]);
  cudaFree(dW1);
  cudaFree(dAct);
  x.release();
}

// A handle with rowAlign 64 (GEMM tiles would straddle experts) and one limited to a single CTA
// (no room for both grids) are refused by the fused call.
TEST(MoeGpu, DispatchGemmNeedsAlignAndCtas) {
  MKCCL_REQUIRE_GPUS(1);
  MoeRanks w(1);
  ASSERT_TRUE(w.ok());
  for (int variant = 0; variant < 2; ++variant) {
    Case c{"fused limits", 2, 2, 64, RouteKind::Uniform, variant == 0 ? 64 : 0, false, [](int) { return 8; },
           Case::YRandom};
    c.maxCtas = variant == 0 ? 16 : 1;
    const mkcclMoeConfig_t cfg = configOf(c, 1, 8);
    Handles hs(w, cfg);
    ASSERT_TRUE(hs.ok);
    mkcclMoeBuffers b{};
    RankData x;
    ASSERT_NO_FATAL_FAILURE(oneRankInputs(hs.h[0], cfg, 7, &b, &x));
    void *dW1 = nullptr, *dAct = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dW1, size_t(c.El) * 64 * c.H * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct, b.maxRecvRows * 64 * 2));
    const mkcclResult_t e = mkcclMoeDispatchGemm(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 8, dW1,
                                                 dAct, 64, 0, w.streams[0]);
    EXPECT_EQ(variant == 0 ? mkcclInvalidArgument : mkcclInvalidUsage, e) << "variant " << variant;
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(w.comms[0])).find(variant == 0 ? "rowAlign" : "CTA"))
        << mkcclGetLastError(w.comms[0]);
    cudaStreamSynchronize(w.streams[0]);
    cudaFree(dW1);
    cudaFree(dAct);
    x.release();
  }
}

// mkcclMoeGemmCombine with a peer that dispatched with us but never joins the second half: the
// combine waits for its entry and ends within the communicator's timeout with mkcclTimeout
// recorded, the GEMM beside it finishes, and the next call is refused.
TEST(MoeGpu, GemmCombinePeerNeverJoins) {
  MKCCL_REQUIRE_GPUS(1);
  MoeRanks w(2, 1500);
  ASSERT_TRUE(w.ok());
  Case c{"lonely gemm combine", 2, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 8; }, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(c, 2, 8);
  {
    Handles hs(w, cfg);
    ASSERT_TRUE(hs.ok);
    const Dims d = dimsOf(cfg, 2, 0);
    std::vector<RankData> x(2);
    std::vector<mkcclMoeBuffers> b(2);
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(w.devs[r]);
      ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &b[r]));
      std::mt19937_64 g(3 + r);
      makeInputs(x[r], RouteKind::Uniform, 8, d, 1 + r, g);
    }
    std::vector<mkcclResult_t> res(2, mkcclInternalError);
    w.onEveryRank([&](int r) {
      res[r] = mkcclMoeDispatch(hs.h[r], x[r].dX, (const int32_t*)x[r].dIdx, (const float*)x[r].dW, 8, w.streams[r]);
      if (cudaStreamSynchronize(w.streams[r]) != cudaSuccess) res[r] = mkcclUnhandledCudaError;
    });
    for (int r = 0; r < 2; ++r) ASSERT_EQ(mkcclSuccess, res[r]) << "rank " << r;
    cudaSetDevice(w.devs[0]);
    const size_t I = 64;
    std::mt19937_64 g(9);
    std::vector<uint16_t> W2 = randomHalves(size_t(c.El) * c.H * I, false, g);
    void* dW2 = upload(W2.data(), W2.size() * 2);
    void *dAct = nullptr, *dY = nullptr, *dOut = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct, b[0].maxRecvRows * I * 2));
    ASSERT_EQ(cudaSuccess, cudaMemset(dAct, 0, b[0].maxRecvRows * I * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dY, b[0].maxRecvRows * c.H * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dOut, 8 * c.H * 2));
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(mkcclSuccess, mkcclMoeGemmCombine(hs.h[0], dAct, dW2, dY, dOut, I, 8, w.streams[0]))
        << mkcclGetLastError(w.comms[0]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[0])) << "both kernels must exit cleanly";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_NO_FATAL_FAILURE(expectPeerTimeout(w.comms[0], secs, 1.3, 20.0, "MoE combine"));
    EXPECT_EQ(mkcclTimeout, mkcclMoeGemmCombine(hs.h[0], dAct, dW2, dY, dOut, I, 8, w.streams[0]));
    for (void* p : {dW2, dAct, dY, dOut}) cudaFree(p);
    for (RankData& y : x) y.release();
  }
}

// mkcclMoeGemmCombine's mistakes refused before anything is queued, with a message; the handle
// stays usable (a correct call after them succeeds).
TEST(MoeGpu, GemmCombineBadArguments) {
  MKCCL_REQUIRE_GPUS(1);
  MoeRanks w(1);
  ASSERT_TRUE(w.ok());
  Case c{"bad gemm combine args", 2, 2, 64, RouteKind::Uniform, 0, false, [](int) { return 8; }, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(c, 1, 8);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  mkcclMoeBuffers b{};
  RankData x;
  ASSERT_NO_FATAL_FAILURE(oneRankInputs(hs.h[0], cfg, 5, &b, &x));
  const size_t I = 64;
  void *dW2 = nullptr, *dAct = nullptr, *dY = nullptr, *dOut = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dW2, size_t(c.El) * c.H * I * 2));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct, b.maxRecvRows * I * 2));
  ASSERT_EQ(cudaSuccess, cudaMemset(dAct, 0, b.maxRecvRows * I * 2));
  ASSERT_EQ(cudaSuccess, cudaMemset(dW2, 0, size_t(c.El) * c.H * I * 2));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dY, b.maxRecvRows * c.H * 2));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dOut, 8 * c.H * 2));
  cudaStream_t s = w.streams[0];
  auto call = [&](const void* act, const void* W2, void* Y, void* out, size_t I_, size_t T) {
    return mkcclMoeGemmCombine(hs.h[0], act, W2, Y, out, I_, T, s);
  };
  EXPECT_EQ(mkcclInvalidUsage, call(dAct, dW2, dY, dOut, I, 8)) << "before any dispatch";
  ASSERT_EQ(mkcclSuccess, mkcclMoeDispatch(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 8, s));
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dY, dOut, I, 7)) << "T differs from the dispatch's";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dY, dOut, 60, 8)) << "I not a multiple of 8";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dY, dOut, 0, 8)) << "I = 0";
  EXPECT_EQ(mkcclInvalidArgument, call(nullptr, dW2, dY, dOut, I, 8)) << "act NULL";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, nullptr, dY, dOut, I, 8)) << "W2 NULL";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, nullptr, dOut, I, 8)) << "Y NULL";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dY, nullptr, I, 8)) << "out NULL";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dY, dOut, 4 * I, 8)) << "act too small for I";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, (char*)dY + 2, dOut, I, 8)) << "Y not 16-byte aligned";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dOut, dY, I, 8)) << "Y smaller than maxRecvRows rows";
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dY, dY, I, 8)) << "out overlaps Y";
  EXPECT_EQ(mkcclInvalidArgument, call(b.recvX, dW2, dY, dOut, I, 8)) << "act inside the handle's buffers";
  std::vector<uint16_t> host(8 * c.H);
  EXPECT_EQ(mkcclInvalidArgument, call(dAct, dW2, dY, host.data(), I, 8)) << "host out";
  ASSERT_EQ(mkcclSuccess, call(dAct, dW2, dY, dOut, I, 8)) << "the handle stays usable: " << mkcclGetLastError(w.comms[0]);
  ASSERT_EQ(mkcclSuccess, call(dAct, dW2, b.recvX, dOut, I, 8)) << "Y = recvX: " << mkcclGetLastError(w.comms[0]);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  expectNoAsyncError(w.comms[0]);
  // act and W2 are zeros: every routed token's output is 0.
  const std::vector<uint16_t> out = download<uint16_t>(dOut, 8 * c.H);
  size_t nonzero = 0;
  for (uint16_t v : out) nonzero += (v & 0x7fff) != 0;
  EXPECT_EQ(0u, nonzero);
  for (void* p : {dW2, dAct, dY, dOut}) cudaFree(p);
  x.release();
}

}  // namespace
