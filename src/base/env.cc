// The settings parser (see env.h).
#include "base/env.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include "base/log.h"

namespace mkccl {
namespace {

int digitValue(char c, int base) {
  int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99;
  return d < base ? d : -1;
}

// The value of text, or false when it is not a number or its magnitude passes what a long long holds.
bool toNumber(const char* s, long long* out) {
  bool neg = false;
  if (*s == '+' || *s == '-') neg = *s++ == '-';
  int base = 10;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) base = 16, s += 2;
  // The magnitude as unsigned: -2^63 is representable, 2^63 is not.
  const unsigned long long limit = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
  unsigned long long m = 0;
  int digits = 0;
  for (; digitValue(*s, base) >= 0; s++, digits++) {
    unsigned d = (unsigned)digitValue(*s, base);
    if (m > (limit - d) / (unsigned long long)base) return false;
    m = m * (unsigned long long)base + d;
  }
  if (digits == 0) return false;
  int shift = 0;
  if (*s == 'k' || *s == 'K') shift = 10, s++;
  else if (*s == 'm' || *s == 'M') shift = 20, s++;
  else if (*s == 'g' || *s == 'G') shift = 30, s++;
  if (*s != '\0') return false;
  if (m > (limit >> shift)) return false;
  m <<= shift;
  *out = neg ? (long long)(0ull - m) : (long long)m;
  return true;
}

}  // namespace

mkcclResult_t parseNumber(const char* what, const char* text, long long lo, long long hi, long long* out) {
  long long v = 0;
  if (text && toNumber(text, &v) && v >= lo && v <= hi) {
    *out = v;
    return mkcclSuccess;
  }
  return setError(mkcclInvalidUsage, "%s=\"%s\": expected an integer in [%lld, %lld] (decimal or 0x hex; K, M, G "
                  "suffixes multiply by 2^10, 2^20, 2^30)", what, text ? text : "", lo, hi);
}

mkcclResult_t parseChoice(const char* what, const char* text, std::initializer_list<const char*> names, int* out) {
  int i = 0;
  std::string list;
  for (const char* n : names) {
    if (text && strcmp(text, n) == 0) {
      *out = i;
      return mkcclSuccess;
    }
    if (i > 0) list += i + 1 == static_cast<int>(names.size()) ? " or " : ", ";
    list += n;
    ++i;
  }
  return setError(mkcclInvalidUsage, "%s=\"%s\": expected %s", what, text ? text : "", list.c_str());
}

mkcclResult_t envChoice(const char* var, std::initializer_list<const char*> names, int def, int* out) {
  *out = def;
  const char* s = getenv(var);
  if (s == nullptr || *s == '\0') return mkcclSuccess;
  return parseChoice(var, s, names, out);
}

mkcclResult_t envNumber(const char* var, long long def, long long lo, long long hi, long long* out) {
  *out = def;
  const char* s = getenv(var);
  if (s == nullptr || *s == '\0') return mkcclSuccess;
  return parseNumber(var, s, lo, hi, out);
}

}  // namespace mkccl
