// Public entry points of the attention engine and Ring Attention: argument checks, then the op
// (src/ops/attention).
#include <math.h>
#include <stdint.h>
#include "mkccl.h"
#include "ops/attention/attention_ops.h"
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/enqueue.h"

using namespace mkccl;

namespace {

constexpr size_t kMaxDim = (1ull << 31) - 1;

bool overlaps(const void* pa, size_t na, const void* pb, size_t nb) {
  const char* a = static_cast<const char*>(pa);
  const char* b = static_cast<const char*>(pb);
  return na && nb && a < b + nb && b < a + na;
}

// Everything but the pointers' devices: sizes, heads, head dim, scale, type, alignment, overlap.
mkcclResult_t checkShape(const char* op, const void* Q, const void* K, const void* V, void* O, float* lse,
                         size_t batch, size_t seqQ, size_t seqKv, int headsQ, int headsKv, int headDim, float scale,
                         int causal, mkcclDataType_t t, attn::AttnArgs* out) {
  ARG_CHECK(t == mkcclBfloat16 || t == mkcclFloat16, "%s: datatype must be mkcclBfloat16 or mkcclFloat16", op);
  ARG_CHECK(batch >= 1 && seqQ >= 1 && seqKv >= 1, "%s: batch=%zu seqQ=%zu seqKv=%zu: each must be >= 1", op, batch,
            seqQ, seqKv);
  ARG_CHECK(headDim == 64 || headDim == 128, "%s: headDim=%d: 64 and 128 are supported", op, headDim);
  ARG_CHECK(headsQ >= 1 && headsKv >= 1 && headsQ % headsKv == 0,
            "%s: headsQ=%d headsKv=%d: both >= 1 and headsQ a multiple of headsKv (GQA)", op, headsQ, headsKv);
  ARG_CHECK(isfinite(scale) && scale > 0.0f, "%s: scale=%g must be finite and > 0", op, static_cast<double>(scale));
  ARG_CHECK(causal == 0 || causal == 1, "%s: causal=%d must be 0 or 1", op, causal);
  ARG_CHECK(seqQ <= kMaxDim && seqKv <= kMaxDim && batch <= kMaxDim &&
                batch * seqQ * static_cast<size_t>(headsQ) <= kMaxDim && batch * seqKv * static_cast<size_t>(headsKv) <= kMaxDim,
            "%s: batch=%zu seqQ=%zu seqKv=%zu heads=%d/%d: sizes must stay below 2^31 rows", op, batch, seqQ, seqKv,
            headsQ, headsKv);
  ARG_CHECK(Q && K && V && O, "%s: Q, K, V and O must not be NULL", op);
  const void* ptrs[5] = {Q, K, V, O, lse};
  const char* names[5] = {"Q", "K", "V", "O", "lse"};
  for (int i = 0; i < 5; ++i)
    ARG_CHECK((reinterpret_cast<uintptr_t>(ptrs[i]) & 15u) == 0, "%s: %s=%p must be 16-byte aligned (TMA)", op,
              names[i], ptrs[i]);
  const size_t qBytes = batch * seqQ * headsQ * headDim * 2, kvBytes = batch * seqKv * headsKv * headDim * 2;
  const size_t lseBytes = lse ? batch * headsQ * seqQ * 4 : 0;
  ARG_CHECK(!overlaps(O, qBytes, Q, qBytes) && !overlaps(O, qBytes, K, kvBytes) && !overlaps(O, qBytes, V, kvBytes),
            "%s: O overlaps Q, K or V", op);
  ARG_CHECK(!lse || (!overlaps(lse, lseBytes, Q, qBytes) && !overlaps(lse, lseBytes, K, kvBytes) &&
                     !overlaps(lse, lseBytes, V, kvBytes) && !overlaps(lse, lseBytes, O, qBytes)),
            "%s: lse overlaps Q, K, V or O", op);
  out->Q = Q;
  out->K = K;
  out->V = V;
  out->O = O;
  out->lse = lse;
  out->B = static_cast<int>(batch);
  out->sq = static_cast<int>(seqQ);
  out->skv = static_cast<int>(seqKv);
  out->hq = headsQ;
  out->hkv = headsKv;
  out->d = headDim;
  out->scale = scale;
  out->causal = causal;
  out->type = t;
  return mkcclSuccess;
}

mkcclResult_t checkPointers(const char* op, const attn::AttnArgs& a, int dev) {
  const size_t qBytes = static_cast<size_t>(a.B) * a.sq * a.hq * a.d * 2;
  const size_t kvBytes = static_cast<size_t>(a.B) * a.skv * a.hkv * a.d * 2;
  MKCCL_CHECK(checkDevicePtr(a.Q, qBytes, dev, op, "Q"));
  MKCCL_CHECK(checkDevicePtr(a.K, kvBytes, dev, op, "K"));
  MKCCL_CHECK(checkDevicePtr(a.V, kvBytes, dev, op, "V"));
  MKCCL_CHECK(checkDevicePtr(a.O, qBytes, dev, op, "O"));
  if (a.lse) MKCCL_CHECK(checkDevicePtr(a.lse, static_cast<size_t>(a.B) * a.hq * a.sq * 4, dev, op, "lse"));
  return mkcclSuccess;
}

// Inside a stream capture in global or thread-local mode, the queries the checks make
// (cudaStreamGetDevice, cudaPointerGetAttributes, ...) would be refused and would invalidate the
// capture: the calling thread is in relaxed mode for the call (launches are captured all the same).
class RelaxedCapture {
 public:
  RelaxedCapture() : ok_(cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess) {}
  ~RelaxedCapture() {
    if (ok_) cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool ok_;
};

// Whether the stream is being captured into a CUDA graph (a capture-safe query). The pointer
// queries are then skipped: the capture must not be disturbed, and the call that sized the
// buffers before the capture (ring) or any direct call with the same pointers checked them.
bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &c) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return c != cudaStreamCaptureStatusNone;
}

mkcclResult_t checkHopper(int dev, const char* op) {
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9) return setError(mkcclInvalidUsage, "%s: device %d is not a Hopper GPU (sm_90 is required)", op, dev);
  return mkcclSuccess;
}

}  // namespace

mkcclResult_t mkcclAttention(const void* Q, const void* K, const void* V, void* O, float* lse, size_t batch,
                             size_t seqQ, size_t seqKv, int headsQ, int headsKv, int headDim, float scale, int causal,
                             mkcclDataType_t datatype, cudaStream_t stream) {
  const char* op = "mkcclAttention";
  attn::AttnArgs a;
  MKCCL_CHECK(checkShape(op, Q, K, V, O, lse, batch, seqQ, seqKv, headsQ, headsKv, headDim, scale, causal, datatype,
                         &a));
  RelaxedCapture relaxed;
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  MKCCL_CHECK(checkHopper(dev, op));
  MKCCL_CHECK(checkStream(stream, dev, op));
  if (!capturing(stream)) MKCCL_CHECK(checkPointers(op, a, dev));
  cudaGetLastError();
  MKCCL_CHECK(attentionOp(a, stream));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return setError(mkcclUnhandledCudaError, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
  return mkcclSuccess;
}

mkcclResult_t mkcclRingAttention(const void* Q, const void* K, const void* V, void* O, float* lse, size_t batch,
                                 size_t seqLocal, int headsQ, int headsKv, int headDim, float scale, int causal,
                                 mkcclAttnLayout_t layout, mkcclDataType_t datatype, mkcclComm_t comm,
                                 cudaStream_t stream) {
  const char* op = "mkcclRingAttention";
  RelaxedCapture relaxed;
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  attn::AttnArgs a;
  MKCCL_CHECK(checkShape(op, Q, K, V, O, lse, batch, seqLocal, seqLocal, headsQ, headsKv, headDim, scale, causal,
                         datatype, &a));
  ARG_CHECK(layout == mkcclAttnContiguous || layout == mkcclAttnZigzag,
            "%s: layout=%d must be mkcclAttnContiguous or mkcclAttnZigzag", op, static_cast<int>(layout));
  ARG_CHECK(layout != mkcclAttnZigzag || seqLocal % 2 == 0, "%s: seqLocal=%zu must be even with mkcclAttnZigzag", op,
            seqLocal);
  ARG_CHECK(seqLocal * static_cast<size_t>(comm->nranks) <= kMaxDim,
            "%s: seqLocal=%zu x %d ranks: the whole sequence must stay below 2^31 tokens", op, seqLocal, comm->nranks);
  if (comm->nNodes != 1)
    return setError(mkcclInvalidUsage, "%s: the communicator spans %d nodes; Ring Attention runs inside one node", op,
                    comm->nNodes);
  if (comm->nranks > attn::kMaxSteps)
    return setError(mkcclInvalidUsage, "%s: %d ranks; at most %d are supported", op, comm->nranks, attn::kMaxSteps);
  MKCCL_CHECK(checkHopper(comm->cudaDev, op));
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, op));
  if (!capturing(stream)) MKCCL_CHECK(checkPointers(op, a, comm->cudaDev));
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) {
    return ringAttentionOp(ctx, a, layout == mkcclAttnZigzag ? attn::kLayoutZigzag : attn::kLayoutContiguous);
  });
}
