// Configuration resolution. The documented knobs are few on purpose: timeout, the SM split, the
// workspace size, blocking init; everything else is chosen by heuristics.
#include "runtime/config.h"
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include "base/check.h"
#include "base/settings.h"

namespace mkccl {

mkcclResult_t resolveConfig(const mkcclConfig_t* config, ResolvedConfig* out) {
  const Settings& s = settings();
  ResolvedConfig r;
  r.timeoutMs = s.timeoutMs;
  r.commCtas = s.commCtas;
  r.maxCtas = s.maxCtas;
  r.workspaceBytes = (size_t)s.workspaceBytes;

  if (config) {
    // size first: it says how many bytes of the struct may be read (it is its first field). The
    // smallest struct is version 1's, which ends before `tuning` (version 2).
    constexpr size_t kVersion1Bytes = offsetof(mkcclConfig_t, tuning);
    ARG_CHECK(config->size >= kVersion1Bytes,
              "config: size %zu is smaller than mkcclConfig_t (%zu): initialize it with MKCCL_CONFIG_INITIALIZER",
              config->size, sizeof(mkcclConfig_t));
    ARG_CHECK(config->magic == MKCCL_CONFIG_MAGIC,
              "config: bad magic 0x%x (initialize it with MKCCL_CONFIG_INITIALIZER)", config->magic);
    ARG_CHECK(config->version >= 1 && config->version <= MKCCL_CONFIG_VERSION,
              "config: version %u is not supported by this library (<= %d)", config->version, MKCCL_CONFIG_VERSION);
    const size_t need = config->version >= 2 ? sizeof(mkcclConfig_t) : kVersion1Bytes;
    ARG_CHECK(config->size >= need, "config: size %zu is smaller than version %u of mkcclConfig_t (%zu)",
              config->size, config->version, need);
    const int U = MKCCL_CONFIG_UNDEF_INT;
    if (config->blocking != U) {
      ARG_CHECK(config->blocking == 0 || config->blocking == 1, "config.blocking=%d: expected 0 or 1",
                config->blocking);
      r.blocking = config->blocking == 1;
    }
    if (config->timeoutMs != U) {
      ARG_CHECK(config->timeoutMs > 0, "config.timeoutMs=%d: expected > 0", config->timeoutMs);
      r.timeoutMs = config->timeoutMs;
    }
    if (config->commCtas != U) {
      ARG_CHECK(config->commCtas >= 0 && config->commCtas <= 1024, "config.commCtas=%d: expected 0..1024",
                config->commCtas);
      r.commCtas = config->commCtas;
    }
    if (config->maxCtas != U) {
      ARG_CHECK(config->maxCtas >= 1 && config->maxCtas <= 1024, "config.maxCtas=%d: expected 1..1024",
                config->maxCtas);
      r.maxCtas = config->maxCtas;
    }
    if (config->workspaceBytes != (long long)U) {
      ARG_CHECK(config->workspaceBytes >= (1ll << 20) && config->workspaceBytes <= (1ll << 40),
                "config.workspaceBytes=%lld: expected 1 MiB .. 1 TiB", config->workspaceBytes);
      r.workspaceBytes = (size_t)config->workspaceBytes;
    }
  }
  *out = r;
  return mkcclSuccess;
}

}  // namespace mkccl
