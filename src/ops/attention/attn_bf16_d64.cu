// Attention kernels for bf16 inputs, head dim 64 (plain: fast, overlap, simple; ring: fast, simple).
#include "ops/attention/attn_launch.cuh"

namespace mkccl {
namespace attn {

mkcclResult_t attnLaunchBf16D64(const AttnLaunch& l) { return attnLaunchFor<dev::Bf16, 64>(l); }
mkcclResult_t attnPrepareBf16D64(int dev, int smCount) { return attnPrepareFor<dev::Bf16, 64>(dev, smCount); }

}  // namespace attn
}  // namespace mkccl
