// Warp-specialisation helpers: register reallocation between warpgroups and named barriers.
#pragma once
#include <stdint.h>

namespace mkccl {
namespace dev {

constexpr int kWarpgroupThreads = 128;

// setmaxnreg moves registers between the warpgroups of a CTA: a producer gives some back, the
// consumers take them. The kernel must be compiled with __launch_bounds__(threads, 1) (else ptxas
// ignores it, warning C7508), and the per-CTA total must stay within the launch allocation
// (threads x launch register count): an over-subscribed .inc waits forever. Every thread of the
// warpgroup executes it.
template <uint32_t kRegs>
__device__ __forceinline__ void warpgroupRegAlloc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg operand");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <uint32_t kRegs>
__device__ __forceinline__ void warpgroupRegDealloc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg operand");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// Barrier among `threads` threads (a multiple of 32) that use the same id (1..15; 0 is
// __syncthreads).
__device__ __forceinline__ void namedBarrierSync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace dev
}  // namespace mkccl
