// Attention kernels for f16 inputs, head dim 64 (plain: fast, overlap, simple; ring: fast, simple).
#include "ops/attention/attn_launch.cuh"

namespace mkccl {
namespace attn {

mkcclResult_t attnLaunchF16D64(const AttnLaunch& l) { return attnLaunchFor<dev::F16, 64>(l); }
mkcclResult_t attnPrepareF16D64(int dev, int smCount) { return attnPrepareFor<dev::F16, 64>(dev, smCount); }

}  // namespace attn
}  // namespace mkccl
