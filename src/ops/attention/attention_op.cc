// mkcclAttention's host side: shape -> schedule -> tensor maps -> one persistent launch.
#include <string.h>
#include <algorithm>
#include <mutex>
#include "kernels/attention/attn_layout.h"
#include "ops/attention/attention_ops.h"
#include "base/check.h"
#include "base/log.h"

namespace mkccl {

namespace {
mkcclResult_t smCountOf(int dev, int* out) {
  static std::mutex mu;
  static int cache[64] = {};
  if (dev < 0 || dev >= 64) return setError(mkcclInternalError, "attention: device %d out of range", dev);
  std::lock_guard<std::mutex> lock(mu);
  if (cache[dev] == 0) CUDA_CHECK(cudaDeviceGetAttribute(&cache[dev], cudaDevAttrMultiProcessorCount, dev));
  *out = cache[dev];
  return mkcclSuccess;
}
}  // namespace

mkcclResult_t attentionOp(const attn::AttnArgs& a, cudaStream_t stream) {
  using namespace attn;
  int dev = -1, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  MKCCL_CHECK(smCountOf(dev, &sms));
  MKCCL_CHECK(checkFault("mkcclAttention"));
  Tuning tuning;  // no communicator: the process's overrides
  MKCCL_CHECK(processTuning(&tuning));
  const int variant = attnVariant(tuning);

  AttnLaunch l;
  memset(&l.maps, 0, sizeof(l.maps));
  memset(&l.params, 0, sizeof(l.params));
  AttnShape& s = l.params.shape;
  s.B = a.B;
  s.Hq = a.hq;
  s.Hkv = a.hkv;
  s.causal = a.causal;
  s.steps = 1;
  s.q.n = 1;
  s.q.s[0] = Seg{0, a.sq, a.skv - a.sq};  // causal masks aligned to the bottom right
  s.kv.n = 1;
  s.kv.s[0] = Seg{0, a.skv, 0};
  const int64_t units = totalUnits(s);
  l.ctas = static_cast<int>(std::min<int64_t>(units, sms));
  l.dev = dev;
  l.smCount = sms;
  l.ring = false;
  l.variant = variant;
  l.stream = stream;
  AttnParams& p = l.params;
  p.scaleLog2 = a.scale * 1.4426950408889634f;
  p.lseRows = a.sq;
  p.lse = a.lse;
  p.waitTimeoutNs = kWaitTimeoutNs;
  MKCCL_CHECK(faultWord(&p.fault));
  MKCCL_CHECK(encodeHeadMap(&l.maps.q, a.Q, a.type, a.B, a.sq, a.hq, a.d, kBlockM));
  MKCCL_CHECK(encodeHeadMap(&l.maps.o, a.O, a.type, a.B, a.sq, a.hq, a.d, 64));
  MKCCL_CHECK(encodeHeadMap(&l.maps.k[0], a.K, a.type, a.B, a.skv, a.hkv, a.d, kBlockN));
  MKCCL_CHECK(encodeHeadMap(&l.maps.v[0], a.V, a.type, a.B, a.skv, a.hkv, a.d, kBlockN));
  for (int i = 1; i < 3; ++i) {
    l.maps.k[i] = l.maps.k[0];
    l.maps.v[i] = l.maps.v[0];
  }
  MKCCL_TRACE("mkcclAttention B %d Sq %d Skv %d H %d/%d D %d causal %d: %lld units on %d CTAs, variant %d", a.B, a.sq,
              a.skv, a.hq, a.hkv, a.d, a.causal, static_cast<long long>(units), l.ctas, variant);
  return dispatch(l, a.type, a.d);
}

}  // namespace mkccl
