// The fused ops on registered buffers (mkcclMemAlloc + mkcclCommRegister), in place:
//   - AllGather+GEMM with a registered gatheredA (peers push straight into it, no gather-out),
//     separate from A and with A inside it (in place), a strided A, every plan forced (ce runs as
//     the fused plan in place), shards not a multiple of 128 rows;
//   - GEMM+AllReduce with a registered C (finished tiles stored straight into every peer's C) on
//     the fused route with each push, and the rs_ag / sequential routes (whose collectives use C in
//     place themselves); GEMM+ReduceScatter with a registered C (nothing changes: the owner's
//     tiles already go straight into C);
// each against an fp64 CPU reference and, for the same inputs, the same call on unregistered
// (cudaMalloc) buffers; outputs poisoned; each rank at its own offset inside the registration.
// Also: AllGather+GEMM and GEMM+AllReduce on registered buffers captured in one CUDA graph and
// replayed with fresh inputs, each replay checked; and ranks that disagree (one rank registered,
// the others not) end with an error on every rank, quickly, never a hang or a silent result.
// Ranks: 2, 3 and 4 sharing GPU 0 (or spread over two GPUs), one thread each.
#include <cuda_bf16.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "rank_threads.h"
#include "test_util.h"

namespace mkccl {
namespace test {
namespace {

// rows x cols bf16 values (row pitch ld; padding NaN) and their float values.
struct Mat {
  size_t rows = 0, cols = 0, ld = 0;
  std::vector<float> v;
  std::vector<uint16_t> b;
  void make(size_t r, size_t c, size_t pitch, std::mt19937_64& rng) {
    rows = r;
    cols = c;
    ld = pitch;
    v.assign(r * c, 0.f);
    b.assign(r * pitch, 0xffff);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (size_t i = 0; i < r; ++i)
      for (size_t j = 0; j < c; ++j) {
        const __nv_bfloat16 h = __float2bfloat16_rn(u(rng));
        memcpy(&b[i * pitch + j], &h, 2);
        v[i * c + j] = __bfloat162float(h);
      }
  }
  size_t bytes() const { return b.size() * 2; }
};

std::vector<double> toDouble(const void* d, size_t n) {
  std::vector<uint16_t> h(n);
  std::vector<double> r(n);
  if (cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess) return {};
  for (size_t i = 0; i < n; ++i) {
    __nv_bfloat16 x;
    memcpy(&x, &h[i], 2);
    r[i] = __bfloat162float(x);
  }
  return r;
}

std::string checkBf16(const void* d, const std::vector<double>& ref, const std::string& what) {
  const std::vector<double> got = toDouble(d, ref.size());
  if (got.size() != ref.size()) return what + ": copy back failed";
  const ErrStats e = compare(got, ref, 1.5e-2);
  if (e.wrong == 0) return "";
  return what + ": " + std::to_string(e.wrong) + " of " + std::to_string(ref.size()) + " wrong, first at " +
         std::to_string(e.firstWrong) + ", max rel err " + std::to_string(e.maxRelErr);
}

std::string finish(mkcclComm_t c, cudaStream_t s) {
  const cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) return std::string("stream: ") + cudaGetErrorString(e);
  mkcclResult_t async = mkcclSuccess;
  mkcclCommGetAsyncError(c, &async);
  if (async != mkcclSuccess) return std::string("async error: ") + mkcclGetLastError(c);
  return "";
}

std::vector<std::vector<int>> worlds() {
  std::vector<std::vector<int>> w = sharedGpuWorlds();
  if (gpuCount() >= 2) w.insert(w.begin(), std::vector<int>{0, 1});
  return w;
}

constexpr size_t kPool = 16 << 20;      // per rank: one allocation, one registration
constexpr size_t kCAt = 8 << 20;        // C's area in the pool (gatheredA's at 0)

// A world with a registered pool per rank and plain buffers as big.
struct RegWorld {
  std::unique_ptr<SharedGpus> share;
  std::unique_ptr<InProcessRanks> ranks;
  std::vector<void*> pool, handle, plainG, plainC;
  std::string setupError;
  int n = 0;

  explicit RegWorld(const std::vector<int>& devs) : n(int(devs.size())) {
    if (gpusOf(devs) < n) share.reset(new SharedGpus(devs));
    ranks.reset(new InProcessRanks(devs));
    pool.assign(n, nullptr);
    handle.assign(n, nullptr);
    plainG.assign(n, nullptr);
    plainC.assign(n, nullptr);
    if (!ranks->ok()) {
      setupError = "init";
      return;
    }
    std::vector<std::string> errs(n);
    ranks->onEveryRank([&](int r) {
      mkcclResult_t e = mkcclMemAlloc(&pool[r], kPool);
      if (e == mkcclSuccess) e = mkcclCommRegister(ranks->comms[r], pool[r], kPool, &handle[r]);
      if (e != mkcclSuccess) errs[r] = std::string("registering: ") + mkcclGetLastError(ranks->comms[r]);
      if (cudaMalloc(&plainG[r], kCAt) != cudaSuccess || cudaMalloc(&plainC[r], kPool - kCAt) != cudaSuccess)
        errs[r] = "cudaMalloc";
    });
    for (auto& e : errs)
      if (!e.empty()) setupError = e;
  }
  ~RegWorld() {
    if (ranks && ranks->ok())
      ranks->onEveryRank([&](int r) {
        cudaStreamSynchronize(ranks->streams[r]);
        if (handle[r]) EXPECT_EQ(mkcclSuccess, mkcclCommDeregister(ranks->comms[r], handle[r]));
        if (pool[r]) EXPECT_EQ(mkcclSuccess, mkcclMemFree(pool[r]));
        cudaFree(plainG[r]);
        cudaFree(plainC[r]);
      });
    ranks.reset();
    share.reset();
  }
  // Each rank's own offsets inside its registration (16-byte aligned: TMA).
  char* regG(int r) const { return static_cast<char*>(pool[r]) + 256 * size_t(r % 2) + 4096 * size_t(r % 3); }
  char* regC(int r) const { return static_cast<char*>(pool[r]) + kCAt + 512 * size_t((r + 1) % 2); }
};

// ---------------------------------------------------------------- AllGather+GEMM

struct AgShape {
  size_t m, N, K;
};
const AgShape kAgShapes[] = {{200, 264, 136}, {256, 520, 256}, {64, 72, 64}};

enum class GMode { RegSeparate, RegInPlace, RegStrided, Plain };
const char* gmodeName(GMode g) {
  switch (g) {
    case GMode::RegSeparate: return "registered gatheredA";
    case GMode::RegInPlace: return "registered gatheredA, A in place";
    case GMode::RegStrided: return "registered gatheredA, strided A";
    default: return "unregistered gatheredA";
  }
}

// One rank's AllGather+GEMM inputs and the references (every rank's A is known to every rank's check).
struct AgData {
  std::vector<Mat> A, W;  // per rank
  void make(const AgShape& s, int n, uint64_t seed, size_t lda) {
    A.resize(n);
    W.resize(n);
    for (int r = 0; r < n; ++r) {
      std::mt19937_64 rng(seed * 977 + r);
      A[r].make(s.m, s.K, lda, rng);
      W[r].make(s.N, s.K, s.K, rng);
    }
  }
  std::vector<double> gathered(const AgShape& s) const {
    std::vector<double> g;
    for (const Mat& a : A) g.insert(g.end(), a.v.begin(), a.v.end());
    (void)s;
    return g;
  }
  std::vector<double> C(const AgShape& s, int r) const {
    const size_t M = s.m * A.size();
    std::vector<double> c(M * s.N);
    for (size_t i = 0; i < M; ++i) {
      const float* a = A[i / s.m].v.data() + (i % s.m) * s.K;
      for (size_t j = 0; j < s.N; ++j) {
        const float* w = W[r].v.data() + j * s.K;
        double acc = 0;
        for (size_t k = 0; k < s.K; ++k) acc += double(a[k]) * w[k];
        c[i * s.N + j] = acc;
      }
    }
    return c;
  }
};

// One AllGather+GEMM call per rank of world w in mode g; checks C and gatheredA against the
// references. Errors per rank.
void runAg(RegWorld& w, const AgShape& s, GMode g, const char* plan, uint64_t seed) {
  const int n = w.n;
  const size_t M = s.m * n;
  const bool strided = g == GMode::RegStrided;
  const size_t lda = strided ? s.K + 8 : s.K;
  AgData d;
  d.make(s, n, seed, lda);
  const std::vector<double> refG = d.gathered(s);
  std::vector<std::string> errs(n);
  w.ranks->onEveryRank([&](int r) {
    mkcclComm_t comm = w.ranks->comms[r];
    cudaStream_t st = w.ranks->streams[r];
    const std::string tune = std::string("ag_gemm.plan=") + plan;
    if (mkcclSetTuning(comm, tune.c_str()) != mkcclSuccess) {
      errs[r] = "tuning " + tune;
      return;
    }
    char* G = g == GMode::Plain ? static_cast<char*>(w.plainG[r]) : w.regG(r);
    char* C = g == GMode::Plain ? static_cast<char*>(w.plainC[r]) : w.regC(r);
    void *A = nullptr, *W = nullptr;
    // Uploads on the rank's stream: a cudaMemcpy from pageable memory may return before its DMA
    // lands, and the legacy stream does not order the non-blocking rank streams.
    bool ok = cudaMalloc(&W, d.W[r].bytes()) == cudaSuccess &&
              cudaMemcpyAsync(W, d.W[r].b.data(), d.W[r].bytes(), cudaMemcpyHostToDevice, st) == cudaSuccess;
    poison(G, M * s.K * 2, st);
    poison(C, M * s.N * 2, st);
    if (g == GMode::RegInPlace) {
      A = G + size_t(r) * s.m * s.K * 2;
      ok = ok && cudaMemcpyAsync(A, d.A[r].b.data(), d.A[r].bytes(), cudaMemcpyHostToDevice, st) == cudaSuccess;
    } else {
      ok = ok && cudaMalloc(&A, d.A[r].bytes()) == cudaSuccess &&
           cudaMemcpyAsync(A, d.A[r].b.data(), d.A[r].bytes(), cudaMemcpyHostToDevice, st) == cudaSuccess;
    }
    ok = ok && cudaStreamSynchronize(st) == cudaSuccess;
    if (!ok) {
      errs[r] = "setup";
      return;
    }
    mkcclFusedGemmArgs_t a = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
    a.A = A;
    a.gatheredA = G;
    a.M = M;
    a.K = s.K;
    a.lda = lda;
    a.inType = mkcclBfloat16;
    a.numWeights = 1;
    a.weights[0] = mkcclFusedWeight_t{W, C, nullptr, s.N, 0, 0};
    const mkcclResult_t res = strided ? mkcclAllGatherGemmEx(&a, comm, st)
                                      : mkcclAllGatherGemm(A, W, C, G, M, s.N, s.K, mkcclBfloat16, comm, st);
    if (res != mkcclSuccess) errs[r] = std::string("call: ") + mkcclGetLastError(comm);
    else errs[r] = finish(comm, st);
    if (errs[r].empty()) errs[r] = checkBf16(C, d.C(s, r), "C");
    if (errs[r].empty()) errs[r] = checkBf16(G, refG, "gatheredA");
    if (g != GMode::RegInPlace) cudaFree(A);
    cudaFree(W);
    mkcclSetTuning(comm, "ag_gemm.plan=auto");
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ("", errs[r]) << "AllGather+GEMM " << s.m << "x" << s.N << "x" << s.K << " per rank, " << gmodeName(g)
                           << ", plan " << plan << ", " << n << " ranks, rank " << r << ", seed " << seed;
}

TEST(FusedReg, AllGatherGemmGatheredARegistered) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  for (const auto& devs : worlds()) {
    RegWorld w(devs);
    ASSERT_EQ("", w.setupError);
    for (const AgShape& s : kAgShapes)
      for (GMode g : {GMode::RegSeparate, GMode::RegInPlace, GMode::RegStrided, GMode::Plain})
        for (const char* plan : {"fused", "sequential", "auto", "ce"}) {
          if (g == GMode::RegStrided && strcmp(plan, "auto") != 0) continue;
          runAg(w, s, g, plan, seed + uint64_t(g) * 7 + s.m);
        }
  }
}

// ---------------------------------------------------------------- GEMM+AllReduce / ReduceScatter

struct RsShape {
  size_t M, N, K;
};

std::vector<double> sumRef(const std::vector<Mat>& A, const std::vector<Mat>& W, size_t M, size_t N, size_t K) {
  std::vector<double> c(M * N, 0.0);
  for (size_t q = 0; q < A.size(); ++q)
    for (size_t i = 0; i < M; ++i)
      for (size_t j = 0; j < N; ++j) {
        const float* a = A[q].v.data() + i * K;
        const float* w = W[q].v.data() + j * K;
        double acc = 0;
        for (size_t k = 0; k < K; ++k) acc += double(a[k]) * w[k];
        c[i * N + j] += acc;
      }
  return c;
}

// GEMM+AllReduce (allReduce) or GEMM+ReduceScatter with C registered or not, under `tune`.
void runRs(RegWorld& w, const RsShape& s, bool allReduce, bool reg, const std::string& tune, uint64_t seed) {
  const int n = w.n;
  std::vector<Mat> A(n), W(n);
  for (int r = 0; r < n; ++r) {
    std::mt19937_64 rng(seed * 613 + r);
    A[r].make(s.M, s.K, s.K, rng);
    W[r].make(s.N, s.K, s.K, rng);
  }
  const std::vector<double> full = sumRef(A, W, s.M, s.N, s.K);
  const size_t rows = allReduce ? s.M : s.M / n;
  std::vector<std::string> errs(n);
  w.ranks->onEveryRank([&](int r) {
    mkcclComm_t comm = w.ranks->comms[r];
    cudaStream_t st = w.ranks->streams[r];
    if (!tune.empty() && mkcclSetTuning(comm, tune.c_str()) != mkcclSuccess) {
      errs[r] = "tuning " + tune;
      return;
    }
    char* C = reg ? w.regC(r) : static_cast<char*>(w.plainC[r]);
    void *dA = nullptr, *dW = nullptr;
    // Uploads on the rank's stream (synchronised below): a cudaMemcpy from pageable memory may
    // return before its DMA lands, and the legacy stream does not order the non-blocking rank
    // streams, so the kernel could read a rank's A or W before it arrived.
    const bool ok = cudaMalloc(&dA, A[r].bytes()) == cudaSuccess && cudaMalloc(&dW, W[r].bytes()) == cudaSuccess &&
                    cudaMemcpyAsync(dA, A[r].b.data(), A[r].bytes(), cudaMemcpyHostToDevice, st) == cudaSuccess &&
                    cudaMemcpyAsync(dW, W[r].b.data(), W[r].bytes(), cudaMemcpyHostToDevice, st) == cudaSuccess;
    poison(C, rows * s.N * 2, st);
    if (!ok || cudaStreamSynchronize(st) != cudaSuccess) {
      errs[r] = "setup";
      return;
    }
    const mkcclResult_t res = allReduce
                                  ? mkcclGemmAllReduce(dA, dW, C, s.M, s.N, s.K, mkcclBfloat16, comm, st)
                                  : mkcclGemmReduceScatter(dA, dW, C, s.M, s.N, s.K, mkcclBfloat16, comm, st);
    if (res != mkcclSuccess) errs[r] = std::string("call: ") + mkcclGetLastError(comm);
    else errs[r] = finish(comm, st);
    if (errs[r].empty()) {
      std::vector<double> ref(full.begin() + (allReduce ? 0 : r * rows * s.N),
                              full.begin() + (allReduce ? 0 : r * rows * s.N) + rows * s.N);
      errs[r] = checkBf16(C, ref, "C");
    }
    cudaFree(dA);
    cudaFree(dW);
    mkcclSetTuning(comm, allReduce ? "gemm_ar.plan=auto" : "gemm_rs.plan=auto");
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ("", errs[r]) << (allReduce ? "GEMM+AllReduce " : "GEMM+ReduceScatter ") << s.M << "x" << s.N << "x"
                           << s.K << (reg ? ", C registered" : ", C unregistered") << ", tuning '" << tune << "', "
                           << n << " ranks, rank " << r << ", seed " << seed;
}

TEST(FusedReg, GemmAllReduceCRegistered) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  for (const auto& devs : worlds()) {
    RegWorld w(devs);
    ASSERT_EQ("", w.setupError);
    const int n = w.n;
    for (const RsShape& s : {RsShape{384, 264, 136}, RsShape{200, 520, 64}, RsShape{130 * size_t(n), 72, 72}})
      for (const char* t : {"gemm_ar.plan=fused;gemm_ar.push=team", "gemm_ar.plan=fused;gemm_ar.push=bulk",
                            "gemm_ar.plan=fused;gemm_ar.push=ce", "gemm_ar.plan=rs_ag", "gemm_ar.plan=sequential",
                            "gemm_ar.plan=auto"})
        for (bool reg : {true, false}) runRs(w, s, true, reg, t, seed + s.M);
  }
}

TEST(FusedReg, GemmReduceScatterCRegistered) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  for (const auto& devs : worlds()) {
    RegWorld w(devs);
    ASSERT_EQ("", w.setupError);
    const size_t n = size_t(w.n);
    for (const RsShape& s : {RsShape{128 * n, 264, 136}, RsShape{72 * n, 520, 64}})
      for (const char* t : {"gemm_rs.plan=fused", "gemm_rs.plan=sequential", "gemm_rs.plan=auto"})
        for (bool reg : {true, false}) runRs(w, s, false, reg, t, seed + s.M);
  }
}

// ---------------------------------------------------------------- CUDA graphs

// AllGather+GEMM (registered gatheredA, fused) and GEMM+AllReduce (registered C, fused) in one
// graph per rank, replayed with fresh inputs between an eager call of each; every replay checked.
TEST(FusedReg, CapturedAndReplayed) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed0 = freshSeed();
  const std::vector<int> devs = gpuCount() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
  RegWorld w(devs);
  ASSERT_EQ("", w.setupError);
  const int n = w.n, rounds = 12;
  const AgShape ag{200, 264, 136};
  const RsShape ar{256, 264, 136};
  const size_t M = ag.m * n;
  std::vector<std::string> errs(n);
  HostBarrier bar(n);
  w.ranks->onEveryRank([&](int r) {
    mkcclComm_t comm = w.ranks->comms[r];
    cudaStream_t st = w.ranks->streams[r];
    mkcclSetTuning(comm, "ag_gemm.plan=fused;gemm_ar.plan=fused");
    char* G = w.regG(r);
    char* C1 = w.regC(r);
    char* C2 = C1 + ((M * ag.N * 2 + 4095) / 4096) * 4096;
    void *A = nullptr, *W = nullptr, *A2 = nullptr, *W2 = nullptr;
    cudaMalloc(&A, ag.m * ag.K * 2);
    cudaMalloc(&W, ag.N * ag.K * 2);
    cudaMalloc(&A2, ar.M * ar.K * 2);
    cudaMalloc(&W2, ar.N * ar.K * 2);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    auto enqueue = [&]() -> mkcclResult_t {
      mkcclResult_t e = mkcclAllGatherGemm(A, W, C1, G, M, ag.N, ag.K, mkcclBfloat16, comm, st);
      if (e == mkcclSuccess) e = mkcclGemmAllReduce(A2, W2, C2, ar.M, ar.N, ar.K, mkcclBfloat16, comm, st);
      return e;
    };
    // Every rank passes every barrier (a failed rank skips its work, never a barrier).
    for (int round = -1; round < rounds; ++round) {
      if (round == 0) bar.wait();  // capture together
      if (!errs[r].empty()) {
        bar.wait();
        continue;
      }
      // Every rank makes the same inputs for the round (each rank's own part by its seed).
      const uint64_t seed = seed0 + uint64_t(round + 1) * 1000;
      AgData d;
      d.make(ag, n, seed, ag.K);
      std::vector<Mat> A2s(n), W2s(n);
      for (int q = 0; q < n; ++q) {
        std::mt19937_64 rng(seed * 613 + q);
        A2s[q].make(ar.M, ar.K, ar.K, rng);
        W2s[q].make(ar.N, ar.K, ar.K, rng);
      }
      // On the rank's stream, ahead of the calls (see runRs).
      cudaMemcpyAsync(A, d.A[r].b.data(), d.A[r].bytes(), cudaMemcpyHostToDevice, st);
      cudaMemcpyAsync(W, d.W[r].b.data(), d.W[r].bytes(), cudaMemcpyHostToDevice, st);
      cudaMemcpyAsync(A2, A2s[r].b.data(), A2s[r].bytes(), cudaMemcpyHostToDevice, st);
      cudaMemcpyAsync(W2, W2s[r].b.data(), W2s[r].bytes(), cudaMemcpyHostToDevice, st);
      poison(G, M * ag.K * 2, st);
      poison(C1, M * ag.N * 2, st);
      poison(C2, ar.M * ar.N * 2, st);
      mkcclResult_t e = mkcclSuccess;
      if (round < 0) {
        e = enqueue();  // eager: grows the scratch, makes the plans
      } else {
        if (exec == nullptr) {
          if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            errs[r] = "begin capture";
          } else {
            e = enqueue();
            if (cudaStreamEndCapture(st, &graph) != cudaSuccess || e != mkcclSuccess ||
                cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
              errs[r] = std::string("capture: ") + mkcclGetLastError(comm);
          }
        }
        if (errs[r].empty() && cudaGraphLaunch(exec, st) != cudaSuccess) errs[r] = "graph launch";
      }
      if (errs[r].empty() && e != mkcclSuccess) errs[r] = std::string("call: ") + mkcclGetLastError(comm);
      if (errs[r].empty()) errs[r] = finish(comm, st);
      const std::string tag = "round " + std::to_string(round);
      if (errs[r].empty()) errs[r] = checkBf16(C1, d.C(ag, r), tag + " AG C");
      if (errs[r].empty()) errs[r] = checkBf16(G, d.gathered(ag), tag + " gatheredA");
      const std::vector<double> arRef = sumRef(A2s, W2s, ar.M, ar.N, ar.K);
      if (errs[r].empty()) errs[r] = checkBf16(C2, arRef, tag + " AR C");
      // An eager call on unregistered buffers between replays (the same communicator).
      if (errs[r].empty() && round >= 0) {
        poison(w.plainC[r], ar.M * ar.N * 2, st);
        e = mkcclGemmAllReduce(A2, W2, w.plainC[r], ar.M, ar.N, ar.K, mkcclBfloat16, comm, st);
        errs[r] = e != mkcclSuccess ? std::string("eager: ") + mkcclGetLastError(comm) : finish(comm, st);
        if (errs[r].empty()) errs[r] = checkBf16(w.plainC[r], arRef, tag + " eager AR C");
      }
      bar.wait();
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaFree(A);
    cudaFree(W);
    cudaFree(A2);
    cudaFree(W2);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ("", errs[r]) << "rank " << r << ", seed " << seed0;
}

// ---------------------------------------------------------------- ranks that disagree

// Rank 0 passes a registered buffer, the others unregistered ones: every rank must end with an
// error (mkcclInvalidUsage naming the registered buffers on at least one), within seconds.
TEST(FusedReg, DisagreeingRanksFail) {
  MKCCL_REQUIRE_GPUS(1);
  for (int what : {0, 1}) {  // 0: AllGather+GEMM's gatheredA; 1: GEMM+AllReduce's C
    SCOPED_TRACE(what == 0 ? "AllGather+GEMM, rank 0 registered gatheredA" : "GEMM+AllReduce, rank 0 registered C");
    const std::vector<int> devs = gpuCount() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
    const int n = 2;
    setenv("MKCCL_TIMEOUT_MS", "2000", 1);
    std::unique_ptr<SharedGpus> share;
    if (gpusOf(devs) < n) share.reset(new SharedGpus(devs));
    std::vector<mkcclComm_t> comms(n, nullptr);
    ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(comms.data(), n, devs.data())) << mkcclGetLastError(nullptr);
    unsetenv("MKCCL_TIMEOUT_MS");
    std::vector<mkcclResult_t> got(n, mkcclSuccess);
    std::vector<std::string> msg(n);
    std::vector<void*> mem(n, nullptr);
    HostBarrier bar(n);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r)
      th.emplace_back([&, r] {
        cudaSetDevice(devs[r]);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        const size_t bytes = 8 << 20;
        void* h = nullptr;
        EXPECT_EQ(mkcclSuccess, mkcclMemAlloc(&mem[r], bytes));
        EXPECT_EQ(mkcclSuccess, mkcclCommRegister(comms[r], mem[r], bytes, &h));
        void *plain = nullptr, *A = nullptr, *W = nullptr, *C = nullptr;
        cudaMalloc(&plain, bytes);
        cudaMalloc(&A, 1 << 20);
        cudaMalloc(&W, 1 << 20);
        cudaMalloc(&C, 1 << 20);
        cudaMemset(A, 0, 1 << 20);
        cudaMemset(W, 0, 1 << 20);
        mkcclSetTuning(comms[r], "ag_gemm.plan=fused;gemm_ar.plan=fused");
        void* mine = r == 0 ? mem[r] : plain;
        bar.wait();
        mkcclResult_t res =
            what == 0 ? mkcclAllGatherGemm(A, W, C, mine, 256 * n, 256, 256, mkcclBfloat16, comms[r], s)
                      : mkcclGemmAllReduce(A, W, mine, 512, 256, 256, mkcclBfloat16, comms[r], s);
        if (res == mkcclSuccess) cudaStreamSynchronize(s);
        mkcclResult_t async = res;
        if (res == mkcclSuccess) mkcclCommGetAsyncError(comms[r], &async);
        got[r] = async;
        msg[r] = mkcclGetLastError(comms[r]);
        cudaFree(plain);
        cudaFree(A);
        cudaFree(W);
        cudaFree(C);
        cudaStreamDestroy(s);
      });
    for (auto& t : th) t.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int r = 0; r < n; ++r) EXPECT_NE(mkcclSuccess, got[r]) << "rank " << r << " finished without an error";
    bool named = false;
    for (int r = 0; r < n; ++r)
      if (got[r] == mkcclInvalidUsage && msg[r].find("registered") != std::string::npos) named = true;
    EXPECT_TRUE(named) << "no rank reported the disagreement: rank 0 " << msg[0] << "; rank 1 " << msg[1];
    EXPECT_LT(secs, 30.0);
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(devs[r]);
      mkcclCommAbort(comms[r]);  // also ends the registrations
    }
    for (void* p : mem)
      if (p) EXPECT_EQ(mkcclSuccess, mkcclMemFree(p));
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
