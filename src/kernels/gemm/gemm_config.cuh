// Compile-time configuration of one GEMM kernel: tile shape, warp roles, register split, pipeline
// depth and the shared-memory map. One CTA computes a 128 x BN output tile with two consumer
// warpgroups (64 x BN each, wgmma m64nBNk16) fed by one producer warpgroup (a single TMA thread).
#pragma once
#include <stdint.h>
#include "kernels/device/wgmma.cuh"

namespace mkccl {

template <class InT, int kBN, class Epi>
struct GemmCfg {
  using In = InT;        // dev::Bf16 or dev::F16 (A and W)
  using Epilogue = Epi;  // EpilogueTmaStore, EpilogueRegStore, EpilogueRegAdd (epilogue.cuh)
  static constexpr int BM = 128, BN = kBN, BK = 64;  // BK * 2 bytes = one 128 B swizzle row
  // wgmma n <= 256. The fused kernels use 128 and 256; the fp8 block-scaled kernel (fp8_op.cuh)
  // also 192; the plain GEMM every multiple of 16 from 64 (widths that fill the GPU's waves of
  // tiles: gemm_plan_model.h), 16 so that a 2-CTA cluster's half of the W box is whole 8-row
  // swizzle atoms. The TMA-store epilogue writes 64-column chunks and the columns past the last
  // whole chunk from registers (epilogue.cuh).
  static_assert(BN % 16 == 0 && BN >= 64 && BN <= 256, "BN a multiple of 16 in [64, 256]");

  static constexpr int kConsumers = 2;  // warpgroups, 64 rows each
  static constexpr int kConsumerWarps = kConsumers * 4;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kAcc = BN / 2;  // fp32 accumulators per consumer thread: 64 x BN / 128

  // 64 x 256 fp32 accumulators (128 registers) do not fit the 168 registers/thread of a 384-thread
  // CTA: the producer warpgroup gives registers to the consumers (40 + 2 x 232 per 128 threads =
  // 64512 <= 65536, and the launch allocation of 168 x 384 = 64512 covers it exactly). ptxas
  // allocates each region within its limit; a producer that calls out of line (a load hook's
  // waitGeq) spills at 40, so hooked kernels use 56 / 224 (also 64512; consumers do not spill).
  static constexpr bool kRegRealloc = BN > 192;  // 104+ accumulators: the 168-register share is short
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr uint32_t kHookProducerRegs = 56, kHookConsumerRegs = 224;

  static constexpr uint32_t kStageBytesA = BM * BK * 2;
  static constexpr uint32_t kStageBytesB = BN * BK * 2;
  static constexpr uint32_t kStageBytes = kStageBytesA + kStageBytesB;  // TMA bytes per stage
  static constexpr uint32_t kEpiBytes = Epi::template smemBytes<kConsumers>();
  static constexpr uint32_t kBarrierBytes = 256;  // full[S], empty[S], two flag words
  static constexpr uint32_t kSmemLimit = 227 * 1024;  // sm_90 opt-in maximum per block
  static constexpr uint32_t kAlignSlack = 1024;        // dynamic smem is re-aligned to 1024 B
  static constexpr int kMaxStages = 8;
  static constexpr int kFitStages =
      static_cast<int>((kSmemLimit - kAlignSlack - kBarrierBytes - kEpiBytes) / kStageBytes);
  static constexpr int kStages = kFitStages < kMaxStages ? kFitStages : kMaxStages;
  static_assert(kStages >= 3, "pipeline too shallow for the shared-memory budget");
  static_assert(2 * kStages * 8 + 8 <= kBarrierBytes, "barrier area");

  // Offsets from the 1024-aligned base. Stage tiles are multiples of 1024 B, so every tile (and
  // each consumer's 64-row half of A, 8 KB in) stays 1024-aligned as the swizzle requires.
  static constexpr uint32_t kOffA = 0;
  static constexpr uint32_t kOffB = kOffA + kStages * kStageBytesA;
  static constexpr uint32_t kOffEpi = kOffB + kStages * kStageBytesB;
  static constexpr uint32_t kOffBar = kOffEpi + kEpiBytes;
  static constexpr uint32_t kSmemBytes = kOffBar + kBarrierBytes + kAlignSlack;
  static_assert(kSmemBytes <= kSmemLimit, "shared memory");
};

// Addresses (shared window) of one CTA's tiles and barriers.
template <class Cfg>
struct SmemLayout {
  uint32_t base;  // 1024-aligned
  __device__ __forceinline__ uint32_t a(uint32_t s) const { return base + Cfg::kOffA + s * Cfg::kStageBytesA; }
  __device__ __forceinline__ uint32_t b(uint32_t s) const { return base + Cfg::kOffB + s * Cfg::kStageBytesB; }
  __device__ __forceinline__ uint32_t epi(int consumer) const {
    return base + Cfg::kOffEpi + consumer * (Cfg::kEpiBytes / Cfg::kConsumers);
  }
  __device__ __forceinline__ uint32_t full(uint32_t s) const { return base + Cfg::kOffBar + s * 8; }
  __device__ __forceinline__ uint32_t empty(uint32_t s) const {
    return base + Cfg::kOffBar + (Cfg::kStages + s) * 8;
  }
  // Word 0: abort (a role gave up: every wait of this CTA gives up). Word 1: a load hook failed
  // (the kernel drains; tile hooks are told).
  static constexpr uint32_t kOffFlags = Cfg::kOffBar + 2 * Cfg::kStages * 8;
  __device__ __forceinline__ uint32_t flags() const { return base + kOffFlags; }
};

}  // namespace mkccl
