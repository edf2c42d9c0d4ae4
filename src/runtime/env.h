// Environment variables that take one of a fixed set of values (the plan, push, tile and protocol
// overrides) or a number (the collectives' tuning): one parser each, one message. Unset or empty:
// *out = def. A value not in `names`: mkcclInvalidUsage naming the variable and every value it
// accepts (a typo never silently runs the default).
#pragma once
#include <initializer_list>
#include "mkccl.h"

namespace mkccl {

// *out = the index of the variable's value in `names`.
mkcclResult_t envChoice(const char* var, std::initializer_list<const char*> names, int def, int* out);
// An integer in [lo, hi], with an optional K, M or G suffix (x 2^10, 2^20, 2^30; decimal, or hex
// with 0x). Unset or empty: *out = def. Anything else: mkcclInvalidUsage naming the variable.
mkcclResult_t envNumber(const char* var, long long def, long long lo, long long hi, long long* out);
// The same number rule over a string (`what` names the setting in the message).
mkcclResult_t parseNumber(const char* what, const char* text, long long lo, long long hi, long long* out);

}  // namespace mkccl
