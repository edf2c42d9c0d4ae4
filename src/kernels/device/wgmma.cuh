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

// Matrix descriptor of an MN-major operand (B with imm-trans-b = 1) stored with the 128-byte
// swizzle, as TMA writes a row-major [K rows][N] tile whose rows are 64 bf16/fp16 (128 B) wide:
// e.g. V[kv rows][head dim] as the B operand of P . V. In the PTX canonical form
// ((8 x 8 elements, m), (8, k)): 64 N-elements are contiguous in a 128 B row, 8 K-rows form a
// 1024 B atom, and
//   stride byte offset (bits 32-45) = 1024 B between consecutive 8-row groups along K;
//   leading byte offset (bits 16-29) = `nBlockBytes` between consecutive 64-element blocks along
//   N (the next 128 B-wide sub-tile, e.g. rows x 128 B for a tile split into 64-column boxes).
// Stepping K by 16 rows adds 2048 B to the start address. Base must be 1024-byte aligned.
__host__ __device__ __forceinline__ uint64_t smemDescSw128Mn(uint32_t addr, uint32_t nBlockBytes) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>((nBlockBytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}
// Encoded start-address step of 16 K-rows of an MN-major 128B-swizzled operand (2048 bytes).
constexpr uint64_t kDescMnK16Step = 2048 >> 4;

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
#define MKCCL_WGMMA_REGS96 MKCCL_WGMMA_REGS64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
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
MKCCL_WGMMA(192, Bf16, "bf16", MKCCL_WGMMA_REGS96, "%98", "%96, %97", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64),
            MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88))
MKCCL_WGMMA(192, F16, "f16", MKCCL_WGMMA_REGS96, "%98", "%96, %97", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64),
            MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88))
MKCCL_WGMMA(128, Bf16, "bf16", MKCCL_WGMMA_REGS64, "%66", "%64, %65", MKCCL_WGMMA_ACC64(0))
MKCCL_WGMMA(128, F16, "f16", MKCCL_WGMMA_REGS64, "%66", "%64, %65", MKCCL_WGMMA_ACC64(0))
// The narrow and in-between widths of the plain GEMM (gemm_config.cuh: multiples of 16 from 64 to
// 256), generated: the register list, then scaleD and the descriptors, then the accumulators.
MKCCL_WGMMA(64, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31", "%34", "%32, %33", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24))
MKCCL_WGMMA(64, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31", "%34", "%32, %33", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24))
MKCCL_WGMMA(80, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39", "%42", "%40, %41", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24), MKCCL_WGMMA_ACC8(32))
MKCCL_WGMMA(80, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39", "%42", "%40, %41", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24), MKCCL_WGMMA_ACC8(32))
MKCCL_WGMMA(96, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47", "%50", "%48, %49", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24), MKCCL_WGMMA_ACC8(32), MKCCL_WGMMA_ACC8(40))
MKCCL_WGMMA(96, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47", "%50", "%48, %49", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24), MKCCL_WGMMA_ACC8(32), MKCCL_WGMMA_ACC8(40))
MKCCL_WGMMA(112, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55", "%58", "%56, %57", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24), MKCCL_WGMMA_ACC8(32), MKCCL_WGMMA_ACC8(40), MKCCL_WGMMA_ACC8(48))
MKCCL_WGMMA(112, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55", "%58", "%56, %57", MKCCL_WGMMA_ACC8(0), MKCCL_WGMMA_ACC8(8), MKCCL_WGMMA_ACC8(16), MKCCL_WGMMA_ACC8(24), MKCCL_WGMMA_ACC8(32), MKCCL_WGMMA_ACC8(40), MKCCL_WGMMA_ACC8(48))
MKCCL_WGMMA(144, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71", "%74", "%72, %73", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64))
MKCCL_WGMMA(144, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71", "%74", "%72, %73", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64))
MKCCL_WGMMA(160, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79", "%82", "%80, %81", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72))
MKCCL_WGMMA(160, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79", "%82", "%80, %81", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72))
MKCCL_WGMMA(176, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87", "%90", "%88, %89", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80))
MKCCL_WGMMA(176, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87", "%90", "%88, %89", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80))
MKCCL_WGMMA(208, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103", "%106", "%104, %105", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88), MKCCL_WGMMA_ACC8(96))
MKCCL_WGMMA(208, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103", "%106", "%104, %105", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88), MKCCL_WGMMA_ACC8(96))
MKCCL_WGMMA(224, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111", "%114", "%112, %113", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88), MKCCL_WGMMA_ACC8(96), MKCCL_WGMMA_ACC8(104))
MKCCL_WGMMA(224, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111", "%114", "%112, %113", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88), MKCCL_WGMMA_ACC8(96), MKCCL_WGMMA_ACC8(104))
MKCCL_WGMMA(240, Bf16, "bf16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119", "%122", "%120, %121", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88), MKCCL_WGMMA_ACC8(96), MKCCL_WGMMA_ACC8(104), MKCCL_WGMMA_ACC8(112))
MKCCL_WGMMA(240, F16, "f16", "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119", "%122", "%120, %121", MKCCL_WGMMA_ACC64(0), MKCCL_WGMMA_ACC8(64), MKCCL_WGMMA_ACC8(72), MKCCL_WGMMA_ACC8(80), MKCCL_WGMMA_ACC8(88), MKCCL_WGMMA_ACC8(96), MKCCL_WGMMA_ACC8(104), MKCCL_WGMMA_ACC8(112))


// WgmmaRs<N, T>::mma(d, a, descB, scaleD): one m64nNk16 step with A from registers and B
// MN-major (imm-trans-b = 1; descriptor from smemDescSw128Mn). a[0..3] is the warpgroup's A
// fragment of the 64 x 16 slice: thread t (warp w, lane l) holds rows 16w + l/4 (a[0], a[2]) and
// 16w + l/4 + 8 (a[1], a[3]), columns 2(l%4)..+1 (a[0], a[1]) and 8 + 2(l%4)..+1 (a[2], a[3]),
// each a packed pair (low half = lower column). This is the D fragment layout of wgmma.cuh for
// columns 16k..16k+15: registers 8k..8k+7 of an fp32 accumulator, packed in order, form A of
// slice k (how attention feeds softmax(S) back as the A operand of P . V).
template <int N, class T>
struct WgmmaRs;

#define MKCCL_WGMMA_RS(N, T, PTX_T, REGS, AREGS, DESC, SCALE, ...)                                 \
  template <>                                                                                       \
  struct WgmmaRs<N, T> {                                                                            \
    __device__ __forceinline__ static void mma(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t descB, \
                                               uint32_t scaleD) {                                   \
      asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, " SCALE ", 0;\n\t"                     \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " {" REGS "}, {" AREGS \
                   "}, " DESC ", p, 1, 1, 1;\n\t}"                                                 \
                   : __VA_ARGS__                                                                    \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));          \
    }                                                                                               \
  };

#define MKCCL_WGMMA_REGS32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MKCCL_WGMMA_ACC32(i) \
  MKCCL_WGMMA_ACC8((i) + 0), MKCCL_WGMMA_ACC8((i) + 8), MKCCL_WGMMA_ACC8((i) + 16), MKCCL_WGMMA_ACC8((i) + 24)

MKCCL_WGMMA_RS(128, Bf16, "bf16", MKCCL_WGMMA_REGS64, "%64, %65, %66, %67", "%68", "%69", MKCCL_WGMMA_ACC64(0))
MKCCL_WGMMA_RS(128, F16, "f16", MKCCL_WGMMA_REGS64, "%64, %65, %66, %67", "%68", "%69", MKCCL_WGMMA_ACC64(0))
MKCCL_WGMMA_RS(64, Bf16, "bf16", MKCCL_WGMMA_REGS32, "%32, %33, %34, %35", "%36", "%37", MKCCL_WGMMA_ACC32(0))
MKCCL_WGMMA_RS(64, F16, "f16", MKCCL_WGMMA_REGS32, "%32, %33, %34, %35", "%36", "%37", MKCCL_WGMMA_ACC32(0))

#undef MKCCL_WGMMA_RS
#undef MKCCL_WGMMA_ACC32
#undef MKCCL_WGMMA_REGS32
#undef MKCCL_WGMMA
#undef MKCCL_WGMMA_REGS128
#undef MKCCL_WGMMA_REGS96
#undef MKCCL_WGMMA_REGS64
#undef MKCCL_WGMMA_ACC64
#undef MKCCL_WGMMA_ACC8

}  // namespace dev
}  // namespace mkccl
