// Where stream-K's time goes, unit by unit: the split-K op of the engine (split_k.cuh) with
// stream-K parameters, its epilogue stamping %globaltimer and clock64 at four points of each of a
// CTA's units (a whole tile, or the piece of a cut tile that the CTA's k-range covers):
//
//   0 begin    consumer 0 starts the unit (Epilogue::begin)
//   1 data     consumer 0 has issued the unit's first k-block (its stage landed)
//   2 done     consumer 0's accumulators complete (the epilogue starts)
//   3 stored   consumer 0's epilogue done (a whole tile stored; a piece written and counted, and,
//              in the tile's last part, the others read and the tile stored)
//
// The same kernel runs each shape three ways: every tile whole (dpTiles = all), the stream-K split
// gemmStreamKSplit makes, and the split remainder (whole waves, then the last wave's tiles in
// uniform parts: gemmSplitRemainderPlan's form), so that the per-k-block rate, the wait for the
// first stage and the epilogue can be compared in one run. Checks the results against cuBLAS and the stamps'
// order; prints the profile.
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
#include "ops/gemm/stream_k_model.h"
#include "gemm_probe_util.cuh"
#include "test_util.h"
#include "tile_map.h"

namespace {

using namespace mkccl;
using namespace mkccl::gemmprobe;

constexpr int kUnits = 8;   // stamped units per CTA (later ones are not stamped)
constexpr int kPoints = 4;  // per unit

struct SkProbeParams : SplitKParams {
  unsigned long long* stamps;  // [CTA][kUnits][kPoints][2]: globaltimer (ns), clock64
  int* meta;                   // [CTA][kUnits][4]: tile, kBegin, kEnd, kind (0 whole, 1 piece, 2 last piece)
};

__device__ __forceinline__ void stampAt(const SkProbeParams& p, int unit, int point) {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  unsigned long long* s = p.stamps + ((static_cast<size_t>(blockIdx.x) * kUnits + unit) * kPoints + point) * 2;
  s[0] = ns;
  s[1] = static_cast<unsigned long long>(clock64());
}

template <class Cfg, class Op>
struct SkProbeEpilogue : SplitKEpilogue<Cfg, Op> {
  using Base = SplitKEpilogue<Cfg, Op>;
  int unit = 0;
  __device__ __forceinline__ SkProbeEpilogue(const GemmArgs& g_, const typename Op::Params& op_,
                                             const CUtensorMap* mapC, const SmemLayout<Cfg>& sm, int half_)
      : Base(g_, op_, mapC, sm, half_) {}
  __device__ __forceinline__ bool mine() const { return unit < kUnits && this->half == 0 && this->ec.tid == 0; }
  template <class Tile>
  __device__ __forceinline__ void begin(const Tile&) {
    if (mine()) stampAt(this->op, unit, 0);
  }
  __device__ __forceinline__ void afterKBlock(int kb) {
    if (kb == 0 && mine()) stampAt(this->op, unit, 1);
  }
  __device__ __forceinline__ void store(const float (&acc)[Cfg::kAcc], const SplitKTile& t) {
    if (mine()) stampAt(this->op, unit, 2);
    Base::store(acc, t);
    if (mine()) {
      stampAt(this->op, unit, 3);
      const volatile uint32_t* word =
          reinterpret_cast<const volatile uint32_t*>(__cvta_shared_to_generic(this->flagsAddr)) + 2;
      int* m = this->op.meta + (static_cast<size_t>(blockIdx.x) * kUnits + unit) * 4;
      m[0] = t.tile;
      m[1] = t.kBegin;
      m[2] = t.kEnd;
      m[3] = t.split < 0 ? 0 : (*word != 0 ? 2 : 1);
    }
    ++unit;
  }
};

struct SkProbeOp : SplitKGemmOp {
  using Params = SkProbeParams;
  template <class Cfg, class Op>
  using Epilogue = SkProbeEpilogue<Cfg, Op>;
};

using mkccl::test::smCount;
using Dev = mkccl::test::DeviceBuf;

// Fractions of a microsecond matter here, and how many units a phase covers.
std::string spread(const std::vector<double>& v) { return gemmprobe::spread(v, 2, true); }

enum Mode { kWhole, kStreamK, kRemainder };

template <int BN>
void probeOne(size_t M, size_t N, size_t K, Mode mode, double clkGHz) {
  using Cfg = GemmCfg<dev::Bf16, BN, EpilogueTmaStore>;
  const int sms = smCount();
  const int kBlocks = static_cast<int>(ceilDiv(K, 64));
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, BN);
  GemmPlan plan;
  plan.bn = BN;
  plan.clusterSize = 1;
  plan.splits = 0;
  if (mode == kStreamK) {
    const StreamKSplit s = gemmStreamKSplit(tiles, kBlocks, sms);
    ASSERT_GT(s.skTiles, 0) << "no stream-K region for this shape";
    plan.dpTiles = s.dpTiles;
    plan.skTiles = s.skTiles;
    plan.ctas = s.ctas;
  } else if (mode == kRemainder) {
    const int64_t full = tiles / sms, rest = tiles - full * sms;
    const int64_t s = std::min<int64_t>({rest > 0 ? sms / rest : 0, kRemainderMaxSplits, kBlocks / kStreamKMinKBlocks});
    if (s < 2) return;  // no remainder to split at this tile
    plan.splits = static_cast<int>(s);
    plan.dpTiles = static_cast<int>(full * sms);
    plan.ctas = static_cast<int>(full > 0 ? sms : rest * s);
  } else {
    plan.dpTiles = static_cast<int>(tiles);
    plan.skTiles = 0;
    plan.ctas = static_cast<int>(std::min<int64_t>(sms, tiles));
  }
  Dev A(M * K * 2), W(N * K * 2), C(M * N * 2), R(M * N * 2);
  Dev partials(static_cast<size_t>(2 * plan.ctas) * 2 * Cfg::kAcc * 128 * 4), counters(tiles * 2 * 4 + 64);
  const size_t nStamps = static_cast<size_t>(plan.ctas) * kUnits * kPoints * 2;
  Dev stamps(nStamps * 8), meta(static_cast<size_t>(plan.ctas) * kUnits * 4 * 4), fault(4);
  ASSERT_TRUE(A.p && W.p && C.p && R.p && partials.p && counters.p && stamps.p && meta.p && fault.p);
  cudaMemset(counters.p, 0, tiles * 2 * 4 + 64);
  cudaMemset(fault.p, 0, 4);
  fillOperands(A.p, W.p, N, C.p, M, N, K);

  alignas(64) CUtensorMap mapA, mapB, mapC;
  ASSERT_TRUE(test::encodeBf16(&mapA, A.p, M, K, 128));
  ASSERT_TRUE(test::encodeBf16(&mapB, W.p, N, K, BN));
  ASSERT_TRUE(test::encodeBf16(&mapC, C.p, M, N, 64));
  const GemmArgs g = gemmArgs(plan, M, N, K, C.p, fault.p);
  SkProbeParams p = splitKParams<SkProbeParams>(plan, partials.p, counters.p);
  p.dpTiles = plan.dpTiles;
  p.skTiles = plan.skTiles;
  p.stamps = static_cast<unsigned long long*>(stamps.p);
  p.meta = static_cast<int*>(meta.p);

  auto kernel = &persistentGemmKernel<Cfg, SkProbeOp>;
  cudaLaunchConfig_t cfg;
  ASSERT_EQ(cudaSuccess, launchConfig<Cfg>(kernel, plan.ctas, &cfg));
  auto launch = [&] { return cudaLaunchKernelEx(&cfg, kernel, mapA, mapB, mapC, g, p); };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaSuccess, launch());
  cudaMemsetAsync(stamps.p, 0, nStamps * 8);
  cudaMemsetAsync(meta.p, 0xff, static_cast<size_t>(plan.ctas) * kUnits * 4 * 4);
  ASSERT_EQ(cudaSuccess, launch());
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());

  ASSERT_NO_FATAL_FAILURE(expectMatchesCublas(A.p, W.p, C.p, R.p, M, N, K));

  std::vector<unsigned long long> s(nStamps);
  std::vector<int> mt(static_cast<size_t>(plan.ctas) * kUnits * 4);
  cudaMemcpy(s.data(), stamps.p, s.size() * 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(mt.data(), meta.p, mt.size() * 4, cudaMemcpyDeviceToHost);
  auto at = [&](int c, int u, int i, int w) {
    return static_cast<double>(s[((static_cast<size_t>(c) * kUnits + u) * kPoints + i) * 2 + w]);
  };
  auto mm = [&](int c, int u, int f) { return mt[(static_cast<size_t>(c) * kUnits + u) * 4 + f]; };
  double first = 1e30, last = 0;
  std::vector<double> wait[3], perKb[3], epi[3], kbs[3], endUs;
  for (int c = 0; c < plan.ctas; ++c) {
    double ce = 0;
    for (int u = 0; u < kUnits; ++u) {
      if (mm(c, u, 0) < 0) break;
      for (int i = 1; i < kPoints; ++i) EXPECT_LE(at(c, u, i - 1, 1), at(c, u, i, 1)) << "CTA " << c << " unit " << u;
      first = std::min(first, at(c, u, 0, 0));
      ce = std::max(ce, at(c, u, 3, 0));
      const int kind = mm(c, u, 3), nk = mm(c, u, 2) - mm(c, u, 1);
      kbs[kind].push_back(nk);
      wait[kind].push_back((at(c, u, 1, 1) - at(c, u, 0, 1)) / clkGHz / 1e3);
      if (nk > 1) perKb[kind].push_back((at(c, u, 2, 1) - at(c, u, 1, 1)) / (nk - 1) / clkGHz);
      epi[kind].push_back((at(c, u, 3, 1) - at(c, u, 2, 1)) / clkGHz / 1e3);
    }
    endUs.push_back(ce);
    last = std::max(last, ce);
  }
  for (double& v : endUs) v = (v - first) / 1e3;

  const double us = usPerCall([&] { launch(); });
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());

  const long long cut = mode == kRemainder ? static_cast<long long>(tiles - plan.dpTiles) : plan.skTiles;
  printf("SKPROBE %zux%zux%zu 128x%d %s: %d CTAs, %lld tiles (%d whole + %lld cut, %d parts), %d k-blocks; %.1f us "
         "per call (20 back to back); span first begin -> last stored %.1f us\n",
         M, N, K, BN, mode == kStreamK ? "stream-K" : mode == kRemainder ? "remainder" : "whole", plan.ctas,
         static_cast<long long>(tiles), plan.dpTiles, cut, plan.splits, kBlocks, us,
         (last - first) / 1e3);
  printf("  CTA last stored after first begin (us): %s\n", spread(endUs).c_str());
  const char* kn[3] = {"whole tile", "piece", "last piece"};
  for (int k = 0; k < 3; ++k) {
    if (kbs[k].empty()) continue;
    printf("  %-10s k-blocks %s\n", kn[k], spread(kbs[k]).c_str());
    printf("  %-10s wait for first stage (us) %s\n", kn[k], spread(wait[k]).c_str());
    printf("  %-10s mainloop per k-block (ns) %s\n", kn[k], spread(perKb[k]).c_str());
    printf("  %-10s epilogue (us) %s\n", kn[k], spread(epi[k]).c_str());
  }
  for (int c : {0, plan.ctas / 2, plan.ctas - 1}) {
    printf("  CTA %3d:", c);
    for (int u = 0; u < kUnits && mm(c, u, 0) >= 0; ++u)
      printf(" [t%d k%d-%d %s: %.1f %.1f %.1f %.1f]", mm(c, u, 0), mm(c, u, 1), mm(c, u, 2),
             mm(c, u, 3) == 0 ? "W" : mm(c, u, 3) == 1 ? "P" : "L", (at(c, u, 0, 0) - first) / 1e3,
             (at(c, u, 1, 0) - first) / 1e3, (at(c, u, 2, 0) - first) / 1e3, (at(c, u, 3, 0) - first) / 1e3);
    printf("\n");
  }
  fflush(stdout);
}

TEST(GemmStreamKProbe, OddShapes) {
  MKCCL_REQUIRE_GPUS(1);
  int dev = 0, khz = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev);
  const double ghz = khz / 1e6;
  printf("SKPROBE clock %.3f GHz (cycles converted with it)\n", ghz);
  const size_t shapes[][3] = {{2000, 2056, 4096}, {1000, 1032, 4096}, {4097, 4104, 4096}, {333, 520, 1000}};
  for (const auto& sh : shapes) {
    for (Mode m : {kWhole, kRemainder}) {
      probeOne<256>(sh[0], sh[1], sh[2], m, ghz);
      probeOne<192>(sh[0], sh[1], sh[2], m, ghz);
      probeOne<128>(sh[0], sh[1], sh[2], m, ghz);
    }
  }
  probeOne<256>(2000, 2056, 4096, kStreamK, ghz);
}

}  // namespace
