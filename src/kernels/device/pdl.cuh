// Programmatic dependent launch (PDL): a kernel launched with the programmatic stream
// serialization attribute may start while the kernel before it in the stream still runs; it must
// not touch memory that kernel writes before gridDepWait returns.
#pragma once

namespace mkccl {
namespace dev {

// Blocks the calling thread until the kernels this launch depends on have completed and their
// writes are visible (a no-op in a launch without the attribute). Every thread that reads or
// writes global memory those kernels may touch executes it.
__device__ __forceinline__ void gridDepWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the next PDL launch in the stream start once every CTA of this grid has called it (or
// exited): its CTAs take SMs as ours leave and set up while our last tiles finish.
__device__ __forceinline__ void gridDepLaunchDependents() { asm volatile("griddepcontrol.launch_dependents;" :::); }

}  // namespace dev
}  // namespace mkccl
