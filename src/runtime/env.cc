#include "runtime/env.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include "runtime/check.h"

namespace mkccl {

mkcclResult_t envChoice(const char* var, std::initializer_list<const char*> names, int def, int* out) {
  *out = def;
  const char* s = getenv(var);
  if (s == nullptr || *s == '\0') return mkcclSuccess;
  int i = 0;
  std::string list;
  for (const char* n : names) {
    if (strcmp(s, n) == 0) {
      *out = i;
      return mkcclSuccess;
    }
    if (i > 0) list += i + 1 == static_cast<int>(names.size()) ? " or " : ", ";
    list += n;
    ++i;
  }
  return setError(mkcclInvalidUsage, "%s=%s: expected %s", var, s, list.c_str());
}

mkcclResult_t parseNumber(const char* what, const char* s, long long lo, long long hi, long long* out) {
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(s, &end, 0);
  int shift = 0;
  if (end != s && *end != '\0' && end[1] == '\0') {
    if (*end == 'k' || *end == 'K') shift = 10;
    else if (*end == 'm' || *end == 'M') shift = 20;
    else if (*end == 'g' || *end == 'G') shift = 30;
    if (shift) ++end;
  }
  // Range-checked before the shift too, so that the shift cannot overflow.
  const bool ok = end != s && *end == '\0' && errno == 0 && v >= (lo >> shift) && v <= (hi >> shift) &&
                  (v << shift) >= lo && (v << shift) <= hi;
  if (!ok)
    return setError(mkcclInvalidUsage, "%s=%s: expected a number in [%lld, %lld] (K, M, G suffixes allowed)", what, s,
                    lo, hi);
  *out = v << shift;
  return mkcclSuccess;
}

mkcclResult_t envNumber(const char* var, long long def, long long lo, long long hi, long long* out) {
  *out = def;
  const char* s = getenv(var);
  if (s == nullptr || *s == '\0') return mkcclSuccess;
  return parseNumber(var, s, lo, hi, out);
}

}  // namespace mkccl
