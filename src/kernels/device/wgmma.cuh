// Warpgroup MMA (wgmma, sm_90a): D[64 x N] (+)= A[64 x 16] . B[16 x N], A and B read from shared
// memory through matrix descriptors, D in registers of the 128 threads of the warpgroup.
//
// Accumulator layout (PTX "wgmma D fragment", f32): thread t of the warpgroup, warp w = t / 32,
// lane l = t % 32, register i of N/2:
//     row = 16 w + l / 4 + 8 * ((i / 2) % 2),   col = 8 * (i / 4) + 2 * (l % 4) + (i % 2)
// so registers {4j, 4j+1} hold an 8x8 block's (row l/4, cols 2(l%4)..+1) pair and {4j+2, 4j+3}
// the block 8 rows below: the fragment layout stmatrix expects (see store.cuh).
//
// Ordering rules the callers follow:
//  - wgmmaFence() before the first mma of a batch (and after any other instruction wrote the
//    accumulators); wgmmaCommit() after the batch; wgmmaWait<N>() before reading them.
//  - fenceAccumulators() around the wait so the compiler cannot move accumulator reads or writes
//    across it (the asm operands alone do not tie them to the wait).
//  - scaleD = 0 makes the first k-step overwrite D: no zero-initialisation, which would make ptxas
//    serialise the wgmma pipeline (warning C7515).
#pragma once
#include <stdint.h>

namespace mkccl {
namespace dev {

// Matrix descriptor of a K-major operand tile stored with the 128-byte swizzle, as TMA writes it
// with CU_TENSOR_MAP_SWIZZLE_128B: rows of 64 bf16/fp16 (128 B), 8-row atoms of 1024 B.
//   bits  0-13  start address >> 4 (the tile base must be 1024-byte aligned: base offset 0)
//   bits 16-29  leading byte offset >> 4: unused for swizzled K-major (one k16 slice, 32 B, lies
//               inside the 128 B swizzle row); 1 by convention
//   bits 32-45  stride byte offset >> 4: 1024 B between consecutive 8-row atoms -> 64
//   bits 49-51  base offset: 0
//   bits 62-63  layout: 1 = 128-byte swizzle
// Stepping K by 16 elements inside the 128 B row adds 32 B to the start address (+2 in the
// encoded field): the hardware applies the swizzle to the final address bits, as TMA did.
__host__ __device__ __forceinline__ uint64_t smemDescSw128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}
// Encoded start-address step of one k16 slice (32 bytes).
constexpr uint64_t kDescK16Step = 32 >> 4;

__device__ __forceinline__ void wgmmaFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

template <int N>
__device__ __forceinline__ void fenceAccumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Input element types of the mma (A and B alike).
struct Bf16 {};
struct F16 {};

// Wgmma<N, T>::mma(d, descA, descB, scaleD): one m64nNk16 step, A and B K-major (no transpose),
// unit scales. The inline-asm operand lists are generated: one "+f" per accumulator register (N/2
// of them), then descA, descB and scaleD; one macro writes the four specialisations.
template <int N, class T>
struct Wgmma;

#define MKCCL_WGMMA_ACC8(i)                                                                        \
  "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]),         \
      "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define MKCCL_WGMMA_ACC64(i)                                                                       \
  MKCCL_WGMMA_ACC8((i) + 0), MKCCL_WGMMA_ACC8((i) + 8), MKCCL_WGMMA_ACC8((i) + 16),                \
      MKCCL_WGMMA_ACC8((i) + 24), MKCCL_WGMMA_ACC8((i) + 32), MKCCL_WGMMA_ACC8((i) + 40),          \
      MKCCL_WGMMA_ACC8((i) + 48), MKCCL_WGMMA_ACC8((i) + 56)
#define MKCCL_WGMMA_REGS64 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define MKCCL_WGMMA_REGS128 MKCCL_WGMMA_REGS64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
// N: tile width; PTX_T: the type's PTX name; REGS: "%0, ..." for the N/2 accumulators; SCALE and
// DESCS: the operand numbers of scaleD and of descA, descB; then the accumulator operands.
#define MKCCL_WGMMA(N, T, PTX_T, REGS, SCALE, DESCS, ...)                                           \
  template <>                                                                                       \
  struct Wgmma<N, T> {                                                                              \
    __device__ __forceinline__ static void mma(float (&d)[N / 2], uint64_t descA, uint64_t descB,    \
                                               uint32_t scaleD) {                                   \
      asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, " SCALE ", 0;\n\t"                         \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " {" REGS "}, " \
                   DESCS ", p, 1, 1, 0, 0;\n\t}"                                                    \
                   : __VA_ARGS__                                                                    \
                   : "l"(descA), "l"(descB), "r"(scaleD));                                          \
    }                                                                                               \
  };

MKCCL_WGMMA(256, Bf16, "bf16", MKCCL_WGMMA_REGS128, "%130", "%128, %129", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC64(64))
MKCCL_WGMMA(256, F16, "f16", MKCCL_WGMMA_REGS128, "%130", "%128, %129", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC64(64))
MKCCL_WGMMA(128, Bf16, "bf16", MKCCL_WGMMA_REGS64, "%66", "%64, %65", MKCCL_WGMMA_ACC64(0))
MKCCL_WGMMA(128, F16, "f16", MKCCL_WGMMA_REGS64, "%66", "%64, %65", MKCCL_WGMMA_ACC64(0))

#undef MKCCL_WGMMA
#undef MKCCL_WGMMA_REGS128
#undef MKCCL_WGMMA_REGS64
#undef MKCCL_WGMMA_ACC64
#undef MKCCL_WGMMA_ACC8

}  // namespace dev
}  // namespace mkccl
