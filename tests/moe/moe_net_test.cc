// mkcclMoeDispatch / mkcclMoeCombine across emulated nodes (MKCCL_RANKS_PER_NODE; the ranks of
// one process share the GPUs there are, nodes joined by libfabric tcp on loopback: NetWorld,
// tests/fused/net_world.h), against the same host model as one node (moe_gpu_cases.h):
//   - splits 2x1, 2x2, 4x1: uniform / skewed / empty experts / dropped / duplicates / one hot
//     rank; T 0, 1, 3 and ~1000; H 72, 100, 136; bf16 and fp16; k 1 .. 8 and one k = 16 case;
//   - 20 dispatch + compute + combine calls back to back with no host sync;
//   - the composed layer (dispatch, SwiGLU grouped GEMM, grouped GEMM, combine) at 2x2 against fp32;
//   - a network window too small for the routing: the same clear error on every rank, nothing
//     written; a counterpart that never joins: a timeout error, no hang;
//   - the fused calls and graph capture refused across nodes with mkcclInvalidUsage.
// Skips where there is no GPU or no libfabric (NET_WORLD_OR_SKIP).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <chrono>
#include <random>
#include <string>
#include <vector>
#include "moe_gpu_cases.h"
#include "net_world.h"

using namespace mkccl;
using namespace mkccl::moetest;
using mkccl::test::NetWorld;
using mkccl::test::Split;
using mkccl::test::freshSeed;
using mkccl::test::splitName;

namespace {

// Every rank's grid of the dispatch and the combine must fit the one GPU together (4 ranks).
constexpr int kNetCtas = 8;

std::vector<Case> netCases() {
  std::vector<Case> v;
  auto add = [&](Case c) {
    c.maxCtas = kNetCtas;
    v.push_back(c);
  };
  add({"uniform, k 8, H 136, ~1000 tokens", 4, 8, 136, RouteKind::Uniform, 0, false,
       [](int r) { return 1000 - 61 * r; }, Case::YRandom});
  add({"skewed, fp16, H 72, Y = recvX", 4, 4, 72, RouteKind::Skewed, 0, true, [](int) { return 300; },
       Case::YInPlace});
  add({"empty experts, H 72, device compute", 5, 3, 72, RouteKind::EmptyExperts, 0, false, [](int) { return 77; },
       Case::YDevice});
  add({"T 0/1/3, dropped, H 136", 3, 5, 136, RouteKind::Dropped, 16, false,
       [](int r) { return r % 3 == 0 ? 0 : r % 3 == 1 ? 1 : 3; }, Case::YRandom, 4});
  add({"k 16, duplicates, fp16, H 136", 4, 16, 136, RouteKind::Duplicates, 32, true, [](int r) { return 50 + r; },
       Case::YRandom});
  add({"one hot rank, H 100 (unaligned rows)", 4, 4, 100, RouteKind::OneRank, 0, false, [](int) { return 100; },
       Case::YRandom});
  add({"k 1, H 72, fp16", 2, 1, 72, RouteKind::Uniform, 0, true, [](int r) { return 3 + 7 * r; }, Case::YDevice});
  add({"T 0 everywhere", 2, 2, 72, RouteKind::Uniform, 0, false, [](int) { return 0; }, Case::YRandom, 8});
  return v;
}

class MoeNet : public testing::TestWithParam<Split> {};

TEST_P(MoeNet, DispatchAndCombine) {
  NET_WORLD_OR_SKIP(w, GetParam());
  uint64_t seed = test::seedOf();
  for (const Case& c : netCases()) {
    runCase(w, c, ++seed);
    if (HasFatalFailure()) return;
  }
}

// 20 calls per rank queued without a host sync: dispatch, the experts' compute on the device,
// combine into a fresh output; T and the routing change every call (0 included).
TEST_P(MoeNet, TwentyCallsBackToBack) {
  NET_WORLD_OR_SKIP(w, GetParam());
  Case c{"back to back", 4, 4, 136, RouteKind::Uniform, 0, false, nullptr, Case::YDevice};
  c.maxCtas = kNetCtas;
  runBackToBack(w, c, 20, 160, test::seedOf());
}

INSTANTIATE_TEST_SUITE_P(Splits, MoeNet, MKCCL_NET_SPLITS);

// The whole layer composed across 2 nodes of 2 ranks against the fp32 reference.
TEST(MoeNetLayer, ComposedAt2x2) {
  NET_WORLD_OR_SKIP(w, (Split{2, 2}));
  uint64_t seed = test::seedOf();
  const std::vector<LayerCase> cs = {
      {4, 8, 136, 128, RouteKind::Uniform, [](int r) { return 200 + 37 * r; }},
      {4, 4, 72, 200, RouteKind::Skewed, [](int r) { return r == 1 ? 0 : 96; }},
      {2, 2, 136, 72, RouteKind::Dropped, [](int r) { return r % 2 ? 1 : 3; }},
      {3, 3, 72, 136, RouteKind::EmptyExperts, [](int) { return 150; }},
  };
  for (const LayerCase& c : cs) {
    runLayer(w, c, ++seed);
    if (testing::Test::HasFatalFailure()) return;
  }
}

// A routing whose rows do not fit the network window (2 MiB, the smallest): every rank's dispatch
// ends with the same error naming MKCCL_NET_BUFFER_BYTES, before any row is sent: nothing is
// written to recvX / rowInfo (still poisoned).
TEST(MoeNetErrors, WindowTooSmallIsAnErrorOnEveryRank) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}), 2 << 20, 10000);
  const int ws = w.size();
  // 512 tokens of 14 KiB rows, each to the other node's experts: ~7 MiB of entries.
  Case c{"window", 4, 8, 7168, RouteKind::OneRank, 0, false, [](int) { return 512; }, Case::YRandom};
  c.maxCtas = kNetCtas;
  const mkcclMoeConfig_t cfg = configOf(c, ws, 512);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  std::vector<RankData> rd(ws);
  std::mt19937_64 g(11);
  Dims d;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &rd[r].buf));
    d = dimsOf(cfg, ws, rd[r].buf.maxRecvRows);
  }
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    // OneRank sends every slot to the last rank's experts; rank 0's go across the network, and
    // the last rank's own are local: the window is needed by both (one receives, one sends).
    makeInputs(rd[r], RouteKind::OneRank, 512, d, g(), g);
    test::poison(rd[r].buf.rowInfo, rd[r].buf.maxRecvRows * sizeof(mkcclMoeRowInfo), w.streams[r]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  }
  std::vector<mkcclResult_t> res(ws, mkcclInternalError);
  std::vector<cudaError_t> sync(ws, cudaErrorUnknown);
  w.onEveryRank([&](int r) {
    res[r] = mkcclMoeDispatch(hs.h[r], rd[r].dX, (const int32_t*)rd[r].dIdx, (const float*)rd[r].dW, 512,
                              w.streams[r]);
    sync[r] = cudaStreamSynchronize(w.streams[r]);
  });
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);  // the rank's buffers are mapped for its own device only
    EXPECT_EQ(mkcclSuccess, res[r]) << "enqueued; the error is the call's asynchronous one";
    EXPECT_EQ(cudaSuccess, sync[r]) << "rank " << r << ": the kernel must exit cleanly";
    mkcclResult_t async = mkcclSuccess;
    EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(w.comms[r], &async));
    EXPECT_EQ(mkcclInvalidUsage, async) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    const std::string msg = mkcclGetLastError(w.comms[r]);
    EXPECT_NE(std::string::npos, msg.find("MKCCL_NET_BUFFER_BYTES")) << "rank " << r << ": " << msg;
    const std::vector<mkcclMoeRowInfo> info = download<mkcclMoeRowInfo>(rd[r].buf.rowInfo, rd[r].buf.maxRecvRows);
    const unsigned char* p = reinterpret_cast<const unsigned char*>(info.data());
    size_t touched = 0;
    for (size_t i = 0; i < info.size() * sizeof(mkcclMoeRowInfo); ++i) touched += p[i] != 0xff;
    EXPECT_EQ(0u, touched) << "rank " << r << ": rowInfo written although the call stopped";
    std::printf("rank %d: %s\n", r, msg.c_str());
  }
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    rd[r].release();
  }
}

// Rank 1 (the other node) never calls dispatch: rank 0's waits (rank 1's ready, its counts) end
// in a timeout error within the timeout, and its kernel leaves.
TEST(MoeNetErrors, CounterpartNeverJoins) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}), 0, 3000);
  Case c{"lonely", 2, 2, 72, RouteKind::Uniform, 0, false, [](int) { return 8; }, Case::YRandom};
  c.maxCtas = kNetCtas;
  const mkcclMoeConfig_t cfg = configOf(c, 2, 8);
  {
    Handles hs(w, cfg);
    ASSERT_TRUE(hs.ok);
    const Dims d = dimsOf(cfg, 2, 0);
    cudaSetDevice(w.devs[0]);
    RankData x;
    std::mt19937_64 g(3);
    makeInputs(x, RouteKind::Uniform, 8, d, 1, g);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(mkcclSuccess,
              mkcclMoeDispatch(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 8, w.streams[0]));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[0])) << "the kernel must exit cleanly";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 60.0);
    mkcclResult_t async = mkcclSuccess;
    ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(w.comms[0], &async));
    EXPECT_EQ(mkcclTimeout, async) << mkcclGetLastError(w.comms[0]);
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(w.comms[0])).find("MoE dispatch"))
        << mkcclGetLastError(w.comms[0]);
    std::printf("absent counterpart: error after %.1f s: %s\n", secs, mkcclGetLastError(w.comms[0]));
    x.release();
  }  // the handles go (rank 0's without waiting: its communicator has an error)
  mkcclCommAbort(w.comms[0]);
  const mkcclResult_t d = mkcclCommDestroy(w.comms[1]);  // its peer is gone: whatever it says, no hang
  std::printf("rank 1 destroyed: %s\n", mkcclGetErrorString(d));
  w.comms.clear();
}

// Not across nodes yet: the fused halves, and capturing a call into a CUDA graph. Refused with
// mkcclInvalidUsage and a message before anything is enqueued; the handle stays usable.
TEST(MoeNetErrors, FusedCallsAndCaptureAreRefused) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}));
  const int ws = w.size();
  Case c{"refused", 2, 2, 128, RouteKind::Uniform, 0, false, [](int) { return 16; }, Case::YRandom};
  c.maxCtas = kNetCtas;
  const mkcclMoeConfig_t cfg = configOf(c, ws, 16);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  std::vector<RankData> rd(ws);
  std::mt19937_64 g(5);
  Dims d;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &rd[r].buf));
    d = dimsOf(cfg, ws, rd[r].buf.maxRecvRows);
    makeInputs(rd[r], RouteKind::Uniform, 16, d, g(), g);
    ASSERT_EQ(cudaSuccess, cudaMalloc(&rd[r].dOut, 16 * 128 * 2));
  }
  std::vector<mkcclResult_t> fusedD(ws), dispatch(ws), fusedC(ws), captured(ws), combine(ws);
  std::vector<std::string> msgD(ws), msgC(ws), msgG(ws);
  w.onEveryRank([&](int r) {
    RankData& x = rd[r];
    cudaStream_t st = w.streams[r];
    fusedD[r] = mkcclMoeDispatchGemm(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 16, nullptr, nullptr,
                                     128, 1, st);
    msgD[r] = mkcclGetLastError(w.comms[r]);
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      captured[r] = mkcclMoeDispatch(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 16, st);
      msgG[r] = mkcclGetLastError(w.comms[r]);
      cudaStreamEndCapture(st, &graph);
      if (graph) cudaGraphDestroy(graph);
    }
    dispatch[r] = mkcclMoeDispatch(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, 16, st);
    fusedC[r] = mkcclMoeGemmCombine(hs.h[r], x.buf.recvX, x.buf.recvX, x.buf.recvX, x.dOut, 128, 16, st);
    msgC[r] = mkcclGetLastError(w.comms[r]);
    combine[r] = mkcclMoeCombine(hs.h[r], x.buf.recvX, x.dOut, 16, st);
    cudaStreamSynchronize(st);
  });
  for (int r = 0; r < ws; ++r) {
    EXPECT_EQ(mkcclInvalidUsage, fusedD[r]) << msgD[r];
    EXPECT_NE(std::string::npos, msgD[r].find("across nodes")) << msgD[r];
    EXPECT_EQ(mkcclInvalidUsage, captured[r]) << msgG[r];
    EXPECT_NE(std::string::npos, msgG[r].find("CUDA graph")) << msgG[r];
    EXPECT_EQ(mkcclSuccess, dispatch[r]) << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(mkcclInvalidUsage, fusedC[r]) << msgC[r];
    EXPECT_NE(std::string::npos, msgC[r].find("across nodes")) << msgC[r];
    EXPECT_EQ(mkcclSuccess, combine[r]) << mkcclGetLastError(w.comms[r]);
    expectNoAsyncError(w.comms[r]);
  }
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    rd[r].release();
  }
}

}  // namespace
