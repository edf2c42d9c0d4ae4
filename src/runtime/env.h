// Environment variables that take one of a fixed set of values (the plan, push and tile overrides):
// one parser, one message. Unset or empty: *out = def. A value not in `names`: mkcclInvalidUsage
// naming the variable and every value it accepts (a typo never silently runs the default).
#pragma once
#include <initializer_list>
#include "mkccl.h"

namespace mkccl {

// *out = the index of the variable's value in `names`.
mkcclResult_t envChoice(const char* var, std::initializer_list<const char*> names, int def, int* out);

}  // namespace mkccl
