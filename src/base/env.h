// The one parser of the library's settings: numbers and fixed choices, from the environment or from
// text (a tuning string "key=value;key=value", a config field). A value that is not what the
// setting takes is an error naming the setting and what it accepts (a typo never silently runs the
// default); ranges are checked without overflow, suffix included.
//
// Numbers: an optional sign, decimal digits or 0x and hex digits, and an optional K, M or G suffix
// (x 2^10, 2^20, 2^30). Nothing else: no blanks, no octal, no fractions.
#pragma once
#include <initializer_list>
#include "mkccl.h"

namespace mkccl {

// *out = the value of `text` if it is an integer in [lo, hi]; else mkcclInvalidUsage with the
// message "<what>=<text>: expected ..." and *out unchanged.
mkcclResult_t parseNumber(const char* what, const char* text, long long lo, long long hi, long long* out);
// *out = the index of `text` in `names` (exact match); else mkcclInvalidUsage naming `what` and
// every value it accepts, *out unchanged.
mkcclResult_t parseChoice(const char* what, const char* text, std::initializer_list<const char*> names, int* out);

// The same over an environment variable. Unset or empty: *out = def. An error leaves *out = def.
// (The user-facing MKCCL_* settings are read by base/settings.h; these are for the tuning
// variables.)
mkcclResult_t envChoice(const char* var, std::initializer_list<const char*> names, int def, int* out);
mkcclResult_t envNumber(const char* var, long long def, long long lo, long long hi, long long* out);

}  // namespace mkccl
