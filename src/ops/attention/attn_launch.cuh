// The launch of one instantiation of the attention kernel (included by attn_<type>_d<dim>.cu).
#pragma once
#include <cuda_runtime.h>
#include "kernels/attention/attn_config.cuh"
#include "kernels/attention/attn_kernel.cuh"
#include "ops/attention/attn_launch.h"
#include "ops/gemm/kernel_launch.h"
#include "base/check.h"

namespace mkccl {
namespace attn {

template <class T, int D, bool kRing, int kVariant>
mkcclResult_t attnLaunchOne(const AttnLaunch& l) {
  using Cfg = AttnCfg<T, D>;
  void (*kernel)(const AttnMaps, const AttnParams) = attnKernel<Cfg, kRing, kVariant>;
  int fit = 0;
  MKCCL_CHECK(persistentPrepare(reinterpret_cast<const void*>(kernel), l.dev, l.smCount, Cfg::kThreads, Cfg::kSmemBytes,
                                1, &fit));
  return persistentLaunch(kernel, l.ctas, Cfg::kThreads, Cfg::kSmemBytes, 1, l.stream, l.maps, l.params);
}

template <class T, int D, bool kRing, int kVariant>
mkcclResult_t attnPrepareOne(int dev, int smCount) {
  using Cfg = AttnCfg<T, D>;
  void (*kernel)(const AttnMaps, const AttnParams) = attnKernel<Cfg, kRing, kVariant>;
  int fit = 0;
  return persistentPrepare(reinterpret_cast<const void*>(kernel), dev, smCount, Cfg::kThreads, Cfg::kSmemBytes, 1,
                           &fit);
}

// Loads every kernel of the type and head dim (communicator init: a lazy load at the first launch
// would wait for the device to go idle, behind another rank's persistent kernel).
template <class T, int D>
mkcclResult_t attnPrepareFor(int dev, int smCount) {
  MKCCL_CHECK((attnPrepareOne<T, D, false, kVariantFast>(dev, smCount)));
  MKCCL_CHECK((attnPrepareOne<T, D, false, kVariantOverlap>(dev, smCount)));
  MKCCL_CHECK((attnPrepareOne<T, D, false, kVariantSimple>(dev, smCount)));
  MKCCL_CHECK(ringPrepLoad());
  MKCCL_CHECK((attnPrepareOne<T, D, true, kVariantFast>(dev, smCount)));
  return attnPrepareOne<T, D, true, kVariantSimple>(dev, smCount);
}

template <class T, int D>
mkcclResult_t attnLaunchFor(const AttnLaunch& l) {
  if (l.ring) {
    if (l.variant == kVariantSimple) return attnLaunchOne<T, D, true, kVariantSimple>(l);
    return attnLaunchOne<T, D, true, kVariantFast>(l);
  }
  switch (l.variant) {
    case kVariantSimple: return attnLaunchOne<T, D, false, kVariantSimple>(l);
    case kVariantOverlap: return attnLaunchOne<T, D, false, kVariantOverlap>(l);
    default: return attnLaunchOne<T, D, false, kVariantFast>(l);
  }
}

}  // namespace attn
}  // namespace mkccl
