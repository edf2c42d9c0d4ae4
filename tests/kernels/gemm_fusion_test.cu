// The GEMM engine's fusion extension points on one GPU, through a small fused op built the way
// the real ones are: comm CTAs of the same launch copy A, chunk by chunk (last chunk first), into
// the buffer the GEMM's tensor map reads, raising a flag per chunk; the producer's load hook waits
// for the chunk's flag; the epilogue adds into fp32 C (EpilogueRegAdd, 128 x 256 tiles) or stores
// bf16 C by TMA (EpilogueTmaStore, 128 x 128 tiles); the tile hook counts tiles.
// Then a chunk that never arrives: the wait times out, the kernel drains and ends, the error is
// recorded, no internal barrier times out.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>
#include "kernels/device/signal.cuh"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/abi/devcomm.h"
#include "test_util.h"
#include "tile_map.h"

namespace {

using namespace mkccl;

struct ChunkedCopyOp : GemmOpDefaults {
  struct Params {
    DevComm comm;
    const uint4* src;  // A as the user gave it
    uint4* dst;        // where the GEMM reads A (its tensor map)
    int64_t M;
    int64_t rowWords;  // 16-byte words per row of A
    int mBlocks;
    int missingChunk;  // never copied (-1: none)
    unsigned long long* tilesDone;
  };

  __device__ static uint64_t* chunkFlag(const Params& p, int mb) {
    return dev::flagsOf(p.comm, p.comm.localRank) + kOpFlagSlot + mb;
  }

  static constexpr bool kCommCtas = true;
  __device__ static void commCta(const GemmArgs& g, const Params& p, int cta, uint32_t, uint32_t) {
    for (int i = cta; i < p.mBlocks; i += g.nCommCtas) {
      const int mb = p.mBlocks - 1 - i;
      if (mb == p.missingChunk) continue;
      const int64_t row0 = static_cast<int64_t>(mb) * 128;
      const int64_t rows = p.M - row0 < 128 ? p.M - row0 : 128;
      const int64_t words = rows * p.rowWords;
      for (int64_t j = threadIdx.x; j < words; j += blockDim.x) p.dst[row0 * p.rowWords + j] = p.src[row0 * p.rowWords + j];
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) dev::storeRelease(chunkFlag(p, mb), dev::flagValue(p.comm.seq));
      __syncthreads();
    }
  }

  static constexpr bool kLoadHook = true;
  __device__ static bool beforeLoadA(const GemmArgs&, const Params& p, int mb, int, int kb) {
    if (kb != 0 || mb >= p.mBlocks) return true;  // a tile's rows arrive whole; padding rows are never read
    if (!dev::waitGeq(p.comm, chunkFlag(p, mb), dev::flagValue(p.comm.seq), -1, kSiteGemmChunk)) return false;
    dev::fenceProxyAsync();  // the flag (generic proxy) before the TMA read of the chunk (async proxy)
    return true;
  }

  static constexpr bool kTileHook = true;
  __device__ static void tileStored(const GemmArgs&, const Params& p, int mb, int, int, bool drain) {
    if (!drain && mb < p.mBlocks) atomicAdd(p.tilesDone, 1ull);
  }
};

using AddCfg = GemmCfg<dev::Bf16, 256, EpilogueRegAdd>;
using StoreCfg = GemmCfg<dev::Bf16, 128, EpilogueTmaStore>;

using mkccl::test::encodeBf16;

struct FusedRun {
  size_t M, N, K;
  int cluster, computeCtas, rowRotate, missingChunk;
  uint64_t timeoutNs;
};

struct Outcome {
  std::vector<double> got, want;
  unsigned long long tiles = 0, tilesExpected = 0;
  DevError err{};
  int fault = 0;
  double seconds = 0;
};

// Cfg = AddCfg: C (fp32, random) += A . W^T. Cfg = StoreCfg: C (bf16, poisoned) = A . W^T.
template <class Cfg>
void runFused(const FusedRun& r, Outcome* out) {
  constexpr bool kAdd = std::is_same<typename Cfg::Epilogue, EpilogueRegAdd>::value;
  const mkcclDataType_t outType = kAdd ? mkcclFloat32 : mkcclBfloat16;
  const size_t outBytes = kAdd ? 4 : 2;
  const int mBlocks = static_cast<int>((r.M + 127) / 128), nBlocks = static_cast<int>((r.N + Cfg::BN - 1) / Cfg::BN);
  void *A, *Ad, *W, *C, *R, *ws, *tiles;
  CUDA_OK(cudaMalloc(&A, r.M * r.K * 2));
  CUDA_OK(cudaMalloc(&Ad, r.M * r.K * 2));
  CUDA_OK(cudaMalloc(&W, r.N * r.K * 2));
  CUDA_OK(cudaMalloc(&C, r.M * r.N * outBytes));
  CUDA_OK(cudaMalloc(&R, r.M * r.N * outBytes));
  const size_t flagsBytes = 64 * 1024;
  CUDA_OK(cudaMalloc(&ws, flagsBytes));
  CUDA_OK(cudaMemset(ws, 0, flagsBytes));
  CUDA_OK(cudaMalloc(&tiles, 8));
  CUDA_OK(cudaMemset(tiles, 0, 8));
  DevError* errHost = nullptr;
  CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&errHost), sizeof(DevError) + 64, cudaHostAllocMapped));
  memset(errHost, 0, sizeof(DevError) + 64);
  int* faultHost = reinterpret_cast<int*>(reinterpret_cast<char*>(errHost) + sizeof(DevError));
  DevError* errDev = nullptr;
  CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&errDev), errHost, 0));
  int* faultDev = reinterpret_cast<int*>(reinterpret_cast<char*>(errDev) + sizeof(DevError));

  const uint64_t seed = mkccl::test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  mkccl::test::fillRandom(A, r.M * r.K, mkcclBfloat16, seed);
  mkccl::test::fillRandom(W, r.N * r.K, mkcclBfloat16, seed + 1);
  if (kAdd) mkccl::test::fillRandom(C, r.M * r.N, mkcclFloat32, seed + 2);
  else mkccl::test::poison(C, r.M * r.N * outBytes);
  mkccl::test::poison(Ad, r.M * r.K * 2);
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<double> c0 =
      kAdd ? mkccl::test::toHostDouble(C, r.M * r.N, mkcclFloat32) : std::vector<double>(r.M * r.N, 0.0);

  alignas(64) CUtensorMap mapA, mapB, mapC;
  memset(&mapC, 0, sizeof(mapC));
  ASSERT_TRUE(encodeBf16(&mapA, Ad, r.M, r.K, 128));
  ASSERT_TRUE(encodeBf16(&mapB, W, r.N, r.K, static_cast<uint32_t>(Cfg::BN / r.cluster)));
  if (!kAdd) ASSERT_TRUE(encodeBf16(&mapC, C, r.M, r.N, 64));

  GemmArgs g;
  memset(&g, 0, sizeof(g));
  g.M = r.M;
  g.N = r.N;
  g.K = r.K;
  g.kBlocks = static_cast<int>((r.K + 63) / 64);
  g.clusterSize = r.cluster;
  g.nCommCtas = 2;
  g.sched = {mBlocks, nBlocks, r.cluster, 8 / r.cluster, r.rowRotate};
  g.outType = outType;
  g.C = C;
  g.ldc = static_cast<int64_t>(r.N);
  g.waitTimeoutNs = r.timeoutNs + 20ull * 1000 * 1000 * 1000;  // longer than any hook wait
  g.fault = faultDev;

  ChunkedCopyOp::Params p;
  memset(&p, 0, sizeof(p));
  p.comm.rank = 0;
  p.comm.nranks = 1;
  p.comm.localRank = 0;
  p.comm.localRanks = 1;
  p.comm.nNodes = 1;
  p.comm.seq = 1;
  p.comm.timeoutNs = r.timeoutNs;
  p.comm.peers[0] = static_cast<char*>(ws);
  p.comm.flagsBytes = flagsBytes;
  p.comm.err = errDev;
  p.src = static_cast<const uint4*>(A);
  p.dst = static_cast<uint4*>(Ad);
  p.M = static_cast<int64_t>(r.M);
  p.rowWords = static_cast<int64_t>(r.K * 2 / 16);
  p.mBlocks = mBlocks;
  p.missingChunk = r.missingChunk;
  p.tilesDone = static_cast<unsigned long long*>(tiles);

  auto kernel = &persistentGemmKernel<Cfg, ChunkedCopyOp>;  // the hooks' instantiation
  CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::kSmemBytes)));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(g.nCommCtas + r.computeCtas));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(r.cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  const auto t0 = std::chrono::steady_clock::now();
  CUDA_OK(cudaLaunchKernelEx(&cfg, kernel, mapA, mapB, mapC, g, p));
  CUDA_OK(cudaDeviceSynchronize());
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  mkccl::test::cublasGemmRef(A, W, R, r.M, r.N, r.K, mkcclBfloat16, outType);
  CUDA_OK(cudaDeviceSynchronize());
  out->got = mkccl::test::toHostDouble(C, r.M * r.N, outType);
  out->want = mkccl::test::toHostDouble(R, r.M * r.N, outType);
  for (size_t i = 0; i < out->want.size(); ++i) out->want[i] += c0[i];
  CUDA_OK(cudaMemcpy(&out->tiles, tiles, 8, cudaMemcpyDeviceToHost));
  out->tilesExpected = 2ull * mBlocks * nBlocks;
  out->err = *errHost;
  out->fault = *faultHost;
  for (void* q : {A, Ad, W, C, R, ws, tiles}) cudaFree(q);
  cudaFreeHost(errHost);
}

using mkccl::test::smCount;

template <class Cfg>
void checkFusedRuns(double tol) {
  const uint64_t second = 1000ull * 1000 * 1000;
  // Odd M-block counts (padding CTA with a cluster of 2), N and K tails, a budget of SMs smaller
  // than the tile count (persistent loop), rotated row order.
  const FusedRun runs[] = {{1000, 776, 520, 1, 30, 0, -1, 10 * second},  {1100, 776, 520, 2, 30, 3, -1, 10 * second},
                      {2176, 520, 1032, 2, 16, 5, -1, 10 * second}, {129, 8, 64, 2, 2, 0, -1, 10 * second},
                      {1100, 1024, 4096, 2, smCount() - 2 - smCount() % 2, 0, -1, 10 * second}};
  for (const FusedRun& r : runs) {
    SCOPED_TRACE(std::to_string(r.M) + "x" + std::to_string(r.N) + "x" + std::to_string(r.K) + " cluster " +
                 std::to_string(r.cluster) + " ctas " + std::to_string(r.computeCtas));
    Outcome o;
    runFused<Cfg>(r, &o);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(o.err.code, 0) << "site " << o.err.site;
    EXPECT_EQ(o.fault, 0);
    EXPECT_EQ(o.tiles, o.tilesExpected);
    const mkccl::test::ErrStats e = mkccl::test::compare(o.got, o.want, tol);
    EXPECT_EQ(e.wrong, 0u) << "first wrong " << e.firstWrong;
    EXPECT_LE(e.maxRelErr, tol);
  }
}

TEST(GemmFusion, CommRoleLoadHookAddEpilogueTileHook) {
  MKCCL_REQUIRE_GPUS(1);
  checkFusedRuns<AddCfg>(1e-3);
}

TEST(GemmFusion, CommRoleLoadHookTmaStoreTileHook) {
  MKCCL_REQUIRE_GPUS(1);
  checkFusedRuns<StoreCfg>(1e-2);
}

// A chunk that never arrives: its waits time out (recorded as mkcclTimeout at the chunk site), the
// CTAs drain, the launch ends soon after the timeout, and no pipeline barrier gives up.
TEST(GemmFusion, MissingChunkTimesOutAndDrains) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t ms = 1000ull * 1000;
  for (int cluster : {1, 2}) {
    SCOPED_TRACE("cluster " + std::to_string(cluster));
    Outcome o;
    runFused<AddCfg>({1100, 776, 520, cluster, 30, 0, 3, 200 * ms}, &o);
    if (HasFatalFailure()) return;
    EXPECT_EQ(o.err.code, static_cast<int>(mkcclTimeout));
    EXPECT_EQ(o.err.site, static_cast<int>(kSiteGemmChunk));
    EXPECT_EQ(o.fault, 0) << "an internal pipeline wait gave up";
    EXPECT_LT(o.tiles, o.tilesExpected);
    EXPECT_LT(o.seconds, 10.0);
  }
}

}  // namespace
