// Host side of the attention engine and Ring Attention (arguments -> plan -> launch). The public
// entry points (src/ops/attention/attention_api.cc) check the arguments and call these.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include "ops/attention/attn_launch.h"
#include "mkccl.h"
#include "ops/tuner/tuning.h"
#include "runtime/enqueue.h"

namespace mkccl {
namespace attn {

// One call's checked arguments. Q, O: [B, sq, hq, d]; K, V: [B, skv, hkv, d]; LSE: [B, hq, sq].
struct AttnArgs {
  const void* Q = nullptr;
  const void* K = nullptr;
  const void* V = nullptr;
  void* O = nullptr;
  float* lse = nullptr;
  int B = 0, sq = 0, skv = 0, hq = 0, hkv = 0, d = 0;
  float scale = 0.0f;
  int causal = 0;
  mkcclDataType_t type = mkcclBfloat16;
};

// 4-D TMA map of a [B, S, H, D] tensor of `t` (bf16 / fp16): boxes of 64 columns x `boxRows` rows
// of one head, 128-byte swizzle, zero fill past S.
mkcclResult_t encodeHeadMap(CUtensorMap* map, const void* base, mkcclDataType_t t, int B, int S, int H, int D,
                            uint32_t boxRows);

// The kernel variant (attn::AttnVariant) the tuner's attention.variant key asks for (auto = fast).
int attnVariant(const Tuning& t);

// The host-mapped word an attention kernel writes when an intra-CTA wait gives up (a bug), and
// its check: mkcclInternalError (once) if a kernel since the last check reported one.
mkcclResult_t faultWord(int** deviceWord);
mkcclResult_t checkFault(const char* op);

// Launches through the instantiation of l's type and head dim.
mkcclResult_t dispatch(const AttnLaunch& l, mkcclDataType_t t, int headDim);

// Bound of the intra-CTA mbarrier waits of a plain call.
constexpr uint64_t kWaitTimeoutNs = 30ull * 1000 * 1000 * 1000;

}  // namespace attn

// mkcclAttention: one GPU, the current device.
mkcclResult_t attentionOp(const attn::AttnArgs& a, cudaStream_t stream);
// mkcclRingAttention: sq = skv = the tokens of this rank; layout attn::kLayoutContiguous / kLayoutZigzag.
mkcclResult_t ringAttentionOp(OpCtx& ctx, const attn::AttnArgs& a, int layout);

}  // namespace mkccl
