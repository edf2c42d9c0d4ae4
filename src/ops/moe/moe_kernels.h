// The MoE kernels, looked up by the host side (src/ops/moe).
#pragma once
#include <stddef.h>
#include "kernels/moe/moe_layout.h"
#include "mkccl.h"

namespace mkccl {
namespace moe {

// dispatchKernel(Args) and combineKernel<T>(Args), kThreads threads per CTA, a grid of Args::ctas.
const void* dispatchKernelFn();
// net: the instantiation for a communicator that spans nodes (moe_combine.cu says why two).
const void* combineKernelFn(bool fp16, bool net = false);
// Dynamic shared memory of the dispatch kernel for these dims (the combine uses none).
size_t dispatchSmemBytes(const Dims& d);
// Load the fused calls' GEMM kernels of type t (src/ops/preload.cu, at communicator init).
mkcclResult_t dispatchGemmPreload(mkcclDataType_t t, int dev, int sms);
mkcclResult_t gemmCombinePreload(mkcclDataType_t t, int dev, int sms);

}  // namespace moe
}  // namespace mkccl
