// Compile-time configuration of the attention kernel: tile shapes, warp roles, register split,
// pipeline depth and the shared-memory map.
//
// One CTA computes a 128-row query tile of one (batch, head) against its key/value blocks of 128
// rows: warpgroup 0 is the producer (one thread issues every TMA load), warpgroups 1 and 2 are
// consumers of 64 query rows each (S = Q K^T and O += P V with wgmma, the softmax in registers).
#pragma once
#include <stdint.h>
#include "kernels/attention/attn_layout.h"
#include "kernels/device/wgmma.cuh"

namespace mkccl {
namespace attn {

template <class InT, int kHeadDim>
struct AttnCfg {
  using In = InT;  // dev::Bf16 or dev::F16 (Q, K, V and O)
  static constexpr int BM = kBlockM, BN = kBlockN, D = kHeadDim;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static constexpr int kBoxes = D / 64;  // 64-column (128-byte) TMA boxes per row
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kAccS = BN / 2;  // fp32 registers of a 64 x BN score tile per thread
  static constexpr int kAccO = D / 2;   // fp32 registers of a 64 x D output tile per thread
  static constexpr int kP = BN / 4;     // packed 16-bit pairs of P per thread

  // 56 / 224 registers (56 x 128 + 224 x 256 = 64512 <= 65536 = 168 x 384, the launch
  // allocation). The consumers' live set peaks at S, O and P (64 + 64 + 32 for D = 128) plus the
  // softmax state; the producer walks the schedule (attn_layout.h) and spills below 56.
  static constexpr uint32_t kProducerRegs = 56, kConsumerRegs = 224;

  static constexpr int kStages = D == 64 ? 4 : 2;  // K and V stages each
  static constexpr uint32_t kBoxRowsBytes = 128;
  static constexpr uint32_t kQBytes = BM * D * 2;
  static constexpr uint32_t kKvBytes = BN * D * 2;  // one K (or V) block
  static constexpr uint32_t kOHalfBytes = 64 * D * 2;
  static constexpr uint32_t kQBoxBytes = BM * 128;   // one 64-column box of the Q tile
  static constexpr uint32_t kKvBoxBytes = BN * 128;  // one 64-column box of a K / V block
  static constexpr uint32_t kOBoxBytes = 64 * 128;   // one 64-column box of an O half

  static constexpr uint32_t kOffQ = 0;
  static constexpr uint32_t kOffK = kOffQ + kQBytes;
  static constexpr uint32_t kOffV = kOffK + kStages * kKvBytes;
  static constexpr uint32_t kOffO = kOffV + kStages * kKvBytes;
  static constexpr uint32_t kOffBar = kOffO + 2 * kOHalfBytes;
  static constexpr uint32_t kBarBytes = 256;  // Q full/empty, K and V full/empty per stage, flags
  static constexpr uint32_t kAlignSlack = 1024;
  static constexpr uint32_t kSmemBytes = kOffBar + kBarBytes + kAlignSlack;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  static_assert((2 + 4 * kStages) * 8 + 16 <= kBarBytes, "barrier area");
};

// Addresses (shared window) of one CTA's tiles and barriers; base 1024-aligned.
template <class Cfg>
struct AttnSmem {
  uint32_t base;
  __device__ __forceinline__ uint32_t q() const { return base + Cfg::kOffQ; }
  __device__ __forceinline__ uint32_t k(uint32_t s) const { return base + Cfg::kOffK + s * Cfg::kKvBytes; }
  __device__ __forceinline__ uint32_t v(uint32_t s) const { return base + Cfg::kOffV + s * Cfg::kKvBytes; }
  __device__ __forceinline__ uint32_t o(int consumer) const {
    return base + Cfg::kOffO + static_cast<uint32_t>(consumer) * Cfg::kOHalfBytes;
  }
  __device__ __forceinline__ uint32_t qFull() const { return base + Cfg::kOffBar; }
  __device__ __forceinline__ uint32_t qEmpty() const { return base + Cfg::kOffBar + 8; }
  __device__ __forceinline__ uint32_t kFull(uint32_t s) const { return base + Cfg::kOffBar + 16 + 8 * s; }
  __device__ __forceinline__ uint32_t kEmpty(uint32_t s) const {
    return base + Cfg::kOffBar + 16 + 8 * (Cfg::kStages + s);
  }
  __device__ __forceinline__ uint32_t vFull(uint32_t s) const {
    return base + Cfg::kOffBar + 16 + 8 * (2 * Cfg::kStages + s);
  }
  __device__ __forceinline__ uint32_t vEmpty(uint32_t s) const {
    return base + Cfg::kOffBar + 16 + 8 * (3 * Cfg::kStages + s);
  }
  // Two ints: [0] abort (a wait gave up: every wait of the CTA gives up), [1] drain (a flag wait
  // failed: no more flag waits).
  __device__ __forceinline__ uint32_t flags() const { return base + Cfg::kOffBar + 16 + 8 * (4 * Cfg::kStages); }
};

}  // namespace attn
}  // namespace mkccl
