// Host entry to the attention kernels: one function per (input type, head dim), each compiled in
// its own translation unit (attn_<type>_d<dim>.cu) so that they build in parallel.
#pragma once
#include <cuda_runtime.h>
#include "kernels/attention/attn_params.h"
#include "mkccl.h"

namespace mkccl {
namespace attn {

struct AttnLaunch {
  AttnMaps maps;
  AttnParams params;
  int ctas = 0;     // grid (ring: comm blocks included), at most one per SM
  int dev = 0, smCount = 0;
  bool ring = false;
  int variant = kVariantFast;
  cudaStream_t stream = nullptr;
};

mkcclResult_t attnLaunchBf16D64(const AttnLaunch& l);
mkcclResult_t attnLaunchBf16D128(const AttnLaunch& l);
mkcclResult_t attnLaunchF16D64(const AttnLaunch& l);
mkcclResult_t attnLaunchF16D128(const AttnLaunch& l);

// Ring Attention's prep kernel (attn_prep.cu): E = max(E + 1, seq) in *epoch, `bytes` at `zero`
// zeroed; and its load at communicator init.
mkcclResult_t ringPrep(uint64_t* epoch, uint64_t seq, void* zero, size_t bytes, cudaStream_t stream);
mkcclResult_t ringPrepLoad();

mkcclResult_t attnPrepareBf16D64(int dev, int smCount);
mkcclResult_t attnPrepareBf16D128(int dev, int smCount);
mkcclResult_t attnPrepareF16D64(int dev, int smCount);
mkcclResult_t attnPrepareF16D128(int dev, int smCount);

}  // namespace attn
}  // namespace mkccl
