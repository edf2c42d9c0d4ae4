#include "runtime/env.h"
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

}  // namespace mkccl
