// Where a decode-sized GEMM's time goes, CTA by CTA: the split-K op of the engine (split_k.cuh) with
// hooks that stamp %globaltimer and clock64 at six points of every CTA, on the plans the library
// makes for decode shapes. The hooks do not change the kernel's work (one store of two words per
// point), so the stamped kernel stands for the library's.
//
//   0 start      thread 0, barriers initialised (Op::start)
//   1 first      consumer 0 has issued the first k-block's wgmma (its data landed)
//   2 mainloop   consumer 0's accumulators complete (before the split-K epilogue)
//   3 stored     consumer 0's epilogue done (partials counted, or the last part's sum stored)
//   4 finish     consumer 0 after Epilogue::finish (the last TMA store has read shared memory)
//   5 end        thread 0 after the CTA's last sync (Op::end)
// and inside the split-K epilogue (Op::epilogueStamp; split units only, else left 0):
//   6 partials   the part's partials written (after the warpgroup's barrier)
//   7 counted    the part counted in (after the atomic and the second barrier)
//   8 summed     the last part's sum of the other parts' partials done (the last part only)
//
// Checks: the results against cuBLAS, and every CTA's stamps in order. Prints, per shape, the
// spread of each phase over the CTAs, the kernel's span against a marker kernel before and after,
// and the stamped kernel's time per call against mkcclGemm's (20 calls back to back each).
#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/gemm/split_k.cuh"
#include "ops/gemm/gemm_plan_model.h"
#include "ops/gemm/split_k_model.h"
#include "gemm_probe_util.cuh"
#include "test_util.h"
#include "tile_map.h"

namespace {

using namespace mkccl;
using namespace mkccl::gemmprobe;

constexpr int kPoints = 6;   // stamps 0..5, in order in every CTA
constexpr int kStamps = 9;   // with the epilogue's 6..8

struct ProbeParams : SplitKParams {
  unsigned long long* stamps;  // [CTA][kStamps][2]: globaltimer (ns), clock64
};

__device__ __forceinline__ void stamp(const ProbeParams& p, int point) {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  unsigned long long* s = p.stamps + (static_cast<size_t>(blockIdx.x) * kStamps + point) * 2;
  s[0] = ns;
  s[1] = static_cast<unsigned long long>(clock64());
}

// The split-K epilogue with stamps 1-4 from consumer 0's thread 0, on the CTA's first unit.
template <class Cfg, class Op>
struct ProbeEpilogue : SplitKEpilogue<Cfg, Op> {
  using Base = SplitKEpilogue<Cfg, Op>;
  bool first = true;
  __device__ __forceinline__ ProbeEpilogue(const GemmArgs& g_, const typename Op::Params& op_, const CUtensorMap* mapC,
                                           const SmemLayout<Cfg>& sm, int half_)
      : Base(g_, op_, mapC, sm, half_) {}
  __device__ __forceinline__ bool mine() const { return first && this->half == 0 && this->ec.tid == 0; }
  __device__ __forceinline__ void afterKBlock(int kb) {
    if (kb == 0 && mine()) stamp(this->op, 1);
  }
  __device__ __forceinline__ void store(const float (&acc)[Cfg::kAcc], const SplitKTile& t) {
    if (mine()) stamp(this->op, 2);
    Base::store(acc, t);
    if (mine()) stamp(this->op, 3);
    first = false;
  }
  __device__ __forceinline__ void finish() {
    Base::finish();
    if (this->half == 0 && this->ec.tid == 0) stamp(this->op, 4);
  }
};

struct ProbeOp : SplitKGemmOp {
  using Params = ProbeParams;
  template <class Cfg, class Op>
  using Epilogue = ProbeEpilogue<Cfg, Op>;
  static constexpr bool kStart = true, kEnd = true;
  static constexpr bool kEpilogueStamps = true;
  __device__ static void epilogueStamp(const Params& p, int point) { stamp(p, kPoints + point); }
  __device__ static void start(const GemmArgs&, const Params& p, uint32_t) { stamp(p, 0); }
  __device__ static void end(const GemmArgs&, const Params& p) { stamp(p, 5); }
};

using Cfg = GemmCfg<dev::Bf16, 128, EpilogueTmaStore>;

__global__ void markTime(unsigned long long* out) {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  *out = ns;
}

using mkccl::test::smCount;
using Dev = mkccl::test::DeviceBuf;

void probe(size_t M, size_t N, size_t K) {
  SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
  const int sms = smCount();
  const GemmPlan plain = gemmPlanModel(M, N, K, GemmVariant::Auto, sms, sms / 2);
  int device = 0;
  cudaGetDevice(&device);
  // 128x1: the split of 128 x 128 tiles this probe's kernel runs (auto may take 128 x 64 parts).
  GemmPlan plan = gemmSplitKPlan(plain, M, N, K, GemmVariant::F128C1, 0, sms, 2 * sms,
                                 splitKRatesFor(gemmHbmPeakBytesPerUs(device)));
  if (plan.splits <= 1) {  // whole tiles through the split-K op (the library may pick another tile)
    plan.splits = 1;
    plan.ctas = static_cast<int>(std::min<int64_t>(sms, ceilDiv(M, 128) * ceilDiv(N, 128)));
  }
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, 128);
  // Copies of W enough to span twice the L2, used in turn, so that every call streams W from HBM
  // as a decode step does (each layer's weights are read once).
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  const size_t wBytes = N * K * 2;
  const int copies = static_cast<int>(std::min<size_t>(16, 1 + 2 * static_cast<size_t>(l2) / wBytes));
  Dev A(M * K * 2), W(wBytes * copies), C(M * N * 2), R(M * N * 2);
  Dev partials(static_cast<size_t>(tiles) * plan.splits * 2 * Cfg::kAcc * 128 * 4), counters(tiles * 2 * 4);
  Dev stamps(static_cast<size_t>(plan.ctas) * kStamps * 2 * 8), marks(16), fault(4);
  ASSERT_TRUE(A.p && W.p && C.p && R.p && partials.p && counters.p && stamps.p && marks.p && fault.p);
  cudaMemset(counters.p, 0, tiles * 2 * 4);
  cudaMemset(fault.p, 0, 4);
  fillOperands(A.p, W.p, N * copies, C.p, M, N, K);

  alignas(64) CUtensorMap mapA, mapC;
  std::vector<CUtensorMap> mapsB(copies);
  auto wCopy = [&](int i) { return static_cast<const char*>(W.p) + static_cast<size_t>(i % copies) * wBytes; };
  const uint32_t aRows = M < 128 ? static_cast<uint32_t>((M + 7) / 8 * 8) : 128;
  ASSERT_TRUE(test::encodeBf16(&mapA, A.p, M, K, aRows));
  for (int i = 0; i < copies; ++i) ASSERT_TRUE(test::encodeBf16(&mapsB[i], wCopy(i), N, K, 128));
  ASSERT_TRUE(test::encodeBf16(&mapC, C.p, M, N, 64));
  GemmArgs g = gemmArgs(plan, M, N, K, C.p, fault.p);
  g.aBoxRows = aRows < 128 ? static_cast<int>(aRows) : 0;
  ProbeParams p = splitKParams<ProbeParams>(plan, partials.p, counters.p);
  p.stamps = static_cast<unsigned long long*>(stamps.p);

  auto kernel = &persistentGemmKernel<Cfg, ProbeOp>;
  cudaLaunchConfig_t cfg;
  ASSERT_EQ(cudaSuccess, launchConfig<Cfg>(kernel, plan.ctas, &cfg));
  int call = 0;  // which copy of W the next call reads
  auto launch = [&] { return cudaLaunchKernelEx(&cfg, kernel, mapA, mapsB[call++ % copies], mapC, g, p); };
  for (int i = 0; i < copies; ++i) ASSERT_EQ(cudaSuccess, launch());
  unsigned long long* mk = static_cast<unsigned long long*>(marks.p);
  // Zeroed before the stamped launch: stamps 6..8 are written only by split units (8 only by a
  // tile's last part, which may differ from the warm-up launches').
  cudaMemsetAsync(stamps.p, 0, static_cast<size_t>(plan.ctas) * kStamps * 2 * 8);
  markTime<<<1, 1>>>(mk);
  ASSERT_EQ(cudaSuccess, launch());
  markTime<<<1, 1>>>(mk + 1);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());

  ASSERT_NO_FATAL_FAILURE(expectMatchesCublas(A.p, wCopy(call - 1), C.p, R.p, M, N, K));

  std::vector<unsigned long long> s(static_cast<size_t>(plan.ctas) * kStamps * 2), m(2);
  cudaMemcpy(s.data(), stamps.p, s.size() * 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(m.data(), marks.p, 16, cudaMemcpyDeviceToHost);
  auto ns = [&](int c, int i) { return static_cast<double>(s[(static_cast<size_t>(c) * kStamps + i) * 2]); };
  auto clk = [&](int c, int i) { return static_cast<double>(s[(static_cast<size_t>(c) * kStamps + i) * 2 + 1]); };
  double first = 1e30, last = 0;
  for (int c = 0; c < plan.ctas; ++c) {
    first = std::min(first, ns(c, 0));
    last = std::max(last, ns(c, 5));
    for (int i = 1; i < kPoints; ++i) EXPECT_LE(clk(c, i - 1), clk(c, i)) << "CTA " << c << " point " << i;
  }
  std::vector<double> skew, ph[kPoints], endNs, written, counted, summed, stored;
  for (int c = 0; c < plan.ctas; ++c) {
    skew.push_back(ns(c, 0) - first);
    endNs.push_back(last - ns(c, 5));
    for (int i = 1; i < kPoints; ++i) ph[i].push_back(clk(c, i) - clk(c, i - 1));
    if (clk(c, 6) == 0) continue;  // a whole tile: no split-K steps
    written.push_back(clk(c, 6) - clk(c, 2));
    counted.push_back(clk(c, 7) - clk(c, 6));
    if (clk(c, 8) == 0) continue;  // not the tile's last part
    summed.push_back(clk(c, 8) - clk(c, 7));
    stored.push_back(clk(c, 3) - clk(c, 8));
  }

  // Time per call, 20 back to back: the stamped kernel, then mkcclGemm on the same operands.
  const double probeUs = usPerCall([&] { launch(); });
  const double libUs = usPerCall([&] { mkcclGemm(A.p, wCopy(call++), C.p, M, N, K, mkcclBfloat16, mkcclBfloat16, 0); });
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());

  printf("PROBE %zux%zux%zu: %d CTAs, K in %d part(s); per call (W from HBM, %d copies): stamped %.1f us, "
         "mkcclGemm %.1f us\n", M, N, K, plan.ctas, plan.splits, copies, probeUs, libUs);
  printf("  marker -> first CTA start %.0f ns; first start -> last end %.0f ns; last end -> marker %.0f ns\n",
         first - static_cast<double>(m[0]), last - first, static_cast<double>(m[1]) - last);
  printf("  CTA start after the first (ns): %s\n", spread(skew).c_str());
  printf("  CTA end before the last   (ns): %s\n", spread(endNs).c_str());
  const char* names[kPoints] = {"", "start -> first data", "-> mainloop done", "-> epilogue done", "-> finish",
                                "-> end"};
  for (int i = 1; i < kPoints; ++i) printf("  %-22s (cycles): %s\n", names[i], spread(ph[i]).c_str());
  if (!written.empty()) {
    printf("  epilogue, every part: partials written %s, counted %s\n", spread(written).c_str(),
           spread(counted).c_str());
    if (!summed.empty())
      printf("  epilogue, last parts (%zu): summed %s, stored %s\n", summed.size(), spread(summed).c_str(),
             spread(stored).c_str());
  }
}

TEST(GemmProbe, DecodeShapes) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t shapes[][3] = {{1, 1024, 1024}, {1, 4096, 4096}, {64, 4096, 4096}, {1, 8192, 8192}, {128, 8192, 8192}};
  for (const auto& sh : shapes) probe(sh[0], sh[1], sh[2]);
}

}  // namespace
