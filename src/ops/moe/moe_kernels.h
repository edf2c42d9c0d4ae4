// The MoE kernels, looked up by the host side (src/ops/moe).
#pragma once
#include <stddef.h>
#include "kernels/moe/moe_layout.h"

namespace mkccl {
namespace moe {

// dispatchKernel(Args) and combineKernel<T>(Args), kThreads threads per CTA, a grid of Args::ctas.
const void* dispatchKernelFn();
const void* combineKernelFn(bool fp16);
// Dynamic shared memory of the dispatch kernel for these dims (the combine uses none).
size_t dispatchSmemBytes(const Dims& d);

}  // namespace moe
}  // namespace mkccl
