// Communicator configuration: the user's mkcclConfig_t, then the settings (base/settings.h:
// environment variables), then defaults.
#pragma once
#include <stddef.h>
#include "mkccl.h"
#include "runtime/comm.h"

namespace mkccl {

// Checks the struct (size first, then magic, version, ranges) and fills *out. config may be NULL.
// The settings must have been refreshed (settingsRefresh) by the caller.
mkcclResult_t resolveConfig(const mkcclConfig_t* config, ResolvedConfig* out);

}  // namespace mkccl
