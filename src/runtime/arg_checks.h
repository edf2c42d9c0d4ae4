// Argument checks shared by the API entry points; each message names the call (`op`) and the
// argument, and a mistake is mkcclInvalidArgument (mkcclInvalidUsage where the call exists but not
// for those arguments yet).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "mkccl.h"

namespace mkccl {

constexpr size_t kMaxTmaDim = (1ull << 31) - 1;  // TMA dimensions are 32-bit

// [pa, pa + na) and [pb, pb + nb) share a byte (a null pointer or an empty range shares none).
inline bool rangesOverlap(const void* pa, size_t na, const void* pb, size_t nb) {
  const char* a = static_cast<const char*>(pa);
  const char* b = static_cast<const char*>(pb);
  return a && b && na && nb && a < b + nb && b < a + na;
}

inline bool isAligned(const void* p, uintptr_t to) { return (reinterpret_cast<uintptr_t>(p) & (to - 1)) == 0; }

// An fp8 call's mkcclFp8Scales_t: present, sized, a known kind, both pointers set and 4-byte
// aligned. Every fp8 call takes both kinds.
mkcclResult_t fp8ScalesCheck(const char* op, const mkcclFp8Scales_t* scales);

// The bytes an fp8 call's scales cover (mkcclFp8Scales_t): per tensor one float each; block scales
// scaleA [rowsA][ceil(K/128)] (rowsA: the rows of A the caller passes) and scaleW
// [ceil(N/128)][ceil(K/128)].
inline size_t fp8ScaleABytes(mkcclFp8ScaleKind_t kind, size_t rowsA, size_t K) {
  return (kind == mkcclFp8ScaleBlock ? rowsA * ((K + 127) / 128) : 1) * sizeof(float);
}
inline size_t fp8ScaleWBytes(mkcclFp8ScaleKind_t kind, size_t N, size_t K) {
  return (kind == mkcclFp8ScaleBlock ? (N + 127) / 128 * ((K + 127) / 128) : 1) * sizeof(float);
}

}  // namespace mkccl
