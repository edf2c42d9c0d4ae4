// mkcclMoeDispatch / mkcclMoeCombine across emulated nodes (MKCCL_RANKS_PER_NODE; the ranks of
// one process share the GPUs there are, nodes joined by libfabric tcp on loopback: NetWorld,
// tests/fused/net_world.h), against the same host model as one node (moe_gpu_cases.h):
//   - splits 2x1, 2x2, 4x1: uniform / skewed / empty experts / dropped / duplicates / one hot
//     rank; T 0, 1, 3 and ~1000; H 72, 100, 136; bf16 and fp16; k 1 .. 8 and one k = 16 case;
//   - 20 dispatch + compute + combine calls back to back with no host sync;
//   - the composed layer (dispatch, SwiGLU grouped GEMM, grouped GEMM, combine) at 2x2 against fp32;
//   - the fused calls (mkcclMoeDispatchGemm, mkcclMoeGemmCombine) on their sequential route, the
//     only one across nodes, at every split: SwiGLU (W1 blocked and gate-up) and plain first
//     GEMMs, bf16 and fp16, the first half or both fused, against the composed calls and fp32;
//     12 layers back to back per first GEMM;
//   - a network window too small for the routing: the same clear error on every rank, nothing
//     written; a counterpart that never joins: a timeout error, no hang;
//   - refused with mkcclInvalidUsage and a message: the fused calls' overlapped route forced
//     across nodes, and graph capture of any MoE call across nodes.
// Skips where there is no GPU or no libfabric (NET_WORLD_OR_SKIP).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <cstdio>
#include <functional>
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

// The fused calls' cases: SwiGLU with W1 blocked and gate-up, plain; bf16 and fp16; T 0, 1, 3 and
// larger; H and I not multiples of 128; uniform, skewed, dropped and empty-expert routings.
std::vector<LayerCase> fusedCases() {
  return {
      {4, 4, 136, 200, RouteKind::Uniform, [](int r) { return 150 + 29 * r; }},
      {3, 2, 264, 128, RouteKind::Skewed, [](int r) { return r == 0 ? 0 : r == 1 ? 1 : 3 + 40 * r; }},
      {4, 2, 136, 200, RouteKind::Dropped, [](int r) { return 70 + 13 * r; }, true},
      {4, 3, 200, 72, RouteKind::Uniform, [](int r) { return 90 + 21 * r; }, false, true},
      {4, 3, 136, 264, RouteKind::Uniform, [](int r) { return 120 + 23 * r; }, false, false, true},
      {3, 2, 72, 136, RouteKind::EmptyExperts, [](int r) { return 60 + r; }, true, false, true},
  };
}

// The fused calls across nodes on their default route (auto: sequential, the dispatch over the
// network then the grouped GEMM, the GEMM then the combine over the network): each case's layer
// composed, then with the first half fused, or both; recvX, act and Y poisoned before the fused
// calls; against the composed output and the fp32 reference (runLayer).
TEST_P(MoeNet, FusedLayers) {
  NET_WORLD_OR_SKIP(w, GetParam());
  uint64_t seed = test::seedOf();
  for (const LayerCase& c : fusedCases())
    for (bool both : {false, true}) {
      runLayer(w, c, ++seed, true, both);
      if (HasFatalFailure()) return;
    }
}

// 12 layers per first GEMM (SwiGLU blocked, SwiGLU gate-up in fp16, plain) queued back to back
// with no host sync, both halves fused (the first after mkcclMoeDispatchGemm on even calls, after
// the composed first half on odd ones), fresh X and routing per call, every output against fp32
// (runLayersBackToBack). The gate-up run forces moe.fused_route=sequential; the others take auto.
TEST_P(MoeNet, FusedLayersBackToBack) {
  NET_WORLD_OR_SKIP(w, GetParam());
  uint64_t seed = test::seedOf();
  for (int mode = 0; mode < 3; ++mode) {
    LayerCase c{4, 3, 72, 136, RouteKind::Uniform, [](int r) { return 40 + 17 * r; }};
    c.fp16 = c.gateUp = mode == 1;
    c.plain = mode == 2;
    const char* tuning = mode == 1 ? "moe.fused_route=sequential" : "";
    for (int r = 0; r < w.size(); ++r) ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning)) << tuning;
    runLayersBackToBack(w, c, 12, ++seed, true, true);
    if (HasFatalFailure()) return;
  }
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
// in a timeout error within the timeout (3 s), and its kernel leaves (runAbsentPeer).
TEST(MoeNetErrors, CounterpartNeverJoins) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}), 0, 3000);
  Case c{"lonely", 2, 2, 72, RouteKind::Uniform, 0, false, [](int) { return 8; }, Case::YRandom};
  c.maxCtas = kNetCtas;
  runAbsentPeer(w, c, 0.0, 60.0);
  // The handles are gone (rank 0's without waiting: its communicator has an error).
  mkcclCommAbort(w.comms[0]);
  const mkcclResult_t d = mkcclCommDestroy(w.comms[1]);  // its peer is gone: whatever it says, no hang
  std::printf("rank 1 destroyed: %s\n", mkcclGetErrorString(d));
  w.comms.clear();
}

// Across nodes the fused calls run on the sequential route only: moe.fused_route=overlap set on
// every rank is refused by both fused calls with mkcclInvalidUsage naming moe.fused_route=
// sequential / auto, before the call is enqueued. Capturing a MoE call into a CUDA graph across
// nodes (the fused ones included) is refused too. The handle stays usable: with the tuning
// cleared, the fused second half ends the layer of the plain dispatch made between the refusals,
// and a whole fused layer follows.
TEST(MoeNetErrors, FusedOverlapRouteAndCaptureAreRefused) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}));
  const int ws = w.size();
  const size_t T = 16, H = 128, N = 128;
  Case c{"refused", 2, 2, H, RouteKind::Uniform, 0, false, [](int) { return 16; }, Case::YRandom};
  c.maxCtas = kNetCtas;
  const mkcclMoeConfig_t cfg = configOf(c, ws, T);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  std::vector<RankData> rd(ws);
  std::vector<void*> dW1(ws), dW2(ws), dAct(ws);
  std::mt19937_64 g(5);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    RankData& x = rd[r];
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.buf));
    makeInputs(x, RouteKind::Uniform, T, dimsOf(cfg, ws, x.buf.maxRecvRows), g(), g);
    // Plain first GEMM: W1 [El][N][H]; W2 [El][H][N]. Values do not matter here.
    const std::vector<uint16_t> wt = randomHalves(size_t(c.El) * N * H, false, g);
    dW1[r] = upload(wt.data(), wt.size() * 2);
    dW2[r] = upload(wt.data(), wt.size() * 2);
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct[r], x.buf.maxRecvRows * N * 2));
    ASSERT_EQ(cudaSuccess, cudaMemset(dAct[r], 0, x.buf.maxRecvRows * N * 2));  // read by the first combine
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dY, x.buf.maxRecvRows * H * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dOut, T * H * 2));
    ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], "moe.fused_route=overlap"));
  }
  enum { kOverlapD, kOverlapC, kCaptureD, kCaptureC, kCaptureP, kCalls };
  const char* names[kCalls] = {"overlap mkcclMoeDispatchGemm", "overlap mkcclMoeGemmCombine",
                               "captured mkcclMoeDispatchGemm", "captured mkcclMoeGemmCombine",
                               "captured mkcclMoeDispatch"};
  std::vector<std::vector<mkcclResult_t>> refused(ws, std::vector<mkcclResult_t>(kCalls, mkcclSuccess));
  std::vector<std::vector<std::string>> msg(ws, std::vector<std::string>(kCalls));
  std::vector<std::string> err(ws);  // the calls expected to succeed
  w.onEveryRank([&](int r) {
    RankData& x = rd[r];
    cudaStream_t st = w.streams[r];
    auto dispatchGemm = [&] {
      return mkcclMoeDispatchGemm(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, T, dW1[r], dAct[r], N,
                                  MKCCL_MOE_GEMM_PLAIN, st);
    };
    auto gemmCombine = [&] { return mkcclMoeGemmCombine(hs.h[r], dAct[r], dW2[r], x.dY, x.dOut, N, T, st); };
    auto dispatch = [&] { return mkcclMoeDispatch(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, T, st); };
    auto expectOk = [&](const char* what, mkcclResult_t e) {
      if (e != mkcclSuccess && err[r].empty()) err[r] = std::string(what) + ": " + mkcclGetLastError(w.comms[r]);
    };
    auto record = [&](int i, mkcclResult_t e) {
      refused[r][i] = e;
      msg[r][i] = mkcclGetLastError(w.comms[r]);
    };
    auto captured = [&](int i, const std::function<mkcclResult_t()>& call) {
      cudaGraph_t graph = nullptr;
      if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        if (err[r].empty()) err[r] = std::string("begin capture for ") + names[i];
        return;
      }
      record(i, call());
      cudaStreamEndCapture(st, &graph);
      if (graph) cudaGraphDestroy(graph);
    };
    record(kOverlapD, dispatchGemm());
    expectOk("dispatch", dispatch());  // the plain dispatch takes no route: it runs
    record(kOverlapC, gemmCombine());  // (after a dispatch: the combine's own check passes)
    expectOk("clear the tuning", mkcclSetTuning(w.comms[r], ""));
    captured(kCaptureD, dispatchGemm);
    captured(kCaptureC, gemmCombine);
    captured(kCaptureP, dispatch);
    // Still usable, on the default route, eagerly: the second half of the dispatch's layer, then a
    // whole fused layer.
    expectOk("mkcclMoeGemmCombine", gemmCombine());
    expectOk("mkcclMoeDispatchGemm", dispatchGemm());
    expectOk("mkcclMoeGemmCombine after mkcclMoeDispatchGemm", gemmCombine());
    if (cudaStreamSynchronize(st) != cudaSuccess && err[r].empty()) err[r] = "stream";
  });
  for (int r = 0; r < ws; ++r) {
    SCOPED_TRACE(testing::Message() << "rank " << r);
    EXPECT_EQ("", err[r]);
    for (int i = 0; i < kCalls; ++i) {
      EXPECT_EQ(mkcclInvalidUsage, refused[r][i]) << names[i] << ": " << msg[r][i];
      const bool overlap = i == kOverlapD || i == kOverlapC;
      for (const char* want : overlap ? std::vector<const char*>{"moe.fused_route=sequential", "auto", "nodes"}
                                      : std::vector<const char*>{"CUDA graph", "across nodes"})
        EXPECT_NE(std::string::npos, msg[r][i].find(want)) << names[i] << ": " << msg[r][i];
    }
    EXPECT_NE(std::string::npos, msg[r][kCaptureD].find("mkcclMoeDispatchGemm")) << msg[r][kCaptureD];
    EXPECT_NE(std::string::npos, msg[r][kCaptureC].find("mkcclMoeGemmCombine")) << msg[r][kCaptureC];
    expectNoAsyncError(w.comms[r]);
  }
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    for (void* p : {dW1[r], dW2[r], dAct[r]}) cudaFree(p);
    rd[r].release();
  }
}

}  // namespace
