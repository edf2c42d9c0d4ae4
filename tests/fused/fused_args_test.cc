// The fused ops' full arguments (mkcclAllGatherGemmEx, mkcclGemmReduceScatterEx, mkcclGemmAllReduceEx)
// on GPUs, against fp64 references computed here on the CPU from the same host inputs:
//   - strided A, W and C (pitches above the widths; the padding of A and W holds NaN, so a read of it
//     spoils the result, and the padding of C must come back untouched);
//   - a bias (bf16 / fp16 / fp32), added once (GEMM+RS/AR: to the reduced sum, not per rank);
//   - outputs of another type than the inputs (fp32, fp16, bf16);
//   - AllGather+GEMM with 2 and 3 weights of different N in one call (A gathered once), with and
//     without gatheredA, on each plan;
//   - odd shapes (N a tail of the tile, N = 4 mod 8 with fp32 out, rows per rank not a multiple of
//     128, K not a multiple of 64);
// at 1 rank and with 2, 3 and 4 ranks sharing the GPU(s) (tests/common/rank_threads.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>
#include <cmath>
#include <random>
#include <string>
#include <vector>
#include "capture_replay.h"
#include "rank_threads.h"
#include "test_util.h"

using namespace mkccl::test;

namespace {

size_t bytesOf(mkcclDataType_t t) { return t == mkcclFloat32 ? 4 : 2; }

// Host values of type t (rounded as the device stores them), and their float values.
struct HostMat {
  size_t rows = 0, cols = 0, ld = 0;
  mkcclDataType_t t = mkcclBfloat16;
  std::vector<float> v;          // rows x cols, the rounded values
  std::vector<unsigned char> b;  // rows x ld elements of t; padding 0xff (NaN)

  void make(size_t r, size_t c, size_t pitch, mkcclDataType_t type, std::mt19937_64& rng, float scale) {
    rows = r;
    cols = c;
    ld = pitch;
    t = type;
    v.assign(r * c, 0.f);
    b.assign(r * pitch * bytesOf(t), 0xff);
    std::uniform_real_distribution<float> u(-scale, scale);
    for (size_t i = 0; i < r; ++i)
      for (size_t j = 0; j < c; ++j) {
        float x = u(rng);
        unsigned char* p = b.data() + (i * pitch + j) * bytesOf(t);
        if (t == mkcclFloat32) {
          memcpy(p, &x, 4);
        } else if (t == mkcclFloat16) {
          const __half h = __float2half_rn(x);
          memcpy(p, &h, 2);
          x = __half2float(h);
        } else {
          const __nv_bfloat16 h = __float2bfloat16_rn(x);
          memcpy(p, &h, 2);
          x = __bfloat162float(h);
        }
        v[i * c + j] = x;
      }
  }
};

void* upload(const HostMat& m) {
  void* d = nullptr;
  if (cudaMalloc(&d, m.b.size()) != cudaSuccess) return nullptr;
  if (cudaMemcpy(d, m.b.data(), m.b.size(), cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
  return d;
}

// ref[i, j] = sum_k a[i, k] w[j, k] (+ bias[j]), in double.
std::vector<double> gemmRef(const float* a, size_t M, const HostMat& w, size_t K, const HostMat* bias) {
  std::vector<double> r(M * w.rows);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < w.rows; ++j) {
      double s = bias ? bias->v[j] : 0.0;
      const float* x = a + i * K;
      const float* y = w.v.data() + j * K;
      for (size_t k = 0; k < K; ++k) s += double(x[k]) * y[k];
      r[i * w.rows + j] = s;
    }
  return r;
}

// C (rows x N at pitch ldc, type t) against ref; the padding columns must still hold 0xff.
void checkC(const void* dC, size_t rows, size_t N, size_t ldc, mkcclDataType_t t, const std::vector<double>& ref,
            const std::string& what) {
  const size_t es = bytesOf(t);
  std::vector<unsigned char> h(rows * ldc * es);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(h.data(), dC, h.size(), cudaMemcpyDeviceToHost)) << what;
  std::vector<double> got(rows * N);
  size_t padTouched = 0;
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < N; ++j) got[i * N + j] = toFloat(h.data(), i * ldc + j, t);
    for (size_t j = N * es; j < ldc * es; ++j) padTouched += h[i * ldc * es + j] != 0xff;
  }
  EXPECT_EQ(0u, padTouched) << what << ": bytes of C's row padding were written";
  const ErrStats e = compare(got, ref, t == mkcclFloat32 ? 2e-3 : 1.5e-2);
  EXPECT_EQ(0u, e.wrong) << what << ": first wrong element " << e.firstWrong << " (row "
                         << (e.firstWrong == size_t(-1) ? 0 : e.firstWrong / N) << ", col "
                         << (e.firstWrong == size_t(-1) ? 0 : e.firstWrong % N) << ") max rel err " << e.maxRelErr;
}

// The op's plan (null: auto), then `extra` tuning items.
std::string tuningFor(const char* op, const char* plan, const std::string& extra = "") {
  std::string t = plan ? std::string(op) + ".plan=" + plan : std::string();
  return extra.empty() ? t : t.empty() ? extra : t + ";" + extra;
}

// ---------------------------------------------------------------- AllGather+GEMM

struct AgCase {
  const char* name;
  size_t m, K, lda;                 // rows per rank; lda 0: K
  std::vector<size_t> N, ldw, ldc;  // per weight (0: contiguous)
  mkcclDataType_t in, out, bias;    // bias mkcclNumTypes: none
  bool gathered;
};

const AgCase kAgCases[] = {
    {"strided, bias, fp32 out, 3 weights", 200, 512, 528, {392, 136, 64}, {520, 0, 536}, {400, 136, 68},
     mkcclBfloat16, mkcclFloat32, mkcclBfloat16, false},
    {"fp16 in, bf16 out, fp32 bias, 2 weights, gatheredA", 128, 256, 264, {256, 136}, {264, 272}, {264, 144},
     mkcclFloat16, mkcclBfloat16, mkcclFloat32, true},
    {"N a tail of the tile, fp16 bias and out", 96, 136, 0, {200}, {0}, {216}, mkcclBfloat16, mkcclFloat16,
     mkcclFloat16, false},
    {"fp32 out with N = 4 mod 8, fp16 in", 72, 72, 88, {132, 12}, {96, 0}, {140, 0}, mkcclFloat16, mkcclFloat32,
     mkcclNumTypes, true},
    {"contiguous, no bias, fp32 out, 2 weights", 256, 512, 0, {256, 520}, {0, 0}, {0, 0}, mkcclBfloat16,
     mkcclFloat32, mkcclNumTypes, false},
};

struct AgRank {
  HostMat A, G;  // G: gatheredA (contiguous) on device only
  std::vector<HostMat> W, bias;
  void* dA = nullptr;
  void* dG = nullptr;
  std::vector<void*> dW, dC, dBias;
  mkcclFusedGemmArgs_t args = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
  bool ok = false;

  void make(const AgCase& c, int rank, int ws, uint64_t seed) {
    std::mt19937_64 rng(seed * 131 + rank);
    const size_t M = c.m * ws, lda = c.lda ? c.lda : c.K;
    A.make(c.m, c.K, lda, c.in, rng, 1.f);
    dA = upload(A);
    ok = dA != nullptr;
    args.A = dA;
    args.M = M;
    args.K = c.K;
    args.lda = c.lda;
    args.inType = c.in;
    args.outType = c.out;
    args.biasType = c.bias == mkcclNumTypes ? c.in : c.bias;
    args.numWeights = int(c.N.size());
    if (c.gathered) {
      ok = ok && cudaMalloc(&dG, M * c.K * 2) == cudaSuccess && cudaMemset(dG, 0xff, M * c.K * 2) == cudaSuccess;
      args.gatheredA = dG;
    }
    W.resize(c.N.size());
    bias.resize(c.N.size());
    for (size_t i = 0; i < c.N.size(); ++i) {
      const size_t ldw = c.ldw[i] ? c.ldw[i] : c.K, ldc = c.ldc[i] ? c.ldc[i] : c.N[i];
      W[i].make(c.N[i], c.K, ldw, c.in, rng, 1.f);
      dW.push_back(upload(W[i]));
      void* C = nullptr;
      ok = ok && dW.back() && cudaMalloc(&C, M * ldc * bytesOf(c.out)) == cudaSuccess &&
           cudaMemset(C, 0xff, M * ldc * bytesOf(c.out)) == cudaSuccess;
      dC.push_back(C);
      void* b = nullptr;
      if (c.bias != mkcclNumTypes) {
        bias[i].make(1, c.N[i], c.N[i], c.bias, rng, 4.f);
        b = upload(bias[i]);
        ok = ok && b;
      }
      dBias.push_back(b);
      args.weights[i] = mkcclFusedWeight_t{dW[i], C, b, c.N[i], c.ldw[i], c.ldc[i]};
    }
    // The uploads and fills ran on the legacy stream (a pageable cudaMemcpy may return before its
    // DMA lands), which does not order the non-blocking rank streams that read them.
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
    EXPECT_TRUE(ok) << "allocations";
  }
  // New inputs in the same buffers (a graph replays on fixed addresses), outputs poisoned again.
  bool refill(const AgCase& c, uint64_t seed, int rank, cudaStream_t s) {
    std::mt19937_64 rng(seed * 131 + rank);
    A.make(A.rows, A.cols, A.ld, c.in, rng, 1.f);
    bool ok = cudaMemcpyAsync(dA, A.b.data(), A.b.size(), cudaMemcpyHostToDevice, s) == cudaSuccess;
    for (size_t i = 0; i < W.size(); ++i) {
      W[i].make(W[i].rows, W[i].cols, W[i].ld, c.in, rng, 1.f);
      ok = ok && cudaMemcpyAsync(dW[i], W[i].b.data(), W[i].b.size(), cudaMemcpyHostToDevice, s) == cudaSuccess;
      const size_t ldc = c.ldc[i] ? c.ldc[i] : c.N[i];
      ok = ok && cudaMemsetAsync(dC[i], 0xff, args.M * ldc * bytesOf(c.out), s) == cudaSuccess;
    }
    if (dG) ok = ok && cudaMemsetAsync(dG, 0xff, args.M * c.K * 2, s) == cudaSuccess;
    return ok && cudaStreamSynchronize(s) == cudaSuccess;  // (the host buffers are pageable)
  }
  void release() {
    cudaFree(dA);
    cudaFree(dG);
    for (void* p : dW) cudaFree(p);
    for (void* p : dC) cudaFree(p);
    for (void* p : dBias) cudaFree(p);
  }
};

void checkAg(const AgCase& c, std::vector<AgRank>& ranks, const std::string& where) {
  const int ws = int(ranks.size());
  const size_t M = c.m * ws;
  std::vector<float> gathered(M * c.K);
  for (int q = 0; q < ws; ++q) memcpy(gathered.data() + q * c.m * c.K, ranks[q].A.v.data(), c.m * c.K * 4);
  for (int r = 0; r < ws; ++r) {
    AgRank& x = ranks[r];
    for (size_t i = 0; i < c.N.size(); ++i) {
      const std::vector<double> ref =
          gemmRef(gathered.data(), M, x.W[i], c.K, c.bias == mkcclNumTypes ? nullptr : &x.bias[i]);
      const size_t ldc = c.ldc[i] ? c.ldc[i] : c.N[i];
      checkC(x.dC[i], M, c.N[i], ldc, c.out, ref,
             where + ", rank " + std::to_string(r) + ", weight " + std::to_string(i));
    }
    if (x.dG) {
      std::vector<double> g(gathered.begin(), gathered.end());
      std::vector<double> got = toHostDouble(x.dG, M * c.K, c.in);
      const ErrStats e = compare(got, g, 0.0);
      EXPECT_EQ(0u, e.wrong) << where << ", rank " << r << ": gatheredA";
    }
  }
}

// ---------------------------------------------------------------- GEMM+ReduceScatter / AllReduce

struct RsCase {
  const char* name;
  size_t M, N, K, lda, ldw, ldc;  // 0: contiguous
  mkcclDataType_t in, out, bias;  // bias mkcclNumTypes: none
};

const RsCase kRsCases[] = {
    {"strided A and W (the fused route)", 480, 256, 512, 528, 520, 0, mkcclBfloat16, mkcclBfloat16, mkcclNumTypes},
    {"bias, fp32 out, strided C", 384, 264, 256, 0, 272, 280, mkcclBfloat16, mkcclFloat32, mkcclBfloat16},
    {"fp16, fp32 bias, fp16 out", 240, 136, 392, 400, 0, 0, mkcclFloat16, mkcclFloat16, mkcclFloat32},
    {"bf16 bias and out, strided C", 192, 128, 128, 0, 0, 136, mkcclBfloat16, mkcclBfloat16, mkcclBfloat16},
};

struct RsRank {
  HostMat A, W, bias;
  void *dA = nullptr, *dW = nullptr, *dC = nullptr, *dBias = nullptr;
  mkcclFusedGemmArgs_t args = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
  bool ok = false;

  void make(const RsCase& c, bool allReduce, int rank, int ws, uint64_t seed, const HostMat* sharedBias) {
    std::mt19937_64 rng(seed * 977 + rank);
    A.make(c.M, c.K, c.lda ? c.lda : c.K, c.in, rng, 1.f);
    W.make(c.N, c.K, c.ldw ? c.ldw : c.K, c.in, rng, 1.f);
    dA = upload(A);
    dW = upload(W);
    const size_t rows = allReduce ? c.M : c.M / ws, ldc = c.ldc ? c.ldc : c.N;
    ok = dA && dW && cudaMalloc(&dC, rows * ldc * bytesOf(c.out)) == cudaSuccess &&
         cudaMemset(dC, 0xff, rows * ldc * bytesOf(c.out)) == cudaSuccess;
    if (sharedBias) {
      dBias = upload(*sharedBias);  // the same bias on every rank
      ok = ok && dBias;
    }
    args.A = dA;
    args.M = c.M;
    args.K = c.K;
    args.lda = c.lda;
    args.inType = c.in;
    args.outType = c.out;
    args.biasType = c.bias == mkcclNumTypes ? mkcclNumTypes : c.bias;
    args.weights[0] = mkcclFusedWeight_t{dW, dC, dBias, c.N, c.ldw, c.ldc};
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;  // (see AgRank::make)
    EXPECT_TRUE(ok) << "allocations";
  }
  bool refill(const RsCase& c, bool allReduce, uint64_t seed, int rank, int ws, cudaStream_t s) {
    std::mt19937_64 rng(seed * 977 + rank);
    A.make(A.rows, A.cols, A.ld, c.in, rng, 1.f);
    W.make(W.rows, W.cols, W.ld, c.in, rng, 1.f);
    const size_t rows = allReduce ? c.M : c.M / ws, ldc = c.ldc ? c.ldc : c.N;
    const bool ok = cudaMemcpyAsync(dA, A.b.data(), A.b.size(), cudaMemcpyHostToDevice, s) == cudaSuccess &&
                    cudaMemcpyAsync(dW, W.b.data(), W.b.size(), cudaMemcpyHostToDevice, s) == cudaSuccess &&
                    cudaMemsetAsync(dC, 0xff, rows * ldc * bytesOf(c.out), s) == cudaSuccess;
    return ok && cudaStreamSynchronize(s) == cudaSuccess;
  }
  void release() {
    for (void* p : {dA, dW, dC, dBias}) cudaFree(p);
  }
};

void checkRs(const RsCase& c, bool allReduce, std::vector<RsRank>& ranks, const HostMat* bias,
             const std::string& where) {
  const int ws = int(ranks.size());
  std::vector<double> sum(c.M * c.N, 0.0);
  for (int q = 0; q < ws; ++q) {
    const std::vector<double> p = gemmRef(ranks[q].A.v.data(), c.M, ranks[q].W, c.K, nullptr);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
  }
  if (bias)
    for (size_t i = 0; i < c.M; ++i)
      for (size_t j = 0; j < c.N; ++j) sum[i * c.N + j] += bias->v[j];
  const size_t rows = allReduce ? c.M : c.M / ws, ldc = c.ldc ? c.ldc : c.N;
  for (int r = 0; r < ws; ++r) {
    const size_t first = allReduce ? 0 : r * rows;
    std::vector<double> ref(sum.begin() + first * c.N, sum.begin() + (first + rows) * c.N);
    checkC(ranks[r].dC, rows, c.N, ldc, c.out, ref, where + ", rank " + std::to_string(r));
  }
}

// ---------------------------------------------------------------- drivers

// extra: tuning items kept for every case (e.g. a forced GEMM tile configuration).
void runAll(InProcessRanks& w, const std::string& worldName, uint64_t seed, const std::string& extra = "") {
  const int ws = w.size();
  // AllGather+GEMM: every case on every plan (ce with a strided A runs fused, documented).
  for (const char* plan : {"fused", "sequential", "ce", (const char*)nullptr}) {
    for (int r = 0; r < ws; ++r)
      ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuningFor("ag_gemm", plan, extra).c_str()));
    for (const AgCase& c : kAgCases) {
      const std::string where = worldName + ", AG+GEMM " + c.name + ", plan " + (plan ? plan : "auto") +
                                ", seed " + std::to_string(seed);
      SCOPED_TRACE(where);
      ++seed;
      std::vector<AgRank> ranks(ws);
      for (int r = 0; r < ws; ++r) {
        cudaSetDevice(w.devs[r]);
        ranks[r].make(c, r, ws, seed);
        ASSERT_TRUE(ranks[r].ok);
      }
      std::vector<mkcclResult_t> res(ws, mkcclInternalError);
      std::vector<cudaError_t> sync(ws, cudaErrorUnknown);
      w.onEveryRank([&](int r) {
        res[r] = mkcclAllGatherGemmEx(&ranks[r].args, w.comms[r], w.streams[r]);
        sync[r] = cudaStreamSynchronize(w.streams[r]);
      });
      for (int r = 0; r < ws; ++r) {
        EXPECT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
        ASSERT_EQ(cudaSuccess, sync[r]) << "rank " << r;
        expectNoAsyncError(w.comms[r]);
      }
      cudaSetDevice(w.devs[0]);
      checkAg(c, ranks, where);
      for (int r = 0; r < ws; ++r) {
        cudaSetDevice(w.devs[r]);
        ranks[r].release();
      }
    }
  }
  for (int r = 0; r < ws; ++r) ASSERT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], extra.c_str()));
  // GEMM+ReduceScatter and GEMM+AllReduce.
  for (bool allReduce : {false, true}) {
    for (const RsCase& c : kRsCases) {
      const std::string where = worldName + (allReduce ? ", GEMM+AR " : ", GEMM+RS ") + c.name + ", seed " +
                                std::to_string(seed);
      SCOPED_TRACE(where);
      ++seed;
      HostMat bias;
      std::mt19937_64 rng(seed);
      if (c.bias != mkcclNumTypes) bias.make(1, c.N, c.N, c.bias, rng, 4.f);
      const HostMat* b = c.bias != mkcclNumTypes ? &bias : nullptr;
      std::vector<RsRank> ranks(ws);
      for (int r = 0; r < ws; ++r) {
        cudaSetDevice(w.devs[r]);
        ranks[r].make(c, allReduce, r, ws, seed, b);
        ASSERT_TRUE(ranks[r].ok);
      }
      std::vector<mkcclResult_t> res(ws, mkcclInternalError);
      std::vector<cudaError_t> sync(ws, cudaErrorUnknown);
      w.onEveryRank([&](int r) {
        res[r] = allReduce ? mkcclGemmAllReduceEx(&ranks[r].args, w.comms[r], w.streams[r])
                           : mkcclGemmReduceScatterEx(&ranks[r].args, w.comms[r], w.streams[r]);
        sync[r] = cudaStreamSynchronize(w.streams[r]);
      });
      for (int r = 0; r < ws; ++r) {
        EXPECT_EQ(mkcclSuccess, res[r]) << "rank " << r << ": " << mkcclGetLastError(w.comms[r]);
        ASSERT_EQ(cudaSuccess, sync[r]) << "rank " << r;
        expectNoAsyncError(w.comms[r]);
      }
      cudaSetDevice(w.devs[0]);
      checkRs(c, allReduce, ranks, b, where);
      for (int r = 0; r < ws; ++r) {
        cudaSetDevice(w.devs[r]);
        ranks[r].release();
      }
    }
  }
}

TEST(FusedArgs, CapturedAndReplayed) {
  MKCCL_REQUIRE_GPUS(1);
  const SharedGpus shared({0, 0});
  InProcessRanks w({0, 0});
  ASSERT_TRUE(w.ok());
  const int ws = w.size();
  const uint64_t seed = freshSeed();
  {  // AllGather+GEMM: strided A (the copy into the region is a graph node), bias, fp32, 3 weights
    const AgCase& c = kAgCases[0];
    SCOPED_TRACE(std::string("AG+GEMM ") + c.name + ", seed " + std::to_string(seed));
    std::vector<AgRank> ranks(ws);
    for (int r = 0; r < ws; ++r) {
      ranks[r].make(c, r, ws, seed);
      ASSERT_TRUE(ranks[r].ok);
    }
    captureAndReplay(
        w, [&](int r, cudaStream_t s) { return mkcclAllGatherGemmEx(&ranks[r].args, w.comms[r], s); },
        [&](int r, int round) { return ranks[r].refill(c, seed + 1000 * round, r, w.streams[r]); },
        [&](int, const std::string& what) { checkAg(c, ranks, what); }, 3);
    for (auto& x : ranks) x.release();
  }
  for (bool allReduce : {false, true}) {  // the fused route (strided A, W) and the exact one (bias, fp32, ldc)
    for (const RsCase* c : {&kRsCases[0], &kRsCases[1]}) {
      SCOPED_TRACE(std::string(allReduce ? "GEMM+AR " : "GEMM+RS ") + c->name + ", seed " + std::to_string(seed));
      HostMat bias;
      std::mt19937_64 rng(seed);
      if (c->bias != mkcclNumTypes) bias.make(1, c->N, c->N, c->bias, rng, 4.f);
      const HostMat* b = c->bias != mkcclNumTypes ? &bias : nullptr;
      std::vector<RsRank> ranks(ws);
      for (int r = 0; r < ws; ++r) {
        ranks[r].make(*c, allReduce, r, ws, seed, b);
        ASSERT_TRUE(ranks[r].ok);
      }
      captureAndReplay(
          w,
          [&](int r, cudaStream_t s) {
            return allReduce ? mkcclGemmAllReduceEx(&ranks[r].args, w.comms[r], s)
                             : mkcclGemmReduceScatterEx(&ranks[r].args, w.comms[r], s);
          },
          [&](int r, int round) { return ranks[r].refill(*c, allReduce, seed + 1000 * round, r, ws, w.streams[r]); },
          [&](int, const std::string& what) { checkRs(*c, allReduce, ranks, b, what); }, 3);
      for (auto& x : ranks) x.release();
    }
  }
}

TEST(FusedArgs, OneRank) {
  MKCCL_REQUIRE_GPUS(1);
  InProcessRanks w({0});
  ASSERT_TRUE(w.ok());
  runAll(w, "1 rank", freshSeed());
}

// The plain GEMM's other tile widths (their last columns stored from registers, with the bias)
// where the sequential plans run it; the fused kernels take 128 x 128 for them.
TEST(FusedArgs, OneRankOtherWidths) {
  MKCCL_REQUIRE_GPUS(1);
  InProcessRanks w({0});
  ASSERT_TRUE(w.ok());
  for (const char* v : {"80x1", "144x2", "240x1"}) runAll(w, std::string("1 rank, ") + v, freshSeed(), std::string("gemm.variant=") + v);
}

TEST(FusedArgs, RanksSharingGpus) {
  MKCCL_REQUIRE_GPUS(1);
  for (const std::vector<int>& devs : sharedGpuWorlds()) {
    const SharedGpus shared(devs);
    InProcessRanks w(devs);
    ASSERT_TRUE(w.ok());
    runAll(w, std::to_string(w.size()) + " ranks on " + std::to_string(gpusOf(devs)) + " GPUs", freshSeed());
  }
}

// The Ex call with the short form's arguments runs what the short form runs: same result, bit for
// bit (one weight, contiguous, no bias, output of the input type).
TEST(FusedArgs, ShortFormIsTheExPath) {
  MKCCL_REQUIRE_GPUS(1);
  const SharedGpus shared({0, 0});
  InProcessRanks w({0, 0});
  ASSERT_TRUE(w.ok());
  const size_t m = 256, N = 512, K = 512, M = 2 * m;
  std::vector<void*> A(2), W(2), C1(2), C2(2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSuccess, cudaMalloc(&A[r], m * K * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&W[r], N * K * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&C1[r], M * N * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&C2[r], M * N * 2));
    fillRandom(A[r], m * K, mkcclBfloat16, freshSeed() + r);
    fillRandom(W[r], N * K, mkcclBfloat16, freshSeed() + 7 + r);
  }
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  std::vector<mkcclResult_t> res(4, mkcclInternalError);
  w.onEveryRank([&](int r) {
    res[r] = mkcclAllGatherGemm(A[r], W[r], C1[r], nullptr, M, N, K, mkcclBfloat16, w.comms[r], w.streams[r]);
    mkcclFusedGemmArgs_t a = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
    a.A = A[r];
    a.M = M;
    a.K = K;
    a.weights[0].W = W[r];
    a.weights[0].C = C2[r];
    a.weights[0].N = N;
    res[2 + r] = mkcclAllGatherGemmEx(&a, w.comms[r], w.streams[r]);
    cudaStreamSynchronize(w.streams[r]);
  });
  for (int i = 0; i < 4; ++i) EXPECT_EQ(mkcclSuccess, res[i]) << mkcclGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    std::vector<char> h1(M * N * 2), h2(M * N * 2);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(h1.data(), C1[r], h1.size(), cudaMemcpyDeviceToHost));
    ASSERT_EQ(cudaSuccess, cudaMemcpy(h2.data(), C2[r], h2.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(0, memcmp(h1.data(), h2.data(), h1.size())) << "rank " << r;
    for (void* p : {A[r], W[r], C1[r], C2[r]}) cudaFree(p);
  }
}

// Argument mistakes the Ex calls refuse on a live communicator (nothing queued; the communicator
// stays usable). The checks that need no device are covered on the CPU (fused_args_check_test).
TEST(FusedArgs, DeviceChecks) {
  MKCCL_REQUIRE_GPUS(1);
  InProcessRanks w({0});
  ASSERT_TRUE(w.ok());
  void *A, *W, *C;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&A, 256 * 256 * 2));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&W, 256 * 256 * 2));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&C, 256 * 256 * 4));
  std::vector<char> host(256 * 256 * 4);
  mkcclFusedGemmArgs_t a = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
  a.A = A;
  a.M = 128;
  a.K = 256;
  a.weights[0] = mkcclFusedWeight_t{W, C, nullptr, 256, 0, 0};
  a.weights[0].C = host.data();
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemmEx(&a, w.comms[0], w.streams[0])) << "host C";
  a.weights[0].C = C;
  a.lda = 512;  // A's span is 127 * 512 + 256 elements > 256 * 256
  a.M = 256;
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemmEx(&a, w.comms[0], w.streams[0])) << "A too small for lda";
  a.lda = 0;
  a.weights[0].bias = host.data();
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemmAllReduceEx(&a, w.comms[0], w.streams[0])) << "host bias";
  a.weights[0].bias = nullptr;
  a.outType = mkcclFloat32;
  EXPECT_EQ(mkcclSuccess, mkcclGemmAllReduceEx(&a, w.comms[0], w.streams[0])) << mkcclGetLastError(w.comms[0]);
  EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(w.streams[0]));
  for (void* p : {A, W, C}) cudaFree(p);
}

}  // namespace
