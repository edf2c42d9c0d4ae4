// The refusals every fp8 call shares through fp8ScalesCheck (src/runtime/arg_checks.h), for the
// argument tests of mkcclGemmFp8, mkcclAllGatherGemmFp8 and mkcclGemmReduceScatterFp8 /
// mkcclGemmAllReduceFp8. Header-only: the standalone CPU tests include it by path.
#pragma once
#include <stdint.h>
#include <string>
#include "mkccl.h"

namespace mkccl {
namespace test {

// Call: a default-constructed valid call with members `scales` (mkcclFp8Scales_t, per-tensor,
// scaleA and scaleW 4-byte aligned) and `noScales` (true: pass NULL). refused(call, needle, want):
// expects `want` and a message naming the call and containing needle. Every fp8 call takes both
// kinds, so the pointer checks run for each.
template <class Call, class Refused>
void fp8ScaleRefusals(const Refused& refused) {
  auto misaligned = [](const float* p) {
    return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(p) + 2);
  };
  Call c;
  c.noScales = true;
  refused(c, "scales must not be NULL", mkcclInvalidArgument);
  c = Call();
  c.scales.size = 8;
  refused(c, "scales->size", mkcclInvalidArgument);
  for (int kind : {5, 7}) {
    c = Call();
    c.scales.kind = static_cast<mkcclFp8ScaleKind_t>(kind);
    refused(c, kind == 5 ? "scales->kind=5" : "scales->kind=7", mkcclInvalidArgument);
  }
  for (mkcclFp8ScaleKind_t kind : {mkcclFp8ScaleTensor, mkcclFp8ScaleBlock}) {
    c = Call();
    c.scales.kind = kind;
    c.scales.scaleA = nullptr;
    refused(c, "scaleA and scales->scaleW must not be NULL", mkcclInvalidArgument);
    c = Call();
    c.scales.kind = kind;
    c.scales.scaleW = nullptr;
    refused(c, "scaleA and scales->scaleW must not be NULL", mkcclInvalidArgument);
    c = Call();
    c.scales.kind = kind;
    c.scales.scaleA = misaligned(c.scales.scaleA);
    refused(c, "4-byte aligned", mkcclInvalidArgument);
    c = Call();
    c.scales.kind = kind;
    c.scales.scaleW = misaligned(c.scales.scaleW);
    refused(c, "4-byte aligned", mkcclInvalidArgument);
  }
}

// The shape refusals the two fused fp8 calls share (mkcclAllGatherGemmFp8,
// mkcclGemmReduceScatterFp8): M = 0, M not divisible by the ranks (255 on the default call's
// ranks), K not a multiple of 16, N of 2^31, and narrowN: an N whose row of C is not a multiple
// of 16 bytes (TMA).
// Call: a default-constructed valid call with members M, N, K.
template <class Call, class Refused>
void fusedFp8ShapeRefusals(const Refused& refused, size_t narrowN) {
  Call c;
  c.M = 0;
  refused(c, "M=0", mkcclInvalidArgument);
  c = Call();
  c.M = 255;
  refused(c, "divisible", mkcclInvalidArgument);
  c = Call();
  c.K = 24;
  refused(c, "K=24", mkcclInvalidArgument);
  c = Call();
  c.N = 1ull << 31;
  refused(c, "2^31", mkcclInvalidArgument);
  c = Call();
  c.N = narrowN;
  refused(c, ("N=" + std::to_string(narrowN)).c_str(), mkcclInvalidArgument);
}

}  // namespace test
}  // namespace mkccl
