// The MoE GPU tests' shared cases and checks (moe_test.cc in one node, moe_net_test.cc across
// emulated nodes): one dispatch + combine of a case checked against the host model
// (moe_reference.h), calls back to back with a stand-in for the experts, the whole layer composed
// (dispatch, SwiGLU or plain grouped GEMM, grouped GEMM, combine) and fused (mkcclMoeDispatchGemm,
// mkcclMoeGemmCombine) against an fp32 reference, and a peer that never joins. World: the ranks of
// one process (test::InProcessRanks, or test::NetWorld across emulated nodes): size(), devs,
// comms, streams, onEveryRank(fn).
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>
#include "moe_check.h"
#include "moe_reference.h"
#include "test_util.h"

namespace mkccl {
namespace moetest {
namespace {

struct Case {
  std::string name;
  int El = 4, k = 2;
  size_t H = 64;
  RouteKind kind = RouteKind::Uniform;
  int align = 0;  // 0: the default (128)
  bool fp16 = false;
  std::function<int(int rank)> T;
  enum YMode { YRandom, YInPlace, YDevice } y = YRandom;
  size_t cap = 0;   // 0: the largest T
  int maxCtas = 16;
};

mkcclMoeConfig_t configOf(const Case& c, int ws, size_t cap) {
  mkcclMoeConfig_t cfg = MKCCL_MOE_CONFIG_INITIALIZER;
  cfg.numExperts = c.El * ws;
  cfg.topk = c.k;
  cfg.hidden = c.H;
  cfg.dtype = c.fp16 ? mkcclFloat16 : mkcclBfloat16;
  cfg.maxTokensPerRank = cap;
  cfg.rowAlign = c.align;
  cfg.maxCtas = c.maxCtas;
  return cfg;
}

Dims dimsOf(const mkcclMoeConfig_t& cfg, int ws, size_t rows) {
  Dims d;
  d.ranks = ws;
  d.experts = cfg.numExperts;
  d.topk = cfg.topk;
  d.hidden = cfg.hidden;
  d.cap = cfg.maxTokensPerRank;
  d.align = cfg.rowAlign ? cfg.rowAlign : 128;
  d.rows = rows;
  return d;
}

std::vector<uint16_t> randomHalves(size_t n, bool fp16, std::mt19937_64& g) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) {
    float f = u(g);
    if (f == 0.f) f = 0.5f;
    x = toBits(f, fp16);
  }
  return v;
}

template <class T>
std::vector<T> download(const void* d, size_t n) {
  std::vector<T> h(n);
  if (n) EXPECT_EQ(cudaSuccess, cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

void* upload(const void* h, size_t bytes) {
  void* d = nullptr;
  EXPECT_EQ(cudaSuccess, cudaMalloc(&d, bytes ? bytes : 16));
  if (bytes) EXPECT_EQ(cudaSuccess, cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  // Waited for: a copy from pageable memory may return before its DMA lands, and the legacy
  // stream does not order the non-blocking rank streams that read the buffer.
  if (bytes) EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(0));
  return d;
}

void expectNoAsyncError(mkcclComm_t comm) {
  mkcclResult_t async = mkcclSuccess;
  EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comm, &async));
  EXPECT_EQ(mkcclSuccess, async) << mkcclGetLastError(comm);
}

// After a call whose peer never joined, `secs` long: it gave up within [minSecs, maxSecs), and the
// communicator's error is the timeout, named for `what` (the MoE dispatch or combine) so that a
// user can tell which wait it was.
void expectPeerTimeout(mkcclComm_t comm, double secs, double minSecs, double maxSecs, const char* what) {
  EXPECT_GE(secs, minSecs);
  EXPECT_LT(secs, maxSecs);
  mkcclResult_t async = mkcclSuccess;
  ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comm, &async));
  EXPECT_EQ(mkcclTimeout, async) << mkcclGetLastError(comm);
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(comm)).find(what)) << mkcclGetLastError(comm);
}

// One rank's inputs (host and device) and what it received.
struct RankData {
  Routing route;
  std::vector<uint16_t> X;  // [T][H]
  void *dX = nullptr, *dIdx = nullptr, *dW = nullptr, *dY = nullptr, *dOut = nullptr;
  mkcclMoeBuffers buf{};
  std::vector<int32_t> offsets, counts;
  std::vector<mkcclMoeRowInfo> info;
  std::vector<uint16_t> recv, Y, out;
  // The dispatch's inputs (X, the expert ids and their weights) copied to new device buffers.
  void uploadInputs() {
    dX = upload(X.data(), X.size() * 2);
    dIdx = upload(route.idx.data(), route.idx.size() * 4);
    dW = upload(route.w.data(), route.w.size() * 4);
  }
  void release() {
    for (void* p : {dX, dIdx, dW, dY, dOut})
      if (p) cudaFree(p);
    dX = dIdx = dW = dY = dOut = nullptr;
  }
};

// A rank's dispatch inputs for T tokens: the routing (kind, seeded by routeSeed), X [T][d.hidden]
// drawn from g, all three uploaded. A routeSeed of g() is drawn before X (an argument), as the
// tests drew it before this helper.
void makeInputs(RankData& x, RouteKind kind, int T, const Dims& d, uint64_t routeSeed, std::mt19937_64& g,
                bool fp16 = false) {
  x.route = makeRouting(kind, T, d, routeSeed);
  x.X = randomHalves((size_t)T * d.hidden, fp16, g);
  x.uploadInputs();
}

// Handles of one configuration on every rank of w (created together, destroyed together).
template <class World>
struct Handles {
  World& w;
  std::vector<mkcclMoe_t> h;
  bool ok = true;
  Handles(World& world, const mkcclMoeConfig_t& cfg) : w(world), h(world.size(), nullptr) {
    std::vector<mkcclResult_t> res(w.size());
    w.onEveryRank([&](int r) { res[r] = mkcclMoeCreate(&h[r], w.comms[r], &cfg); });
    for (int r = 0; r < w.size(); ++r) {
      EXPECT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
      ok = ok && res[r] == mkcclSuccess;
    }
  }
  ~Handles() {
    for (int r = 0; r < w.size(); ++r)
      if (h[r]) {
        cudaSetDevice(w.devs[r]);
        EXPECT_EQ(mkcclSuccess, mkcclMoeDestroy(h[r])) << mkcclGetLastError(nullptr);
      }
  }
};

// The dispatch's result on receiving rank r against the model.
void checkDispatch(const Dims& d, const std::vector<RankData>& rd, const RankLayout& l, int r) {
  SCOPED_TRACE(testing::Message() << "dispatch, receiving rank " << r);
  const RankData& me = rd[r];
  const int El = d.localExperts(), k = d.topk;
  const size_t pitch = me.buf.rowPitch;
  for (int le = 0; le < El; ++le) {
    ASSERT_EQ(l.counts[le], me.counts[le]) << "count of local expert " << le;
    ASSERT_EQ(l.offsets[le], me.offsets[le]) << "offset of local expert " << le;
  }
  ASSERT_EQ(l.total(), me.offsets[El]) << "rows in use";
  for (int le = 0; le < El; ++le) {
    std::vector<Slot> got;
    int lastSrc = -1;
    for (long long row = l.offsets[le]; row < l.offsets[le] + l.counts[le]; ++row) {
      const mkcclMoeRowInfo& in = me.info[row];
      ASSERT_TRUE(in.srcRank >= 0 && in.srcRank < d.ranks && in.token >= 0 && in.token < rd[in.srcRank].route.T &&
                  in.slot >= 0 && in.slot < k)
          << "row " << row << ": rowInfo (" << in.srcRank << ", " << in.token << ", " << in.slot << ")";
      EXPECT_GE(in.srcRank, lastSrc) << "row " << row << ": sources out of rank order";
      lastSrc = in.srcRank;
      EXPECT_EQ(le, in.expert) << "row " << row;
      const Routing& src = rd[in.srcRank].route;
      EXPECT_EQ(src.w[(size_t)in.token * k + in.slot], in.weight) << "row " << row;
      EXPECT_EQ(r * El + le, src.idx[(size_t)in.token * k + in.slot]) << "row " << row;
      got.push_back(Slot{in.srcRank, in.token, in.slot});
      const uint16_t* x = rd[in.srcRank].X.data() + (size_t)in.token * d.hidden;
      const uint16_t* y = me.recv.data() + (size_t)row * pitch;
      ASSERT_EQ(0, memcmp(x, y, d.hidden * 2)) << "row " << row << " holds other data than token " << in.token
                                               << " of rank " << in.srcRank;
    }
    std::sort(got.begin(), got.end());
    ASSERT_TRUE(got == l.rows[le]) << "local expert " << le << " holds other slots than routed to it";
    for (long long row = l.offsets[le] + l.counts[le]; row < l.offsets[le + 1]; ++row) {
      const mkcclMoeRowInfo& in = me.info[row];
      EXPECT_TRUE(in.token == -1 && in.srcRank == -1 && in.slot == -1 && in.expert == -1 && in.weight == 0.f)
          << "padding row " << row << " not marked";
    }
  }
  // Rows past the ones in use were never written (they were poisoned with 0xff).
  for (size_t row = (size_t)l.total(); row < me.info.size(); ++row) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&me.info[row]);
    for (size_t i = 0; i < sizeof(mkcclMoeRowInfo); ++i) ASSERT_EQ(0xff, p[i]) << "rowInfo of unused row " << row;
  }
}

// out[t] of rank s against sum_j w_j * (the row slot j came back with).
void checkCombine(const Dims& d, const std::vector<RankData>& rd, int s, bool fp16, double tol,
                  const std::function<float(int d, long long row, size_t c)>& yOf) {
  SCOPED_TRACE(testing::Message() << "combine, rank " << s);
  const int El = d.localExperts(), k = d.topk;
  // Where each (src, token, slot) landed, from the receivers' rowInfo.
  std::vector<std::map<std::pair<int, int>, long long>> rowOf(d.ranks);  // [d][(token, slot)] for src s
  for (int dd = 0; dd < d.ranks; ++dd)
    for (long long row = 0; row < rd[dd].offsets[El]; ++row)
      if (rd[dd].info[row].srcRank == s) rowOf[dd][{rd[dd].info[row].token, rd[dd].info[row].slot}] = row;
  const Routing& r = rd[s].route;
  std::vector<double> ref(d.hidden);
  size_t wrong = 0;
  double worst = 0;
  for (int t = 0; t < r.T; ++t) {
    bool any = false;
    std::vector<long long> rows(k, -1);
    for (int j = 0; j < k; ++j) {
      const int e = r.idx[(size_t)t * k + j];
      if (e < 0) continue;
      any = true;
      auto it = rowOf[e / El].find({t, j});
      ASSERT_NE(rowOf[e / El].end(), it) << "token " << t << " slot " << j << " has no row at rank " << e / El;
      rows[j] = it->second;
    }
    referenceOut(d, r, t, [&](int j, size_t c) { return (double)yOf(r.idx[(size_t)t * k + j] / El, rows[j], c); },
                 ref.data());
    double scale = 1e-6;
    for (double v : ref) scale = std::max(scale, fabs(v));
    for (size_t c = 0; c < d.hidden; ++c) {
      const float got = fromBits(rd[s].out[(size_t)t * d.hidden + c], fp16);
      const double err = fabs(got - ref[c]) / scale;
      if (!any ? got != 0.f : !(err <= tol)) {
        if (wrong++ < 5)
          ADD_FAILURE() << "out[" << t << ", " << c << "] = " << got << ", expected " << ref[c]
                        << (any ? "" : " (a token with no expert)");
      }
      if (any && err > worst) worst = err;
    }
  }
  EXPECT_EQ(0u, wrong);
  EXPECT_LE(worst, tol);
}

// out (x.out, [T][H]) of one rank's dispatch + combine whose experts' compute was the expertScale
// stand-in (Y = dtype(x * (1 + 0.25 * local expert))), against the placement model:
// out[t] = sum_j w_j * Y(t, j). Returns the wrong elements (the first few reported).
size_t checkStandInOut(const Dims& d, const RankData& x, bool fp16 = false) {
  const int El = d.localExperts(), k = d.topk;
  const size_t H = d.hidden;
  std::vector<double> ref(H);
  size_t wrong = 0;
  for (int t = 0; t < x.route.T; ++t) {
    referenceOut(d, x.route, t,
                 [&](int j, size_t col) {
                   const int le = x.route.idx[(size_t)t * k + j] % El;
                   const float v = fromBits(x.X[(size_t)t * H + col], fp16) * (1.0f + 0.25f * le);
                   return (double)fromBits(toBits(v, fp16), fp16);
                 },
                 ref.data());
    double scale = 1e-6;
    for (double v : ref) scale = std::max(scale, fabs(v));
    for (size_t col = 0; col < H; ++col) {
      const float got = fromBits(x.out[(size_t)t * H + col], fp16);
      if (!(fabs(got - ref[col]) / scale <= 1e-2) && wrong++ < 3)
        ADD_FAILURE() << "out[" << t << ", " << col << "] = " << got << ", expected " << ref[col];
    }
  }
  return wrong;
}

// One dispatch + combine of case c on every rank of w, checked.
template <class World>
void runCase(World& w, const Case& c, uint64_t seed) {
  const int ws = w.size();
  SCOPED_TRACE(testing::Message() << "case " << c.name << ", " << ws << " ranks, " << routeKindName(c.kind)
                                  << ", seed " << seed);
  size_t cap = c.cap;
  for (int r = 0; r < ws; ++r) cap = std::max(cap, (size_t)c.T(r));
  cap = std::max<size_t>(cap, 1);
  const mkcclMoeConfig_t cfg = configOf(c, ws, cap);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  std::vector<RankData> rd(ws);
  std::mt19937_64 g(seed);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &rd[r].buf));
  }
  const Dims d = dimsOf(cfg, ws, rd[0].buf.maxRecvRows);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    RankData& x = rd[r];
    const int T = c.T(r);
    makeInputs(x, c.kind, T, d, g(), g, c.fp16);
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dOut, std::max<size_t>((size_t)T * c.H * 2, 16)));
    test::poison(x.dOut, (size_t)T * c.H * 2, w.streams[r]);
    test::poison(x.buf.recvX, x.buf.maxRecvRows * x.buf.rowPitch * 2, w.streams[r]);
    test::poison(x.buf.rowInfo, x.buf.maxRecvRows * sizeof(mkcclMoeRowInfo), w.streams[r]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  }
  std::vector<mkcclResult_t> res(ws, mkcclInternalError);
  std::vector<cudaError_t> sync(ws, cudaErrorUnknown);
  w.onEveryRank([&](int r) {
    res[r] = mkcclMoeDispatch(hs.h[r], rd[r].dX, (const int32_t*)rd[r].dIdx, (const float*)rd[r].dW, c.T(r),
                              w.streams[r]);
    sync[r] = cudaStreamSynchronize(w.streams[r]);
  });
  for (int r = 0; r < ws; ++r) {
    ASSERT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    ASSERT_EQ(cudaSuccess, sync[r]) << "rank " << r << ": the kernel must not fault";
    expectNoAsyncError(w.comms[r]);
  }
  const auto lay = referenceLayout(d, [&] {
    std::vector<Routing> v;
    for (auto& x : rd) v.push_back(x.route);
    return v;
  }());
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    RankData& x = rd[r];
    x.offsets = download<int32_t>(x.buf.expertOffsets, c.El + 1);
    x.counts = download<int32_t>(x.buf.expertCounts, c.El);
    x.info = download<mkcclMoeRowInfo>(x.buf.rowInfo, x.buf.maxRecvRows);
    x.recv = download<uint16_t>(x.buf.recvX, (size_t)std::max(0, x.offsets[c.El]) * x.buf.rowPitch);
    checkDispatch(d, rd, lay[r], r);
    if (testing::Test::HasFatalFailure()) return;
  }
  // The experts' output rows.
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    RankData& x = rd[r];
    const size_t n = x.buf.maxRecvRows * x.buf.rowPitch;
    if (c.y == Case::YRandom) {
      x.Y = randomHalves(n, c.fp16, g);
      x.dY = upload(x.Y.data(), n * 2);
    } else if (c.y == Case::YDevice) {
      ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dY, n * 2));
    }
  }
  w.onEveryRank([&](int r) {
    RankData& x = rd[r];
    const void* Y = c.y == Case::YInPlace ? x.buf.recvX : x.dY;
    if (c.y == Case::YDevice)
      expertScale(x.buf.recvX, x.buf.rowInfo, x.buf.expertOffsets, c.El, x.dY, x.buf.rowPitch, c.H, c.fp16,
                  w.streams[r]);
    res[r] = mkcclMoeCombine(hs.h[r], Y, x.dOut, c.T(r), w.streams[r]);
    sync[r] = cudaStreamSynchronize(w.streams[r]);
  });
  for (int r = 0; r < ws; ++r) {
    ASSERT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    ASSERT_EQ(cudaSuccess, sync[r]) << "rank " << r;
    expectNoAsyncError(w.comms[r]);
  }
  const double tol = c.fp16 ? 2e-3 : 1e-2;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    rd[r].out = download<uint16_t>(rd[r].dOut, (size_t)c.T(r) * c.H);
    auto yOf = [&](int dd, long long row, size_t col) -> float {
      const RankData& x = rd[dd];
      const uint16_t v = x.recv[(size_t)row * x.buf.rowPitch + col];
      switch (c.y) {
        case Case::YRandom: return fromBits(x.Y[(size_t)row * x.buf.rowPitch + col], c.fp16);
        case Case::YInPlace: return fromBits(v, c.fp16);
        default: {
          const float f = fromBits(v, c.fp16) * (1.0f + 0.25f * (float)x.info[row].expert);
          return fromBits(toBits(f, c.fp16), c.fp16);
        }
      }
    };
    checkCombine(d, rd, r, c.fp16, tol, yOf);
  }
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    rd[r].release();
  }
}

// The whole expert layer composed on the stream, no host sync between the calls: dispatch, the
// SwiGLU grouped GEMM on recvX (expert offsets from the dispatch, on the device), the second
// grouped GEMM into Y, combine. Checked against an fp32 host reference of
//   out[t] = sum_j w_j * (bf16(silu(x W1g_e^T) * (x W1u_e^T)) W2_e^T)
// (the activation is stored in the dtype between the GEMMs, as ours does), or with plain:
//   out[t] = sum_j w_j * (bf16(x W1g_e^T) W2_e^T).
// H and I not multiples of 128; T 0, 1, 3 and larger; uniform, skewed, dropped and empty-expert
// routings; 1-4 ranks.
struct LayerCase {
  int El, k;
  size_t H, I;
  RouteKind kind;
  std::function<int(int)> T;
  bool fp16 = false;    // fp16 tokens, weights and outputs (bf16 otherwise)
  bool gateUp = false;  // W1 stored gate rows then up rows (mkcclSwigluGateUp), else blocked
  bool plain = false;   // the first GEMM plain, act = x W1^T with W1 = the gate weights [El][I][H]
                        // (MKCCL_MOE_GEMM_PLAIN): no SwiGLU, gateUp ignored
};

// Packed W1 (blocked interleave, mkcclGroupedGemmSwiglu) of one rank from gate / up [El][I][H].
std::vector<uint16_t> packW1(const std::vector<uint16_t>& gate, const std::vector<uint16_t>& up, int El, size_t I,
                             size_t H) {
  const size_t Ip = (I + 127) / 128 * 128;
  std::vector<uint16_t> w(size_t(El) * 2 * Ip * H, 0);
  for (int e = 0; e < El; ++e)
    for (size_t r = 0; r < I; ++r) {
      const size_t base = size_t(e) * 2 * Ip + (r / 128) * 256 + r % 128;
      memcpy(&w[base * H], &gate[(size_t(e) * I + r) * H], H * 2);
      memcpy(&w[(base + 128) * H], &up[(size_t(e) * I + r) * H], H * 2);
    }
  return w;
}

// W1 of one rank stored gate rows then up rows per expert ([El][2 I][H], mkcclSwigluGateUp).
std::vector<uint16_t> gateUpW1(const std::vector<uint16_t>& gate, const std::vector<uint16_t>& up, int El, size_t I,
                               size_t H) {
  std::vector<uint16_t> w(size_t(El) * 2 * I * H);
  for (int e = 0; e < El; ++e) {
    memcpy(&w[size_t(e) * 2 * I * H], &gate[size_t(e) * I * H], I * H * 2);
    memcpy(&w[(size_t(e) * 2 + 1) * I * H], &up[size_t(e) * I * H], I * H * 2);
  }
  return w;
}

// One rank's expert weights (bf16 bits): gate and up [El][I][H], w2 [El][H][I].
struct LayerWeights {
  std::vector<uint16_t> gate, up, w2;
};

// W1 as c's first GEMM takes it: the gate weights alone (plain), or gate and up in c's layout.
std::vector<uint16_t> w1Of(const LayerCase& c, const LayerWeights& w) {
  if (c.plain) return w.gate;
  return c.gateUp ? gateUpW1(w.gate, w.up, c.El, c.I, c.H) : packW1(w.gate, w.up, c.El, c.I, c.H);
}

// mkcclMoeDispatchGemm's mode for c's first GEMM.
int gemm1Mode(const LayerCase& c) {
  return c.plain ? MKCCL_MOE_GEMM_PLAIN : c.gateUp ? MKCCL_MOE_GEMM_SWIGLU_GATE_UP : MKCCL_MOE_GEMM_SWIGLU;
}

// c's first GEMM composed, on the rows of the last dispatch: act [maxRecvRows][I] from recvX.
mkcclResult_t composedGemm1(const LayerCase& c, const mkcclMoeBuffers& b, const void* W1, void* act,
                            cudaStream_t s) {
  const mkcclDataType_t dt = c.fp16 ? mkcclFloat16 : mkcclBfloat16;
  if (c.plain) return mkcclGroupedGemm(b.recvX, W1, act, b.expertOffsets, c.El, b.maxRecvRows, c.I, c.H, dt, dt, s);
  return mkcclGroupedGemmSwigluEx(b.recvX, W1, c.gateUp ? mkcclSwigluGateUp : mkcclSwigluBlocked, act, b.expertOffsets,
                                  c.El, b.maxRecvRows, c.I, c.H, dt, dt, s);
}

// c's first GEMM by name, for traces.
const char* gemm1Name(const LayerCase& c) {
  return c.plain ? "plain GEMM1" : c.gateUp ? "SwiGLU, W1 gate-up" : "SwiGLU, W1 blocked";
}

// Weights scaled so that the sums stay O(1) (gate values spread over silu's curve).
LayerWeights randomWeights(const LayerCase& c, std::mt19937_64& g) {
  auto scaled = [&](size_t n, float s) {
    std::vector<uint16_t> v = randomHalves(n, c.fp16, g);
    for (auto& b : v) b = toBits(fromBits(b, c.fp16) * s, c.fp16);
    return v;
  };
  LayerWeights w;
  w.gate = scaled(size_t(c.El) * c.I * c.H, 3.f / sqrtf(float(c.H)));
  w.up = scaled(size_t(c.El) * c.I * c.H, 3.f / sqrtf(float(c.H)));
  w.w2 = scaled(size_t(c.El) * c.H * c.I, 1.f / sqrtf(float(c.I)));
  return w;
}

// One rank's expert layer on the current device: weights drawn from g, W1 (as c's first GEMM takes
// it) and W2 uploaded, act [rows][I] and Y [rows][H] allocated for the handle's receive rows.
struct LayerRank {
  LayerWeights wt;
  void *dW1 = nullptr, *dW2 = nullptr, *dAct = nullptr, *dY = nullptr;
  // An assertion here returns from make alone: call it under ASSERT_NO_FATAL_FAILURE.
  void make(const LayerCase& c, size_t rows, std::mt19937_64& g) {
    wt = randomWeights(c, g);
    const std::vector<uint16_t> w1 = w1Of(c, wt);
    dW1 = upload(w1.data(), w1.size() * 2);
    dW2 = upload(wt.w2.data(), wt.w2.size() * 2);
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dAct, rows * c.I * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&dY, rows * c.H * 2));
  }
  void release() {
    for (void* p : {dW1, dW2, dAct, dY}) cudaFree(p);
    dW1 = dW2 = dAct = dY = nullptr;
  }
};

// The fp32 reference of token t's output row (ref[H]): expert e (global) is local expert e % El of
// rank e / El, whose weights weightsOf(e / El) returns.
void layerReference(const LayerCase& c, const std::vector<uint16_t>& X, const Routing& route, int t,
                    const std::function<const LayerWeights&(int)>& weightsOf, double* ref) {
  std::vector<float> act(c.I);
  std::fill(ref, ref + c.H, 0.0);
  const uint16_t* xt = &X[(size_t)t * c.H];
  for (int j = 0; j < c.k; ++j) {
    const int e = route.idx[(size_t)t * c.k + j];
    if (e < 0) continue;
    const LayerWeights& o = weightsOf(e / c.El);
    const int le = e % c.El;
    for (size_t i = 0; i < c.I; ++i) {
      float ga = 0, u = 0;
      const uint16_t* gr = &o.gate[(size_t(le) * c.I + i) * c.H];
      const uint16_t* ur = &o.up[(size_t(le) * c.I + i) * c.H];
      for (size_t h = 0; h < c.H; ++h) {
        const float xv = fromBits(xt[h], c.fp16);
        ga += xv * fromBits(gr[h], c.fp16);
        if (!c.plain) u += xv * fromBits(ur[h], c.fp16);
      }
      act[i] = fromBits(toBits(c.plain ? ga : ga / (1.f + expf(-ga)) * u, c.fp16), c.fp16);
    }
    const float wt = route.w[(size_t)t * c.k + j];
    for (size_t h = 0; h < c.H; ++h) {
      float z = 0;
      const uint16_t* w2r = &o.w2[(size_t(le) * c.H + h) * c.I];
      for (size_t i = 0; i < c.I; ++i) z += act[i] * fromBits(w2r[i], c.fp16);
      ref[h] += double(wt) * double(fromBits(toBits(z, c.fp16), c.fp16));
    }
  }
}

// fused: the layer made twice per rank, composed (into a second output) and then with
// mkcclMoeDispatchGemm for the dispatch and the first GEMM, recvX and act poisoned in between (a
// GEMM that read a row before it landed would compute on the poison, not on the composed call's
// identical rows); both outputs against the reference and against each other.
// both (with fused): the second half fused too (mkcclMoeGemmCombine), Y poisoned as well (a row
// returned before the GEMM stored it would carry the poison).
template <class World>
void runLayer(World& w, const LayerCase& c, uint64_t seed, bool fused = false, bool both = false) {
  const int ws = w.size();
  SCOPED_TRACE(testing::Message() << ws << " ranks, El " << c.El << " k " << c.k << " H " << c.H << " I " << c.I
                                  << (c.fp16 ? ", fp16, " : ", ") << gemm1Name(c) << ", " << routeKindName(c.kind)
                                  << (both ? ", both halves fused" : fused ? ", fused" : ", composed") << ", seed "
                                  << seed);
  Case base{"layer", c.El, c.k, c.H, c.kind, 0, c.fp16, c.T, Case::YRandom};
  const mkcclDataType_t dt = c.fp16 ? mkcclFloat16 : mkcclBfloat16;
  size_t cap = 1;
  for (int r = 0; r < ws; ++r) cap = std::max(cap, (size_t)c.T(r));
  const mkcclMoeConfig_t cfg = configOf(base, ws, cap);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  std::mt19937_64 g(seed);
  struct Rank : LayerRank {
    RankData d;
    void* dOutC = nullptr;
  };
  std::vector<Rank> rk(ws);
  Dims d;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    Rank& x = rk[r];
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.d.buf));
    ASSERT_EQ(c.H, x.d.buf.rowPitch) << "the layer test keeps H a multiple of 8";
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dOutC, std::max<size_t>((size_t)c.T(r) * c.H * 2, 16)));
    test::poison(x.dOutC, (size_t)c.T(r) * c.H * 2, w.streams[r]);
    d = dimsOf(cfg, ws, x.d.buf.maxRecvRows);
    const int T = c.T(r);
    x.d.route = makeRouting(c.kind, T, d, g());
    x.d.X = randomHalves((size_t)T * c.H, c.fp16, g);
    ASSERT_NO_FATAL_FAILURE(x.make(c, x.d.buf.maxRecvRows, g));
    x.d.uploadInputs();
    ASSERT_EQ(cudaSuccess, cudaMalloc(&x.d.dOut, std::max<size_t>((size_t)T * c.H * 2, 16)));
    test::poison(x.d.dOut, (size_t)T * c.H * 2, w.streams[r]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  }
  std::vector<mkcclResult_t> res(ws, mkcclInternalError);
  std::vector<cudaError_t> sync(ws, cudaErrorUnknown);
  w.onEveryRank([&](int r) {
    Rank& x = rk[r];
    const mkcclMoeBuffers& b = x.d.buf;
    mkcclResult_t e = mkcclMoeDispatch(hs.h[r], x.d.dX, (const int32_t*)x.d.dIdx, (const float*)x.d.dW, c.T(r),
                                       w.streams[r]);
    if (e == mkcclSuccess) e = composedGemm1(c, b, x.dW1, x.dAct, w.streams[r]);
    if (e == mkcclSuccess)
      e = mkcclGroupedGemm(x.dAct, x.dW2, x.dY, b.expertOffsets, c.El, b.maxRecvRows, c.H, c.I, dt, dt,
                           w.streams[r]);
    if (e == mkcclSuccess) e = mkcclMoeCombine(hs.h[r], x.dY, fused ? x.dOutC : x.d.dOut, c.T(r), w.streams[r]);
    if (fused && e == mkcclSuccess) {
      cudaMemsetAsync(b.recvX, 0xff, b.maxRecvRows * b.rowPitch * 2, w.streams[r]);  // NaN in bf16 and fp16
      cudaMemsetAsync(x.dAct, 0xff, b.maxRecvRows * c.I * 2, w.streams[r]);
      e = mkcclMoeDispatchGemm(hs.h[r], x.d.dX, (const int32_t*)x.d.dIdx, (const float*)x.d.dW, c.T(r), x.dW1, x.dAct,
                               c.I, gemm1Mode(c), w.streams[r]);
      if (both) {
        cudaMemsetAsync(x.dY, 0xff, b.maxRecvRows * c.H * 2, w.streams[r]);
        if (e == mkcclSuccess)
          e = mkcclMoeGemmCombine(hs.h[r], x.dAct, x.dW2, x.dY, x.d.dOut, c.I, c.T(r), w.streams[r]);
      } else {
        if (e == mkcclSuccess)
          e = mkcclGroupedGemm(x.dAct, x.dW2, x.dY, b.expertOffsets, c.El, b.maxRecvRows, c.H, c.I, dt, dt,
                               w.streams[r]);
        if (e == mkcclSuccess) e = mkcclMoeCombine(hs.h[r], x.dY, x.d.dOut, c.T(r), w.streams[r]);
      }
    }
    res[r] = e;
    sync[r] = cudaStreamSynchronize(w.streams[r]);
  });
  for (int r = 0; r < ws; ++r) {
    ASSERT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    ASSERT_EQ(cudaSuccess, sync[r]) << "rank " << r;
    expectNoAsyncError(w.comms[r]);
  }
  // Reference: expert e (global) of owner e / El, local expert e % El.
  size_t wrongAll = 0;
  double worst = 0;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    Rank& x = rk[r];
    const int T = c.T(r);
    x.d.out = download<uint16_t>(x.d.dOut, (size_t)T * c.H);
    const std::vector<uint16_t> outC = fused ? download<uint16_t>(x.dOutC, (size_t)T * c.H) : std::vector<uint16_t>();
    std::vector<double> ref(c.H);
    for (int t = 0; t < T; ++t) {
      layerReference(c, x.d.X, x.d.route, t, [&](int owner) -> const LayerWeights& { return rk[owner].wt; }, ref.data());
      double scale = 1e-3;
      for (double v : ref) scale = std::max(scale, fabs(v));
      for (size_t h = 0; h < c.H; ++h) {
        const float got = fromBits(x.d.out[(size_t)t * c.H + h], c.fp16);
        const double err = fabs(got - ref[h]) / scale;
        if (!(err <= 3e-2) && wrongAll++ < 5)
          ADD_FAILURE() << "rank " << r << " out[" << t << ", " << h << "] = " << got << ", expected " << ref[h];
        if (err > worst) worst = err;
        if (!fused) continue;
        // Same tiles on the same rows and weights: the fused layer is expected to equal the
        // composed one; a small tolerance only.
        const float comp = fromBits(outC[(size_t)t * c.H + h], c.fp16);
        if (!(fabs(got - comp) / scale <= 1e-2) && wrongAll++ < 5)
          ADD_FAILURE() << "rank " << r << " fused out[" << t << ", " << h << "] = " << got << ", composed " << comp;
      }
    }
  }
  EXPECT_EQ(0u, wrongAll);
  EXPECT_LE(worst, 3e-2);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    rk[r].release();
    cudaFree(rk[r].dOutC);
    rk[r].d.release();
  }
}

// `calls` calls per rank queued without a host sync: dispatch, the experts' compute on the device
// (expertScale), combine into a fresh output; T and the routing change every call (0 included).
// Checked at the end against the placement model (referenceOut).
template <class World>
void runBackToBack(World& w, const Case& c, int calls, size_t cap, uint64_t seed) {
  const int ws = w.size();
  const mkcclMoeConfig_t cfg = configOf(c, ws, cap);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  std::mt19937_64 g(seed);
  std::vector<std::vector<RankData>> rd(calls, std::vector<RankData>(ws));
  std::vector<mkcclMoeBuffers> buf(ws);
  std::vector<void*> Y(ws);
  Dims d;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &buf[r]));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&Y[r], buf[r].maxRecvRows * buf[r].rowPitch * 2));
    d = dimsOf(cfg, ws, buf[r].maxRecvRows);
  }
  for (int i = 0; i < calls; ++i)
    for (int r = 0; r < ws; ++r) {
      cudaSetDevice(w.devs[r]);
      RankData& x = rd[i][r];
      const int T = (i + r) % 7 == 0 ? 0 : (int)(g() % (cap + 1));
      makeInputs(x, i % 3 == 1 ? RouteKind::Skewed : i % 3 == 2 ? RouteKind::Dropped : RouteKind::Uniform, T, d,
                 g(), g);
      ASSERT_EQ(cudaSuccess, cudaMalloc(&x.dOut, std::max<size_t>((size_t)T * c.H * 2, 16)));
      test::poison(x.dOut, (size_t)T * c.H * 2, w.streams[r]);
    }
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  }
  std::vector<int> failed(ws, 0);
  w.onEveryRank([&](int r) {
    for (int i = 0; i < calls && !failed[r]; ++i) {
      RankData& x = rd[i][r];
      mkcclResult_t e = mkcclMoeDispatch(hs.h[r], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, x.route.T,
                                         w.streams[r]);
      expertScale(buf[r].recvX, buf[r].rowInfo, buf[r].expertOffsets, c.El, Y[r], buf[r].rowPitch, c.H, false,
                  w.streams[r]);
      if (e == mkcclSuccess) e = mkcclMoeCombine(hs.h[r], Y[r], x.dOut, x.route.T, w.streams[r]);
      if (e != mkcclSuccess) failed[r] = i + 1;
    }
    if (cudaStreamSynchronize(w.streams[r]) != cudaSuccess) failed[r] = -1;
  });
  for (int r = 0; r < ws; ++r) {
    ASSERT_EQ(0, failed[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    expectNoAsyncError(w.comms[r]);
  }
  for (int i = 0; i < calls; ++i)
    for (int r = 0; r < ws; ++r) {
      SCOPED_TRACE(testing::Message() << "call " << i << ", rank " << r);
      cudaSetDevice(w.devs[r]);
      RankData& x = rd[i][r];
      x.out = download<uint16_t>(x.dOut, (size_t)x.route.T * c.H);
      EXPECT_EQ(0u, checkStandInOut(d, x));
      x.release();
    }
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    cudaFree(Y[r]);
  }
}

// `calls` layers queued back to back on every rank of w with no host sync, fresh X and routing per
// call (T(r) tokens each), every output (poisoned first) against the fp32 reference; fused:
// mkcclMoeDispatchGemm, grouped GEMM, combine (a call must never see the rows or layout of the one
// before); not fused: the four composed calls with the real expert GEMMs (runBackToBack runs a
// stand-in for the GEMMs). both: the second half fused too (mkcclMoeGemmCombine), after
// mkcclMoeDispatchGemm on even calls and after the composed first half on odd ones. c's first
// GEMM (SwiGLU blocked or gate-up, or plain) and dtype throughout.
template <class World>
void runLayersBackToBack(World& w, const LayerCase& c, int calls, uint64_t seed, bool fused, bool both) {
  const int ws = w.size();
  SCOPED_TRACE(testing::Message() << ws << " ranks, " << calls << " layers, " << gemm1Name(c)
                                  << (c.fp16 ? ", fp16" : "")
                                  << (both ? ", both halves fused" : fused ? ", first half fused" : ", composed")
                                  << ", seed " << seed);
  std::mt19937_64 g(seed);
  const mkcclDataType_t dt = c.fp16 ? mkcclFloat16 : mkcclBfloat16;
  size_t cap = 1, tokens = 0;
  for (int r = 0; r < ws; ++r) {
    cap = std::max(cap, (size_t)c.T(r));
    tokens += (size_t)c.T(r);
  }
  Case base{"back to back", c.El, c.k, c.H, c.kind, 0, c.fp16, c.T, Case::YRandom};
  const mkcclMoeConfig_t cfg = configOf(base, ws, cap);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  struct Rank : LayerRank {
    std::vector<RankData> d;  // per call
    mkcclMoeBuffers b{};
  };
  std::vector<Rank> rk(ws);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    Rank& x = rk[r];
    ASSERT_EQ(mkcclSuccess, mkcclMoeGetBuffers(hs.h[r], &x.b));
    const Dims d = dimsOf(cfg, ws, x.b.maxRecvRows);
    ASSERT_NO_FATAL_FAILURE(x.make(c, x.b.maxRecvRows, g));
    x.d.resize(calls);
    const int T = c.T(r);
    for (int i = 0; i < calls; ++i) {
      RankData& y = x.d[i];
      makeInputs(y, i % 3 == 2 ? RouteKind::Skewed : c.kind, T, d, g(), g, c.fp16);
      ASSERT_EQ(cudaSuccess, cudaMalloc(&y.dOut, std::max<size_t>((size_t)T * c.H * 2, 16)));
      test::poison(y.dOut, (size_t)T * c.H * 2, w.streams[r]);
    }
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[r]));
  }
  std::vector<std::string> err(ws);
  w.onEveryRank([&](int r) {
    Rank& x = rk[r];
    cudaStream_t s = w.streams[r];
    for (int i = 0; i < calls && err[r].empty(); ++i) {
      RankData& y = x.d[i];
      mkcclResult_t e;
      if (fused && (!both || i % 2 == 0)) {
        e = mkcclMoeDispatchGemm(hs.h[r], y.dX, (const int32_t*)y.dIdx, (const float*)y.dW, c.T(r), x.dW1, x.dAct, c.I,
                                 gemm1Mode(c), s);
      } else {
        e = mkcclMoeDispatch(hs.h[r], y.dX, (const int32_t*)y.dIdx, (const float*)y.dW, c.T(r), s);
        if (e == mkcclSuccess) e = composedGemm1(c, x.b, x.dW1, x.dAct, s);
      }
      if (both) {
        if (e == mkcclSuccess) e = mkcclMoeGemmCombine(hs.h[r], x.dAct, x.dW2, x.dY, y.dOut, c.I, c.T(r), s);
      } else {
        if (e == mkcclSuccess)
          e = mkcclGroupedGemm(x.dAct, x.dW2, x.dY, x.b.expertOffsets, c.El, x.b.maxRecvRows, c.H, c.I, dt, dt, s);
        if (e == mkcclSuccess) e = mkcclMoeCombine(hs.h[r], x.dY, y.dOut, c.T(r), s);
      }
      if (e != mkcclSuccess) err[r] = std::string("call ") + std::to_string(i) + ": " + mkcclGetLastError(w.comms[r]);
    }
    if (cudaStreamSynchronize(s) != cudaSuccess && err[r].empty()) err[r] = "stream";
  });
  for (int r = 0; r < ws; ++r) {
    ASSERT_EQ("", err[r]) << "rank " << r;
    expectNoAsyncError(w.comms[r]);
  }
  size_t wrong = 0, checked = 0;
  for (int i = 0; i < calls; ++i)
    for (int r = 0; r < ws; ++r) {
      cudaSetDevice(w.devs[r]);
      const int T = c.T(r);
      const std::vector<uint16_t> out = download<uint16_t>(rk[r].d[i].dOut, (size_t)T * c.H);
      std::vector<double> ref(c.H);
      for (int t = 0; t < T; ++t) {
        layerReference(c, rk[r].d[i].X, rk[r].d[i].route, t, [&](int o) -> const LayerWeights& { return rk[o].wt; },
                       ref.data());
        double scale = 1e-3;
        for (double v : ref) scale = std::max(scale, fabs(v));
        for (size_t h = 0; h < c.H; ++h) {
          const float got = fromBits(out[(size_t)t * c.H + h], c.fp16);
          if (!(fabs(got - ref[h]) / scale <= 3e-2) && wrong++ < 5)
            ADD_FAILURE() << "call " << i << " rank " << r << " out[" << t << ", " << h << "] = " << got
                          << ", expected " << ref[h];
        }
        ++checked;
      }
    }
  EXPECT_EQ(0u, wrong);
  EXPECT_EQ(size_t(calls) * tokens, checked);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    for (RankData& y : rk[r].d) y.release();
    rk[r].release();
  }
}

// Ranks 0 and 1 of w (their communicators' timeout set by the caller): rank 1 never calls
// dispatch. Rank 0's waits give up after the timeout (the call ends within [minSecs, maxSecs)),
// its kernel leaves cleanly, the timeout naming the MoE dispatch is the communicator's error, and
// the next call returns it. Case c: the handle's shape, c.T(0) tokens on rank 0.
template <class World>
void runAbsentPeer(World& w, const Case& c, double minSecs, double maxSecs) {
  const int T = c.T(0);
  const mkcclMoeConfig_t cfg = configOf(c, 2, T);
  Handles hs(w, cfg);
  ASSERT_TRUE(hs.ok);
  const Dims d = dimsOf(cfg, 2, 0);
  cudaSetDevice(w.devs[0]);
  RankData x;
  std::mt19937_64 g(3);
  makeInputs(x, c.kind, T, d, 1, g, c.fp16);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(mkcclSuccess, mkcclMoeDispatch(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, T, w.streams[0]));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[0])) << "the kernel must exit cleanly";
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NO_FATAL_FAILURE(expectPeerTimeout(w.comms[0], secs, minSecs, maxSecs, "MoE dispatch"));
  printf("absent peer: error after %.1f s: %s\n", secs, mkcclGetLastError(w.comms[0]));
  EXPECT_EQ(mkcclTimeout, mkcclMoeDispatch(hs.h[0], x.dX, (const int32_t*)x.dIdx, (const float*)x.dW, T, w.streams[0]))
      << "the communicator keeps its error";
  x.release();
}

}  // namespace
}  // namespace moetest

}  // namespace mkccl
