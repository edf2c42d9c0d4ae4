// Communicator configuration: the user's mkcclConfig_t, then environment variables, then defaults.
#pragma once
#include <stddef.h>
#include "mkccl.h"
#include "runtime/comm.h"

namespace mkccl {

// Checks the struct (size, magic, version, ranges) and fills *out. config may be NULL.
mkcclResult_t resolveConfig(const mkcclConfig_t* config, ResolvedConfig* out);

// Integer environment variable: *out keeps its value when unset. mkcclInvalidArgument (with the
// variable named) when set but not an integer in [lo, hi].
mkcclResult_t envInt(const char* name, long long lo, long long hi, long long* out);

// MKCCL_RANKS_PER_NODE (0 when unset): emulate nodes of that many ranks on one host.
mkcclResult_t envRanksPerNode(int* out);
// MKCCL_SHARE_GPUS=1: ranks may share a GPU (a testing aid; init.cc, buildNodeMap, says more).
mkcclResult_t envShareGpus(bool* out);

}  // namespace mkccl
