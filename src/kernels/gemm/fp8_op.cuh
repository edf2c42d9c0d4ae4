// fp8 (e4m3) GEMM on the engine's one body: two ops that differ only in their consumer mainloop.
//
// The pipeline, loads and epilogues are the bf16 engine's, unchanged: the host encodes A and W as
// 16-bit tensor maps of K / 2 columns, so a 64-wide 16-bit k-block (128 bytes, one 128B-swizzle
// row) is a 128-wide e4m3 k-block, and the mainloops issue 4 x wgmma m64nBNk32 e4m3 per k-block
// (wgmma_fp8.cuh). A k-block is also exactly one DeepSeek-V3 scale block along K.
//
//   Fp8TensorOp  per-tensor scales: the engine's mainloop (one wgmma group in flight, the whole of
//                K in the wgmma accumulators), then acc *= scaleA[0] * scaleW[0] before the epilogue.
//   Fp8BlockOp   block scales, BN = 128 (one W scale block per tile): each k-block accumulates on
//                the tensor cores into `part` (scale-d 0 on its first k32 step), then is promoted:
//                acc += part * scaleA[row, kb] * scaleW[n block, kb] in fp32. Promoting every 128
//                of K bounds the error of the tensor cores' narrower fp8 accumulation (DeepSeek-V3)
//                and is what the per-block scales require anyway. The promotion needs the k-block's
//                result, so each warpgroup waits for its own wgmma group (wait_group 0); the other
//                consumer warpgroup's wgmma keeps the tensor cores busy meanwhile.
#pragma once
#include <stdint.h>
#include <type_traits>
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/wgmma.cuh"
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "kernels/gemm/mainloop.cuh"

namespace mkccl {

// Device pointers to the scales (mkcclFp8Scales_t) and the scale row pitch.
struct Fp8Params {
  const float* scaleA;  // tensor: [1]; block: [M][kScaleBlocks]
  const float* scaleW;  // tensor: [1]; block: [ceil(N / 128)][kScaleBlocks]
  int64_t kScaleBlocks; // ceil(K / 128)
};

struct Fp8TensorOp : GemmOpDefaults {
  using Params = Fp8Params;
  static constexpr bool kMainloop = true;

  template <class Cfg, class Tile, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                  int consumer, uint32_t lane, uint32_t ctaRank, const Tile&,
                                                  Hook hook) {
    static_assert(std::is_same<typename Cfg::In, dev::E4m3>::value, "fp8 configuration expected");
    const float s = __ldg(p.scaleA) * __ldg(p.scaleW);  // L2 hits, issued before the k-loop
    if (!consumerMainloop<Cfg>(acc, pipe, g, sm, consumer, lane, ctaRank, hook)) return false;
#pragma unroll
    for (int i = 0; i < Cfg::kAcc; ++i) acc[i] *= s;
    return true;
  }
};

struct Fp8BlockOp : GemmOpDefaults {
  using Params = Fp8Params;
  static constexpr bool kMainloop = true;

  template <class Cfg, class Tile, class Hook>
  __device__ __forceinline__ static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                  const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                                  int consumer, uint32_t lane, uint32_t ctaRank, const Tile& t,
                                                  Hook hook) {
    static_assert(std::is_same<typename Cfg::In, dev::E4m3>::value, "fp8 configuration expected");
    static_assert(Cfg::BN == 128, "one W scale block (128 columns) per tile");
    using Mma = dev::Wgmma<Cfg::BN, dev::E4m3>;
    const volatile int* abortFlag = reinterpret_cast<const volatile int*>(__cvta_shared_to_generic(sm.flags()));
    const uint32_t aOffset = static_cast<uint32_t>(consumer) * 64u * (Cfg::BK * 2);

    // This thread's two rows (wgmma.cuh's D layout: 16 w + l / 4, and 8 below); rows past M read
    // the last row's scales (their A rows are TMA's zero fill, the products are clipped anyway).
    const uint32_t warp = (threadIdx.x % 128u) >> 5;
    const int64_t row = static_cast<int64_t>(t.m) * Cfg::BM + consumer * 64 + warp * 16 + (lane >> 2);
    const float* sa0 = p.scaleA + (row < g.M ? row : g.M - 1) * p.kScaleBlocks;
    const float* sa1 = p.scaleA + (row + 8 < g.M ? row + 8 : g.M - 1) * p.kScaleBlocks;
    const float* sw = p.scaleW + static_cast<int64_t>(t.n) * p.kScaleBlocks;

#pragma unroll
    for (int i = 0; i < Cfg::kAcc; ++i) acc[i] = 0.f;
    float part[Cfg::kAcc];
    // Scales of k-block kb + 1 are loaded while k-block kb runs: their latency hides behind it.
    float nextA0 = __ldg(sa0), nextA1 = __ldg(sa1), nextW = __ldg(sw);
    for (int kb = 0; kb < g.kBlocks; ++kb) {
      const uint32_t s = pipe.stage;
      if (!dev::mbarWait(sm.full(s), pipe.phase, g.waitTimeoutNs, abortFlag)) {
        gemmFault<Cfg>(g, sm, ctaRank, kGemmFaultConsumer);
        return false;
      }
      const float s0 = nextA0 * nextW, s1 = nextA1 * nextW;
      if (kb + 1 < g.kBlocks) {
        nextA0 = __ldg(sa0 + kb + 1);
        nextA1 = __ldg(sa1 + kb + 1);
        nextW = __ldg(sw + kb + 1);
      }
      const uint64_t descA = dev::smemDescSw128(sm.a(s) + aOffset);
      const uint64_t descB = dev::smemDescSw128(sm.b(s));
      dev::fenceAccumulators(part);
      dev::wgmmaFence();
#pragma unroll
      for (int k = 0; k < Cfg::BK / 16; ++k)
        Mma::mma(part, descA + k * dev::kDescK16Step, descB + k * dev::kDescK16Step, k != 0 ? 1u : 0u);
      dev::wgmmaCommit();
      hook(kb);
      dev::wgmmaWait<0>();
      dev::fenceAccumulators(part);
      consumerRelease(sm.empty(s), g.clusterSize, lane);  // the stage is read: free it at once
      pipe.advance();
      // Registers {4j, 4j+1} are row l/4, {4j+2, 4j+3} the row 8 below (wgmma.cuh).
#pragma unroll
      for (int i = 0; i < Cfg::kAcc; ++i) acc[i] = fmaf(part[i], (i & 2) ? s1 : s0, acc[i]);
    }
    return true;
  }
};

}  // namespace mkccl
