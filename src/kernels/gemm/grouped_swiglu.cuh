// Grouped GEMM with a SwiGLU epilogue (MoE's first expert GEMM): per group g,
//   C_g[rows, I] = silu(A_g . Gate_g^T) * (A_g . Up_g^T)
// on the grouped GEMM's schedule and loads (grouped.cuh), 128 x 256 tiles.
//
// Weight layout ("blocked interleave", block 128): W1_g is [2 * Ip, K] with Ip = roundup(I, 128);
// its rows [256 b, 256 b + 128) are gate rows [128 b, 128 b + 128) and rows [256 b + 128, 256 b + 256)
// the up rows of the same columns (rows past I in the last block: any values, their columns are
// never stored). Why: one 256-wide tile then holds gate column c in accumulator group j and up
// column c in group j + 16 of the same thread (wgmma's fragment layout), so the product needs no
// data movement between threads, and the output tile is 128 x 128 of C.
// The epilogue computes silu(gate) * up in fp32 from the accumulators (one rounding, to C's type)
// and stores through the TMA-store epilogue of a 128-wide configuration (same staging buffers:
// two 64-column chunks per warpgroup, tails clipped by TMA at I and at the rows of C).
#pragma once
#include <stdint.h>
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "kernels/gemm/grouped.cuh"

namespace mkccl {

// silu(g) * u in fp32. On the device the approximate divide: an IEEE divide (div.rn) carries an
// out-of-line slow path per call, 64 of them in the consumers' register region.
__host__ __device__ __forceinline__ float swiglu(float g, float u) {
#ifdef __CUDA_ARCH__
  return __fdividef(g, 1.f + __expf(-g)) * u;
#else
  return g / (1.f + expf(-g)) * u;
#endif
}

template <class Cfg, class Op>
struct SwigluEpilogue {
  static_assert(Cfg::BN == 256, "SwiGLU pairs gate and up columns 128 apart in a 256-wide tile");
  // The 128-wide configuration whose TMA-store epilogue writes the combined tile (kAcc 64).
  using OutCfg = GemmCfg<typename Cfg::In, 128, EpilogueTmaStore>;
  EpiCtx ec;

  __device__ __forceinline__ SwigluEpilogue(const GemmArgs& g, const typename Op::Params&, const CUtensorMap* mapC,
                                            const SmemLayout<Cfg>& sm, int half) {
    ec.mapC = mapC;
    ec.smem = sm.epi(half);
    ec.barrierId = 1u + static_cast<uint32_t>(half);
    ec.tid = threadIdx.x % 128u;
    ec.chunks = 0;
    ec.outType = g.outType;
    ec.M = g.M;
    ec.N = g.N;
    ec.C = g.C;
    ec.ldc = g.ldc;
    half_ = half;
  }
  template <class Tile>
  __device__ __forceinline__ void begin(const Tile&) {}
  __device__ __forceinline__ void afterKBlock(int) {}
  template <class Tile>
  __device__ __forceinline__ void store(const float (&acc)[Cfg::kAcc], const Tile& t) {
    // In place, over the gate half: no second array of 64 live values beside the 128 accumulators
    // (the kernel's accumulators are a non-const local array; the next tile overwrites them).
    float* a = const_cast<float*>(acc);
#pragma unroll
    for (int i = 0; i < OutCfg::kAcc; ++i) a[i] = swiglu(a[i], a[i + OutCfg::kAcc]);
    ec.row0 = static_cast<int64_t>(t.m) * Cfg::BM + half_ * 64;
    ec.col0 = static_cast<int64_t>(t.n) * 128;
    EpilogueTmaStore::template store<OutCfg>(*reinterpret_cast<const float(*)[OutCfg::kAcc]>(a), ec);
  }
  __device__ __forceinline__ void finish() { EpilogueTmaStore::finish(ec); }

 private:
  int half_;
};

// The op: GroupedGemmOp's scheduler and loads (Params.grouped.N = 2 * Ip, the rows of one group's
// W1; nBlocks = Ip / 128), the SwiGLU epilogue.
struct GroupedSwigluOp : GroupedGemmOp {
  template <class Cfg, class Op>
  using Epilogue = SwigluEpilogue<Cfg, Op>;
};

// W1 stored gate then up ("gate-up": W1_g is [2 I, K], its rows [0, I) the gate, [I, 2 I) the up
// rows, as engines keep a fused gate/up projection): the W tile of column block b is the two
// 128-row boxes at gate row 128 b and up row I + 128 b, loaded into the halves of the stage, which
// then holds what the blocked interleave's one 256-row box would. Params.grouped.N = 2 I. Rows of a
// box past its half (the last block when I is not a multiple of 128) are the up rows or the next
// group's (or TMA's zero fill past the last group): they feed only columns past I, never stored.
template <class Cfg, class Base = GroupedLoads<Cfg>>
struct GateUpLoads : Base {
  static constexpr bool kSplitB = true;
  using Base::Base;
  template <class Tile>
  __device__ __forceinline__ int32_t bRowHalf(const Tile& t, int h) const {
    return static_cast<int32_t>(int64_t(t.g) * this->N + int64_t(h) * (this->N / 2) + int64_t(t.n) * (Cfg::BN / 2));
  }
};

struct GroupedSwigluGateUpOp : GroupedSwigluOp {
  template <class Cfg, class Op>
  using Loads = GateUpLoads<Cfg>;
};

}  // namespace mkccl
