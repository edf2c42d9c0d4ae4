// The fused ops with e4m3 inputs across emulated nodes (MKCCL_RANKS_PER_NODE, libfabric tcp between
// them; ranks in one process sharing the GPUs there are): 2 x 1, 2 x 2 and 4 x 1, per-tensor and
// DeepSeek-V3 block scales (scales never 1, block scales drawn per block), fresh random inputs,
// outputs poisoned first, against fp32 references of the dequantised inputs computed on the GPU
// (tests/common/fp8_ref.h):
//   - mkcclAllGatherGemmFp8 on its split route (the only route across nodes): shards of 200 rows
//     (K = 272: a partial last scale block) and of 512 rows (2 pieces), with and without gatheredA
//     (its bytes checked exactly);
//   - mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8 on the split route (auto) and the
//     sequential route (gemm_rs.net / gemm_ar.net = sequential): 200 and 512 rows per rank (2
//     pieces), an AllReduce M not divisible by the ranks (the sequential route then runs);
//   - a window too small for a shard (AllGather+GEMM): mkcclInvalidUsage naming
//     MKCCL_NET_BUFFER_BYTES, nothing enqueued; a call that fits still works.
#include <gtest/gtest.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <random>
#include <string>
#include <vector>
#include "fp8_ref.h"
#include "net_world.h"

using namespace mkccl::test;

namespace {

bool isBlock(mkcclFp8ScaleKind_t k) { return k == mkcclFp8ScaleBlock; }
const char* kindName(mkcclFp8ScaleKind_t k) { return isBlock(k) ? "block" : "tensor"; }

template <class T>
void toDevice(void* dst, const std::vector<T>& v, cudaStream_t s) {
  cudaMemcpyAsync(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, s);
}

// One rank's device buffers; freed by release().
struct Bufs {
  void *A = nullptr, *W = nullptr, *C = nullptr, *G = nullptr, *sA = nullptr, *sW = nullptr, *R = nullptr;
  bool ok = true;
  void* get(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) ok = false;
    return p;
  }
  // This rank's inputs: e4m3 A and W, fp32 scales.
  void upload(const std::vector<uint8_t>& a, const std::vector<uint8_t>& w, const std::vector<float>& sa,
              const std::vector<float>& sw, cudaStream_t s) {
    toDevice(A, a, s);
    toDevice(W, w, s);
    toDevice(sA, sa, s);
    toDevice(sW, sw, s);
  }
  void release() {
    for (void* p : {A, W, C, G, sA, sW, R}) cudaFree(p);
    A = W = C = G = sA = sW = R = nullptr;
  }
};

std::vector<uint8_t> bytesOf(const void* p, size_t n) {
  std::vector<uint8_t> v(n);
  cudaMemcpy(v.data(), p, n, cudaMemcpyDeviceToHost);
  return v;
}

// Whole-matrix relative error of C against R (fp32) after rounding to 16 bits and (RS/AR) the sums
// of ws rounded partials.
double tolFor(mkcclDataType_t out, int ws) { return std::max(2e-2, (ws + 1) * 1.5 * (out == mkcclFloat16 ? 0x1p-11 : 0x1p-9)); }

// AllGather+GEMM: shards of m rows, per-rank W; per-tensor sA the same on every rank.
void runAg(NetWorld& w, size_t m, size_t N, size_t K, mkcclFp8ScaleKind_t kind, bool gathered, mkcclDataType_t out,
           uint64_t seed) {
  const int ws = w.size();
  const size_t M = m * size_t(ws), kS = (K + 127) / 128;
  const size_t nA = isBlock(kind) ? m * kS : 1, nW = isBlock(kind) ? fp8BlockScalesW(N, K) : 1;
  const std::string where = std::string("AllGatherGemmFp8 ") + kindName(kind) + " m=" + std::to_string(m) +
                            " N=" + std::to_string(N) + " K=" + std::to_string(K) + (gathered ? " gatheredA" : "") +
                            ", seed " + std::to_string(seed);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint8_t>> a(ws), wt(ws);
  std::vector<std::vector<float>> sA(ws), sW(ws);
  const float sharedA = randomFp8Scale(rng, -3.f, 3.f);
  for (int r = 0; r < ws; ++r) {
    a[r] = randomFp8(m * K, rng);
    wt[r] = randomFp8(N * K, rng);
    sA[r] = isBlock(kind) ? randomFp8Scales(nA, rng, -4.f, 2.f) : std::vector<float>{sharedA};
    sW[r] = isBlock(kind) ? randomFp8Scales(nW, rng, -4.f, 2.f) : std::vector<float>{randomFp8Scale(rng, -3.f, 3.f)};
  }
  // The gathered A and (block) its scale rows, in rank order.
  std::vector<uint8_t> gA;
  std::vector<float> gS;
  for (int r = 0; r < ws; ++r) {
    gA.insert(gA.end(), a[r].begin(), a[r].end());
    if (isBlock(kind)) gS.insert(gS.end(), sA[r].begin(), sA[r].end());
  }
  if (!isBlock(kind)) gS = {sharedA};
  std::vector<Bufs> b(ws);
  w.onEveryRank([&](int r) {
    cudaStream_t s = w.streams[r];
    Bufs& x = b[r];
    x.A = x.get(m * K);
    x.W = x.get(N * K);
    x.C = x.get(M * N * 2);
    x.sA = x.get(gS.size() * 4);  // the rank's own scales first; the gathered ones for the reference after the call
    x.sW = x.get(nW * 4);
    x.R = x.get(M * N * 4);
    if (gathered) x.G = x.get(M * K);
    ASSERT_TRUE(x.ok);
    x.upload(a[r], wt[r], sA[r], sW[r], s);
    poison(x.C, M * N * 2, s);
    if (gathered) poison(x.G, M * K, s);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    const mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(kind, static_cast<const float*>(x.sA), static_cast<const float*>(x.sW));
    EXPECT_EQ(mkcclSuccess, mkcclAllGatherGemmFp8(x.A, x.W, x.C, x.G, M, N, K, &sc, out, w.comms[r], s))
        << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    mkcclResult_t async = mkcclSuccess;
    mkcclCommGetAsyncError(w.comms[r], &async);
    EXPECT_EQ(mkcclSuccess, async) << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    // The reference on this rank's device: the gathered A (the call's A buffer is reused) and scales.
    void* refA = x.get(M * K);
    ASSERT_TRUE(x.ok);
    toDevice(refA, gA, s);
    toDevice(x.sA, gS, s);
    const float* dA = static_cast<const float*>(x.sA);
    const float* dW = static_cast<const float*>(x.sW);
    if (isBlock(kind)) fp8BlockRef(refA, x.W, dA, dW, static_cast<float*>(x.R), int(M), int(N), int(K), s);
    else fp8TensorRef(refA, x.W, dA, dW, static_cast<float*>(x.R), int(M), int(N), int(K), s);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    cudaFree(refA);
  });
  const double tol = tolFor(out, 1);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    const ErrStats e = compare(toHostDouble(b[r].C, M * N, out), toHostDouble(b[r].R, M * N, mkcclFloat32), tol);
    EXPECT_EQ(0u, e.wrong) << where << ", rank " << r << ": first wrong row "
                           << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ", max rel err " << e.maxRelErr;
    if (gathered) EXPECT_TRUE(bytesOf(b[r].G, M * K) == gA) << where << ", rank " << r << ": gatheredA";
    b[r].release();
  }
}

// GEMM+ReduceScatter (ar false: C = rows rank * m.. of P) or GEMM+AllReduce (C = P; M = mAr) with
// each rank's own A, W and scales; P = sum over ranks of the dequantised products.
void runReduce(NetWorld& w, bool ar, size_t m, size_t mAr, size_t N, size_t K, mkcclFp8ScaleKind_t kind,
               mkcclDataType_t out, const char* tuning, uint64_t seed) {
  const int ws = w.size();
  const size_t M = ar ? mAr : m * size_t(ws), rows = ar ? M : m;
  const size_t nA = isBlock(kind) ? fp8BlockScalesA(M, K) : 1, nW = isBlock(kind) ? fp8BlockScalesW(N, K) : 1;
  const std::string where = std::string(ar ? "GemmAllReduceFp8 " : "GemmReduceScatterFp8 ") + kindName(kind) +
                            " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                            ", tuning '" + tuning + "', seed " + std::to_string(seed);
  std::mt19937_64 rng(seed);
  std::vector<Bufs> b(ws);
  std::vector<std::vector<uint8_t>> a(ws), wt(ws);
  std::vector<std::vector<float>> sA(ws), sW(ws);
  for (int r = 0; r < ws; ++r) {
    a[r] = randomFp8(M * K, rng);
    wt[r] = randomFp8(N * K, rng);
    sA[r] = isBlock(kind) ? randomFp8Scales(nA, rng, -4.f, 2.f) : std::vector<float>{randomFp8Scale(rng, -3.f, 3.f)};
    sW[r] = isBlock(kind) ? randomFp8Scales(nW, rng, -4.f, 2.f) : std::vector<float>{randomFp8Scale(rng, -3.f, 3.f)};
  }
  w.onEveryRank([&](int r) {
    EXPECT_EQ(mkcclSuccess, mkcclSetTuning(w.comms[r], tuning));
    cudaStream_t s = w.streams[r];
    Bufs& x = b[r];
    x.A = x.get(M * K);
    x.W = x.get(N * K);
    x.C = x.get(rows * N * 2);
    x.sA = x.get(nA * 4);
    x.sW = x.get(nW * 4);
    x.R = x.get(M * N * 4);
    ASSERT_TRUE(x.ok);
    x.upload(a[r], wt[r], sA[r], sW[r], s);
    poison(x.C, rows * N * 2, s);
    const float* dA = static_cast<const float*>(x.sA);
    const float* dW = static_cast<const float*>(x.sW);
    if (isBlock(kind)) fp8BlockRef(x.A, x.W, dA, dW, static_cast<float*>(x.R), int(M), int(N), int(K), s);
    else fp8TensorRef(x.A, x.W, dA, dW, static_cast<float*>(x.R), int(M), int(N), int(K), s);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    const mkcclFp8Scales_t sc = MKCCL_FP8_SCALES_INIT(kind, dA, dW);
    EXPECT_EQ(mkcclSuccess, ar ? mkcclGemmAllReduceFp8(x.A, x.W, x.C, M, N, K, &sc, out, w.comms[r], s)
                               : mkcclGemmReduceScatterFp8(x.A, x.W, x.C, M, N, K, &sc, out, w.comms[r], s))
        << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    mkcclResult_t async = mkcclSuccess;
    mkcclCommGetAsyncError(w.comms[r], &async);
    EXPECT_EQ(mkcclSuccess, async) << where << ", rank " << r << ": " << mkcclGetLastError(w.comms[r]);
    mkcclSetTuning(w.comms[r], "");
  });
  std::vector<double> P(M * N, 0.0);
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    const std::vector<double> part = toHostDouble(b[r].R, M * N, mkcclFloat32);
    for (size_t i = 0; i < M * N; ++i) P[i] += part[i];
  }
  const double tol = tolFor(out, ws);
  std::vector<uint8_t> c0;
  for (int r = 0; r < ws; ++r) {
    cudaSetDevice(w.devs[r]);
    const size_t row0 = ar ? 0 : size_t(r) * rows;
    const std::vector<double> ref(P.begin() + row0 * N, P.begin() + (row0 + rows) * N);
    const ErrStats e = compare(toHostDouble(b[r].C, rows * N, out), ref, tol);
    EXPECT_EQ(0u, e.wrong) << where << ", rank " << r << ": first wrong row "
                           << (e.firstWrong == (size_t)-1 ? 0 : e.firstWrong / N) << ", max rel err " << e.maxRelErr;
    if (ar) {  // the same bits on every rank
      const std::vector<uint8_t> c = bytesOf(b[r].C, rows * N * 2);
      if (r == 0) c0 = c;
      else EXPECT_TRUE(c == c0) << where << ": rank " << r << "'s C differs from rank 0's";
    }
    b[r].release();
  }
}

class Fp8Net : public testing::TestWithParam<Split> {};

TEST_P(Fp8Net, AllGatherGemm) {
  NET_WORLD_OR_SKIP(w, GetParam());
  const uint64_t seed = seedOf();
  int i = 0;
  for (mkcclFp8ScaleKind_t kind : {mkcclFp8ScaleTensor, mkcclFp8ScaleBlock}) {
    runAg(w, 200, 392, 272, kind, false, mkcclBfloat16, seed + ++i);
    runAg(w, 512, 256, 1024, kind, true, kind == mkcclFp8ScaleBlock ? mkcclFloat16 : mkcclBfloat16, seed + ++i);
    if (testing::Test::HasFailure()) return;
  }
}

TEST_P(Fp8Net, GemmReduceScatterAndAllReduce) {
  NET_WORLD_OR_SKIP(w, GetParam());
  const uint64_t seed = seedOf();
  const int ws = w.size();
  int i = 100;
  for (const char* tuning : {"", "gemm_rs.net=sequential;gemm_ar.net=sequential"})
    for (mkcclFp8ScaleKind_t kind : {mkcclFp8ScaleTensor, mkcclFp8ScaleBlock}) {
      runReduce(w, false, 200, 0, 392, 272, kind, mkcclBfloat16, tuning, seed + ++i);
      runReduce(w, false, 512, 0, 512, 256, kind, mkcclFloat16, tuning, seed + ++i);
      runReduce(w, true, 0, 256 * size_t(ws), 392, 272, kind, mkcclBfloat16, tuning, seed + ++i);
      runReduce(w, true, 0, 333, 136, 512, kind, mkcclBfloat16, tuning, seed + ++i);  // not divisible: sequential
      if (testing::Test::HasFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(Splits, Fp8Net, MKCCL_NET_SPLITS);

// A 2 MiB window (512 KiB slots at 2 nodes) and a 1 MiB shard: mkcclInvalidUsage that names what to
// raise, on every rank, nothing enqueued; a shard that fits still runs.
TEST(Fp8NetErrors, AllGatherGemmShardLargerThanASlot) {
  NET_WORLD_OR_SKIP(w, (Split{2, 1}), 2 << 20);
  w.onEveryRank([&](int r) {
    cudaStream_t s = w.streams[r];
    const size_t K = 1024, N = 128, big = 1024, small = 128;
    void *A = nullptr, *W = nullptr, *C = nullptr, *sc = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&A, big * K));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&W, N * K));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&C, 2 * big * N * 2));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&sc, 8));
    cudaMemsetAsync(A, 0x38, big * K, s);  // e4m3 1.0
    cudaMemsetAsync(W, 0x38, N * K, s);
    const std::vector<float> ones = {1.5f, 1.5f};
    toDevice(sc, ones, s);
    const mkcclFp8Scales_t scales =
        MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, static_cast<const float*>(sc), static_cast<const float*>(sc) + 1);
    EXPECT_EQ(mkcclInvalidUsage,
              mkcclAllGatherGemmFp8(A, W, C, nullptr, 2 * big, N, K, &scales, mkcclBfloat16, w.comms[r], s));
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(w.comms[r])).find("MKCCL_NET_BUFFER_BYTES"))
        << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(mkcclSuccess,
              mkcclAllGatherGemmFp8(A, W, C, nullptr, 2 * small, N, K, &scales, mkcclBfloat16, w.comms[r], s))
        << mkcclGetLastError(w.comms[r]);
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    // Every element is 1.0 x 1.0 x 1.5 x 1.5 summed over K.
    const std::vector<double> c = toHostDouble(C, 2 * small * N, mkcclBfloat16);
    for (size_t i = 0; i < c.size(); i += 97) EXPECT_NEAR(2.25 * K, c[i], 2.25 * K * 1e-2) << "element " << i;
    for (void* p : {A, W, C, sc}) cudaFree(p);
  });
}

}  // namespace
