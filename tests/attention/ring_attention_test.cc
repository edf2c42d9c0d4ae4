// mkcclRingAttention against the fp32 reference over the whole sequence: 1 to 4 ranks in one
// process sharing the GPUs there are (MKCCL_SHARE_GPUS, tests/common/rank_threads.h), contiguous
// and zigzag layouts, causal or not, GQA, odd per-rank lengths, calls back to back with changing
// shapes, and arguments the API refuses.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <chrono>
#include <memory>
#include <string>
#include <vector>
#include "attn_ref.h"
#include "kernels/attention/attn_layout.h"
#include "rank_threads.h"
#include "test_util.h"

using namespace mkccl::test;
namespace attn = mkccl::attn;

namespace {

struct RingCase {
  int B, sLocal, hq, hkv, d, causal;
  mkcclAttnLayout_t layout;
  mkcclDataType_t t;
};

std::string name(const RingCase& c, int ws) {
  return std::to_string(ws) + " ranks, B " + std::to_string(c.B) + " S/rank " + std::to_string(c.sLocal) + " h " +
         std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " d " + std::to_string(c.d) +
         (c.causal ? " causal" : "") + (c.layout == mkcclAttnZigzag ? " zigzag" : " contiguous") +
         (c.t == mkcclBfloat16 ? " bf16" : " fp16");
}

struct Buf {
  void* p = nullptr;
  int dev = 0;
  Buf(int device, size_t bytes) : dev(device) {
    cudaSetDevice(dev);
    EXPECT_EQ(cudaSuccess, cudaMalloc(&p, bytes));
  }
  ~Buf() {
    cudaSetDevice(dev);
    cudaFree(p);
  }
};

// Devices for ws ranks over the GPUs present (round robin: ranks share GPUs when there are fewer).
std::vector<int> devicesFor(int ws) {
  std::vector<int> d(ws);
  for (int r = 0; r < ws; ++r) d[r] = r % gpuCount();
  return d;
}

// The whole sequence on device 0, each rank's shard cut from it, every rank's call at once, each
// rank's O and LSE compared with the reference at its positions. `calls` > 1: that many calls back
// to back (fresh inputs each time, the last one checked... every one checked through its own O).
void runRing(InProcessRanks& ranks, const RingCase& c, int calls = 1) {
  const int ws = ranks.size();
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << name(c, ws) << ", seed " << seed);
  const int S = c.sLocal * ws;
  const size_t rowQ = static_cast<size_t>(c.hq) * c.d * 2, rowKv = static_cast<size_t>(c.hkv) * c.d * 2;
  const size_t qN = static_cast<size_t>(c.B) * S * c.hq * c.d, kvN = static_cast<size_t>(c.B) * S * c.hkv * c.d;
  const float scale = 1.0f / sqrtf(static_cast<float>(c.d));
  for (int call = 0; call < calls; ++call) {
    Buf Qg(0, qN * 2), Kg(0, kvN * 2), Vg(0, kvN * 2), refO(0, qN * 4), refL(0, static_cast<size_t>(c.B) * c.hq * S * 4);
    cudaSetDevice(0);
    fillRandom(Qg.p, qN, c.t, seed + 10 * call, 1.0f);
    fillRandom(Kg.p, kvN, c.t, seed + 10 * call + 1, 1.0f);
    fillRandom(Vg.p, kvN, c.t, seed + 10 * call + 2, 1.0f);
    refAttention(Qg.p, Kg.p, Vg.p, static_cast<float*>(refO.p), static_cast<float*>(refL.p), c.B, S, S, c.hq, c.hkv,
                 c.d, scale, c.causal, 0, c.t);
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    std::vector<float> ro(qN), rl(static_cast<size_t>(c.B) * c.hq * S);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(ro.data(), refO.p, qN * 4, cudaMemcpyDeviceToHost));
    ASSERT_EQ(cudaSuccess, cudaMemcpy(rl.data(), refL.p, rl.size() * 4, cudaMemcpyDeviceToHost));

    const size_t lq = static_cast<size_t>(c.B) * c.sLocal * c.hq * c.d, lkv = static_cast<size_t>(c.B) * c.sLocal * c.hkv * c.d;
    const size_t ll = static_cast<size_t>(c.B) * c.hq * c.sLocal;
    std::vector<std::unique_ptr<Buf>> Q, K, V, O, L;
    for (int r = 0; r < ws; ++r) {
      const int dev = ranks.devs[r];
      Q.emplace_back(new Buf(dev, lq * 2));
      K.emplace_back(new Buf(dev, lkv * 2));
      V.emplace_back(new Buf(dev, lkv * 2));
      O.emplace_back(new Buf(dev, lq * 2));
      L.emplace_back(new Buf(dev, ll * 4));
      poison(O[r]->p, lq * 2);
      poison(L[r]->p, ll * 4);
      const attn::SegList segs = attn::ringSegs(c.layout, r, ws, c.sLocal);
      for (int b = 0; b < c.B; ++b)
        for (int i = 0; i < segs.n; ++i) {
          const attn::Seg& sg = segs.s[i];
          const size_t src = static_cast<size_t>(b) * S + sg.pos0, dst = static_cast<size_t>(b) * c.sLocal + sg.row0;
          ASSERT_EQ(cudaSuccess, cudaMemcpy(static_cast<char*>(Q[r]->p) + dst * rowQ,
                                            static_cast<char*>(Qg.p) + src * rowQ, sg.len * rowQ, cudaMemcpyDefault));
          ASSERT_EQ(cudaSuccess, cudaMemcpy(static_cast<char*>(K[r]->p) + dst * rowKv,
                                            static_cast<char*>(Kg.p) + src * rowKv, sg.len * rowKv, cudaMemcpyDefault));
          ASSERT_EQ(cudaSuccess, cudaMemcpy(static_cast<char*>(V[r]->p) + dst * rowKv,
                                            static_cast<char*>(Vg.p) + src * rowKv, sg.len * rowKv, cudaMemcpyDefault));
        }
    }
    for (int r = 0; r < ws; ++r) {
      cudaSetDevice(ranks.devs[r]);
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    }
    std::vector<mkcclResult_t> res(ws, mkcclSuccess);
    ranks.onEveryRank([&](int r) {
      res[r] = mkcclRingAttention(Q[r]->p, K[r]->p, V[r]->p, O[r]->p, static_cast<float*>(L[r]->p), c.B, c.sLocal,
                                  c.hq, c.hkv, c.d, scale, c.causal, c.layout, c.t, ranks.comms[r], ranks.streams[r]);
      if (res[r] == mkcclSuccess && cudaStreamSynchronize(ranks.streams[r]) != cudaSuccess) res[r] = mkcclUnhandledCudaError;
    });
    for (int r = 0; r < ws; ++r) {
      ASSERT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(ranks.comms[r]);
      mkcclResult_t async = mkcclSuccess;
      EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(ranks.comms[r], &async));
      ASSERT_EQ(mkcclSuccess, async) << "rank " << r << ": " << mkcclGetLastError(ranks.comms[r]);
    }
    // Each rank's rows against the reference rows at their positions.
    for (int r = 0; r < ws; ++r) {
      cudaSetDevice(ranks.devs[r]);
      const std::vector<double> got = toHostDouble(O[r]->p, lq, c.t);
      std::vector<float> gotL(ll), wantO(lq), wantL(ll);
      ASSERT_EQ(cudaSuccess, cudaMemcpy(gotL.data(), L[r]->p, ll * 4, cudaMemcpyDeviceToHost));
      const attn::SegList segs = attn::ringSegs(c.layout, r, ws, c.sLocal);
      const size_t rowE = static_cast<size_t>(c.hq) * c.d;
      for (int b = 0; b < c.B; ++b)
        for (int i = 0; i < segs.n; ++i)
          for (int k = 0; k < segs.s[i].len; ++k) {
            const size_t pos = static_cast<size_t>(segs.s[i].pos0) + k, row = static_cast<size_t>(segs.s[i].row0) + k;
            for (size_t e = 0; e < rowE; ++e)
              wantO[(b * static_cast<size_t>(c.sLocal) + row) * rowE + e] = ro[(b * static_cast<size_t>(S) + pos) * rowE + e];
            for (int h = 0; h < c.hq; ++h)
              wantL[(static_cast<size_t>(b) * c.hq + h) * c.sLocal + row] = rl[(static_cast<size_t>(b) * c.hq + h) * S + pos];
          }
      const AttnErr e = compareAttention(got, wantO, gotL, wantL, 2e-2, 2e-3);
      EXPECT_EQ(0u, e.oWrong) << "rank " << r << " call " << call << ": " << e.first << " (max rel err " << e.oRel << ")";
      EXPECT_EQ(0u, e.lseWrong) << "rank " << r << " call " << call << ": " << e.first;
      if (r == 0 && call == 0) printf("  %-66s max rel err %.2e, LSE %.2e\n", name(c, ws).c_str(), e.oRel, e.lseAbs);
    }
  }
}

class RingAttention : public ::testing::TestWithParam<int> {};

TEST_P(RingAttention, LayoutsMasksShapes) {
  MKCCL_REQUIRE_GPUS(1);
  const int ws = GetParam();
  std::unique_ptr<SharedGpus> share;
  if (ws > gpuCount()) share.reset(new SharedGpus());
  // A quarter of the SMs per rank at most when 3 or 4 share one GPU (SharedGpus gives a little
  // under half): every rank's persistent kernel must be resident at once.
  std::string maxCtas;
  if (ws > 2 * gpuCount()) {
    cudaDeviceProp prop;
    ASSERT_EQ(cudaSuccess, cudaGetDeviceProperties(&prop, 0));
    setenv("MKCCL_MAX_CTAS", std::to_string(prop.multiProcessorCount / ((ws + gpuCount() - 1) / gpuCount()) - 4).c_str(), 1);
  }
  InProcessRanks ranks(devicesFor(ws));
  ASSERT_TRUE(ranks.ok());
  for (mkcclAttnLayout_t layout : {mkcclAttnContiguous, mkcclAttnZigzag})
    for (int causal : {1, 0}) runRing(ranks, RingCase{1, 512, 8, 2, 128, causal, layout, mkcclBfloat16});
  runRing(ranks, RingCase{2, 258, 4, 1, 64, 1, mkcclAttnZigzag, mkcclFloat16});  // chunks of 129 rows
  runRing(ranks, RingCase{1, 129, 4, 4, 128, 1, mkcclAttnContiguous, mkcclBfloat16});
  runRing(ranks, RingCase{1, 300, 8, 1, 128, 0, mkcclAttnContiguous, mkcclBfloat16});
  // Back to back: the same shape three times, then a larger one (the scratch grows) and a smaller one.
  runRing(ranks, RingCase{1, 256, 4, 2, 128, 1, mkcclAttnZigzag, mkcclBfloat16}, 3);
  runRing(ranks, RingCase{1, 1024, 4, 1, 128, 1, mkcclAttnZigzag, mkcclBfloat16});
  runRing(ranks, RingCase{1, 130, 4, 2, 64, 0, mkcclAttnZigzag, mkcclBfloat16});
  if (ws > 2 * gpuCount()) unsetenv("MKCCL_MAX_CTAS");
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingAttention, ::testing::Values(1, 2, 3, 4),
                         [](const testing::TestParamInfo<int>& i) { return std::to_string(i.param); });

// Calls queued back to back on every rank's stream without a host sync between them.
TEST(RingAttentionQueue, BackToBackWithoutSync) {
  MKCCL_REQUIRE_GPUS(1);
  const int ws = 2;
  std::unique_ptr<SharedGpus> share;
  if (ws > gpuCount()) share.reset(new SharedGpus());
  InProcessRanks ranks(devicesFor(ws));
  ASSERT_TRUE(ranks.ok());
  const RingCase c{1, 256, 4, 2, 128, 1, mkcclAttnZigzag, mkcclBfloat16};
  const size_t lq = static_cast<size_t>(c.sLocal) * c.hq * c.d, lkv = static_cast<size_t>(c.sLocal) * c.hkv * c.d;
  const int calls = 10;
  std::vector<std::unique_ptr<Buf>> Q, K, V, O;
  for (int r = 0; r < ws; ++r) {
    Q.emplace_back(new Buf(ranks.devs[r], lq * 2));
    K.emplace_back(new Buf(ranks.devs[r], lkv * 2));
    V.emplace_back(new Buf(ranks.devs[r], lkv * 2));
    O.emplace_back(new Buf(ranks.devs[r], lq * 2 * calls));
    fillRandom(Q[r]->p, lq, c.t, 11 + r);
    fillRandom(K[r]->p, lkv, c.t, 21 + r);
    fillRandom(V[r]->p, lkv, c.t, 31 + r);
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  }
  std::vector<mkcclResult_t> res(ws, mkcclSuccess);
  ranks.onEveryRank([&](int r) {
    for (int i = 0; i < calls && res[r] == mkcclSuccess; ++i)
      res[r] = mkcclRingAttention(Q[r]->p, K[r]->p, V[r]->p, static_cast<char*>(O[r]->p) + i * lq * 2, nullptr, c.B,
                                  c.sLocal, c.hq, c.hkv, c.d, 0.088f, c.causal, c.layout, c.t, ranks.comms[r],
                                  ranks.streams[r]);
    if (cudaStreamSynchronize(ranks.streams[r]) != cudaSuccess) res[r] = mkcclUnhandledCudaError;
  });
  for (int r = 0; r < ws; ++r) {
    ASSERT_EQ(mkcclSuccess, res[r]) << mkcclGetLastError(ranks.comms[r]);
    // Same inputs every call: every call's output is the first one's, bit for bit.
    cudaSetDevice(ranks.devs[r]);
    std::vector<uint16_t> all(lq * calls);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(all.data(), O[r]->p, lq * 2 * calls, cudaMemcpyDeviceToHost));
    for (int i = 1; i < calls; ++i)
      for (size_t e = 0; e < lq; ++e)
        ASSERT_EQ(all[e], all[i * lq + e]) << "rank " << r << " call " << i << " element " << e;
  }
}

// A rank that never makes the call: the others' waits end at the communicator's timeout with
// mkcclTimeout recorded, and their kernels finish (no hang).
TEST(RingAttentionFailure, APeerThatNeverCalls) {
  MKCCL_REQUIRE_GPUS(1);
  setenv("MKCCL_TIMEOUT_MS", "3000", 1);
  std::unique_ptr<SharedGpus> share;
  if (2 > gpuCount()) share.reset(new SharedGpus());
  {
    InProcessRanks ranks(devicesFor(2));
    unsetenv("MKCCL_TIMEOUT_MS");
    ASSERT_TRUE(ranks.ok());
    const size_t qN = 256 * 4 * 128, kvN = 256 * 2 * 128;
    std::vector<std::unique_ptr<Buf>> q, k, v, o;
    for (int r = 0; r < 2; ++r) {
      q.emplace_back(new Buf(ranks.devs[r], qN * 2));
      k.emplace_back(new Buf(ranks.devs[r], kvN * 2));
      v.emplace_back(new Buf(ranks.devs[r], kvN * 2));
      o.emplace_back(new Buf(ranks.devs[r], qN * 2));
      fillRandom(q[r]->p, qN, mkcclBfloat16, 1 + r);
      fillRandom(k[r]->p, kvN, mkcclBfloat16, 3 + r);
      fillRandom(v[r]->p, kvN, mkcclBfloat16, 5 + r);
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    }
    auto call = [&](int r) {
      return mkcclRingAttention(q[r]->p, k[r]->p, v[r]->p, o[r]->p, nullptr, 1, 256, 4, 2, 128, 0.088f, 1,
                                mkcclAttnZigzag, mkcclBfloat16, ranks.comms[r], ranks.streams[r]);
    };
    // A first call on both ranks sizes the scratch (a collective host step); rank 1 then stays away.
    std::vector<mkcclResult_t> res(2, mkcclSuccess);
    ranks.onEveryRank([&](int r) {
      res[r] = call(r);
      if (res[r] == mkcclSuccess && cudaStreamSynchronize(ranks.streams[r]) != cudaSuccess) res[r] = mkcclUnhandledCudaError;
    });
    ASSERT_EQ(mkcclSuccess, res[0]) << mkcclGetLastError(ranks.comms[0]);
    ASSERT_EQ(mkcclSuccess, res[1]) << mkcclGetLastError(ranks.comms[1]);
    cudaSetDevice(ranks.devs[0]);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(mkcclSuccess, call(0)) << mkcclGetLastError(ranks.comms[0]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(ranks.streams[0]));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    mkcclResult_t async = mkcclSuccess;
    EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(ranks.comms[0], &async));
    EXPECT_EQ(mkcclTimeout, async) << mkcclGetLastError(ranks.comms[0]);
    EXPECT_LT(s, 30.0) << "the kernel took " << s << " s to give up";
    printf("  the lone rank's call ended after %.1f s: %s\n", s, mkcclGetLastError(ranks.comms[0]));
    EXPECT_EQ(mkcclSuccess, mkcclCommAbort(ranks.comms[0]));
    ranks.comms[0] = nullptr;
  }
}

// Captured into a CUDA graph (after a first call sized the buffers) and replayed three times (the
// captured launch keeps its sequence number; the ring's epoch must still grow), then called
// directly again: every O is the first direct call's, bit for bit.
TEST(RingAttentionGraph, CaptureAndReplay) {
  MKCCL_REQUIRE_GPUS(1);
  const int ws = 2;
  std::unique_ptr<SharedGpus> share;
  if (ws > gpuCount()) share.reset(new SharedGpus());
  InProcessRanks ranks(devicesFor(ws));
  ASSERT_TRUE(ranks.ok());
  const RingCase c{1, 512, 4, 2, 128, 1, mkcclAttnZigzag, mkcclBfloat16};
  const size_t lq = static_cast<size_t>(c.sLocal) * c.hq * c.d, lkv = static_cast<size_t>(c.sLocal) * c.hkv * c.d;
  std::vector<std::unique_ptr<Buf>> Q, K, V, O1, O2;
  for (int r = 0; r < ws; ++r) {
    Q.emplace_back(new Buf(ranks.devs[r], lq * 2));
    K.emplace_back(new Buf(ranks.devs[r], lkv * 2));
    V.emplace_back(new Buf(ranks.devs[r], lkv * 2));
    O1.emplace_back(new Buf(ranks.devs[r], lq * 2));
    O2.emplace_back(new Buf(ranks.devs[r], lq * 2));
    fillRandom(Q[r]->p, lq, c.t, 41 + r);
    fillRandom(K[r]->p, lkv, c.t, 51 + r);
    fillRandom(V[r]->p, lkv, c.t, 61 + r);
    poison(O2[r]->p, lq * 2);
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  }
  auto call = [&](int r, void* out) {
    return mkcclRingAttention(Q[r]->p, K[r]->p, V[r]->p, out, nullptr, c.B, c.sLocal, c.hq, c.hkv, c.d, 0.088f,
                              c.causal, c.layout, c.t, ranks.comms[r], ranks.streams[r]);
  };
  std::vector<std::string> fail(ws);
  ranks.onEveryRank([&](int r) {
    auto bad = [&](const char* what, int code) { fail[r] = std::string(what) + " returned " + std::to_string(code); };
    mkcclResult_t m = call(r, O1[r]->p);
    if (m != mkcclSuccess) return bad("the first call", m);
    cudaError_t e = cudaStreamSynchronize(ranks.streams[r]);
    if (e != cudaSuccess) return bad("the first sync", e);
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    if ((e = cudaStreamBeginCapture(ranks.streams[r], cudaStreamCaptureModeThreadLocal)) != cudaSuccess)
      return bad("cudaStreamBeginCapture", e);
    m = call(r, O2[r]->p);
    e = cudaStreamEndCapture(ranks.streams[r], &g);
    if (m != mkcclSuccess) return bad("the captured call", m);
    if (e != cudaSuccess) return bad("cudaStreamEndCapture", e);
    if ((e = cudaGraphInstantiate(&ge, g, 0)) != cudaSuccess) return bad("cudaGraphInstantiate", e);
    for (int i = 0; i < 3; ++i)
      if ((e = cudaGraphLaunch(ge, ranks.streams[r])) != cudaSuccess) return bad("cudaGraphLaunch", e);
    if ((e = cudaStreamSynchronize(ranks.streams[r])) != cudaSuccess) return bad("the replays' sync", e);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    // Direct calls still work after the replays (the epoch kept growing).
    if ((m = call(r, O1[r]->p)) != mkcclSuccess) return bad("the call after the replays", m);
    if ((e = cudaStreamSynchronize(ranks.streams[r])) != cudaSuccess) return bad("the last sync", e);
  });
  for (int r = 0; r < ws; ++r) {
    ASSERT_EQ("", fail[r]) << "rank " << r;
    std::vector<uint16_t> a(lq), b(lq);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(a.data(), O1[r]->p, lq * 2, cudaMemcpyDeviceToHost));
    ASSERT_EQ(cudaSuccess, cudaMemcpy(b.data(), O2[r]->p, lq * 2, cudaMemcpyDeviceToHost));
    EXPECT_EQ(a, b) << "rank " << r;
  }
}

TEST(RingAttentionArgs, Refused) {
  MKCCL_REQUIRE_GPUS(1);
  InProcessRanks ranks({0});
  ASSERT_TRUE(ranks.ok());
  Buf q(0, 1 << 20), k(0, 1 << 20), v(0, 1 << 20), o(0, 1 << 20);
  mkcclComm_t comm = ranks.comms[0];
  EXPECT_EQ(mkcclInvalidArgument, mkcclRingAttention(q.p, k.p, v.p, o.p, nullptr, 1, 255, 4, 2, 64, 0.1f, 1,
                                                     mkcclAttnZigzag, mkcclBfloat16, comm, nullptr))
      << "odd length with zigzag";
  EXPECT_EQ(mkcclInvalidArgument, mkcclRingAttention(q.p, k.p, v.p, o.p, nullptr, 1, 256, 4, 2, 64, 0.1f, 1,
                                                     static_cast<mkcclAttnLayout_t>(7), mkcclBfloat16, comm, nullptr))
      << "unknown layout";
  EXPECT_EQ(mkcclInvalidArgument, mkcclRingAttention(q.p, k.p, v.p, o.p, nullptr, 1, 1 << 20, 4, 2, 64, 0.1f, 1,
                                                     mkcclAttnZigzag, mkcclBfloat16, comm, nullptr))
      << "past the allocations";
  EXPECT_EQ(mkcclInvalidArgument, mkcclRingAttention(q.p, k.p, v.p, q.p, nullptr, 1, 256, 4, 2, 64, 0.1f, 1,
                                                     mkcclAttnZigzag, mkcclBfloat16, comm, nullptr))
      << "O is Q";
}

}  // namespace
