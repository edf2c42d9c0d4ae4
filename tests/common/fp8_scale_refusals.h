// The refusals every fp8 call shares through fp8ScalesCheck (src/runtime/arg_checks.h), for the
// argument tests of mkcclGemmFp8, mkcclAllGatherGemmFp8 and mkcclGemmReduceScatterFp8 /
// mkcclGemmAllReduceFp8. Header-only: the standalone CPU tests include it by path.
#pragma once
#include <stdint.h>
#include "mkccl.h"

namespace mkccl {
namespace test {

// Call: a default-constructed valid call with members `scales` (mkcclFp8Scales_t, per-tensor,
// scaleA and scaleW 4-byte aligned) and `noScales` (true: pass NULL). refused(call, needle, want):
// expects `want` and a message naming the call and containing needle. blockBuilt: block scales
// are valid for the call (else they must be mkcclInvalidUsage).
template <class Call, class Refused>
void fp8ScaleRefusals(const Refused& refused, bool blockBuilt) {
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
  if (!blockBuilt) {
    c = Call();
    c.scales.kind = mkcclFp8ScaleBlock;
    refused(c, "block scales", mkcclInvalidUsage);
  }
  c = Call();
  c.scales.scaleA = nullptr;
  refused(c, "scaleA and scales->scaleW must not be NULL", mkcclInvalidArgument);
  c = Call();
  c.scales.scaleW = nullptr;
  refused(c, "scaleA and scales->scaleW must not be NULL", mkcclInvalidArgument);
  c = Call();
  c.scales.scaleA = misaligned(c.scales.scaleA);
  refused(c, "4-byte aligned", mkcclInvalidArgument);
  c = Call();
  c.scales.scaleW = misaligned(c.scales.scaleW);
  refused(c, "4-byte aligned", mkcclInvalidArgument);
}

}  // namespace test
}  // namespace mkccl
