// Pieces shared by mkcclAttention and mkcclRingAttention: tensor maps, the variant, the
// fault word, the dispatch to the per-type instantiations.
#include "ops/attention/attention_ops.h"
#include "base/check.h"
#include "runtime/cudriver.h"
#include "runtime/fault_word.h"

namespace mkccl {
namespace attn {

mkcclResult_t encodeHeadMap(CUtensorMap* map, const void* base, mkcclDataType_t t, int B, int S, int H, int D,
                            uint32_t boxRows) {
  if ((reinterpret_cast<uintptr_t>(base) & 15u) != 0)
    return setError(mkcclInvalidArgument, "attention: operand %p is not 16-byte aligned (TMA needs it)", base);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(D), static_cast<cuuint64_t>(H), static_cast<cuuint64_t>(S),
                              static_cast<cuuint64_t>(B)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(D) * 2, static_cast<cuuint64_t>(H) * D * 2,
                                 static_cast<cuuint64_t>(S) * H * D * 2};
  const cuuint32_t box[4] = {64, 1, boxRows, 1};
  const cuuint32_t estrides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType dt =
      t == mkcclBfloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  MKCCL_CHECK(cuDriverLoad());
  CU_CHECK(cu().tensorMapEncodeTiled(map, dt, 4, const_cast<void*>(base), dims, strides, box, estrides,
                                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return mkcclSuccess;
}

int attnVariant(const Tuning& t) {
  switch (t.attention.variant) {
    case Tuning::Attention::kOverlap: return kVariantOverlap;
    case Tuning::Attention::kSimple: return kVariantSimple;
    default: return kVariantFast;
  }
}

namespace {
FaultWord gFault;  // every attention kernel's (plain and ring)
}  // namespace

mkcclResult_t faultWord(int** deviceWord) { return gFault.device(deviceWord); }

mkcclResult_t checkFault(const char* op) {
  const int code = gFault.take();
  if (code == 0) return mkcclSuccess;
  const int site = code & 0xff;
  return setError(mkcclInternalError,
                  "%s: an earlier attention kernel gave up waiting on its %s barrier (block %d): a bug in the "
                  "attention engine; that result was wrong",
                  op, site == kAttnFaultProducer ? "producer (empty)" : site == kAttnFaultConsumer ? "consumer (full)" : "comm",
                  (code >> 8) - 1);
}

mkcclResult_t dispatch(const AttnLaunch& l, mkcclDataType_t t, int headDim) {
  if (t == mkcclBfloat16) return headDim == 64 ? attnLaunchBf16D64(l) : attnLaunchBf16D128(l);
  return headDim == 64 ? attnLaunchF16D64(l) : attnLaunchF16D128(l);
}


}  // namespace attn
}  // namespace mkccl
