#include "runtime/arg_checks.h"
#include "base/check.h"

namespace mkccl {

mkcclResult_t fp8ScalesCheck(const char* op, const mkcclFp8Scales_t* scales) {
  ARG_CHECK(scales != nullptr, "%s: scales must not be NULL", op);
  ARG_CHECK(scales->size >= sizeof(mkcclFp8Scales_t),
            "%s: scales->size=%zu: set it to sizeof(mkcclFp8Scales_t) (%zu) or use MKCCL_FP8_SCALES_INIT", op,
            scales->size, sizeof(mkcclFp8Scales_t));
  ARG_CHECK(scales->kind == mkcclFp8ScaleTensor || scales->kind == mkcclFp8ScaleBlock,
            "%s: scales->kind=%d must be mkcclFp8ScaleTensor or mkcclFp8ScaleBlock", op,
            static_cast<int>(scales->kind));
  ARG_CHECK(scales->scaleA && scales->scaleW, "%s: scales->scaleA and scales->scaleW must not be NULL", op);
  ARG_CHECK(isAligned(scales->scaleA, 4) && isAligned(scales->scaleW, 4),
            "%s: the scales must be 4-byte aligned floats", op);
  return mkcclSuccess;
}

}  // namespace mkccl
