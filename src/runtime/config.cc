// Configuration resolution. The documented knobs are few on purpose: timeout, the SM split, the
// workspace size, blocking init; everything else is chosen by heuristics.
#include "runtime/config.h"
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include "runtime/check.h"

namespace mkccl {

mkcclResult_t envInt(const char* name, long long lo, long long hi, long long* out) {
  const char* s = getenv(name);
  if (!s || !*s) return mkcclSuccess;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(s, &end, 0);
  // Allow a binary suffix for sizes (K, M, G).
  if (end && (*end == 'K' || *end == 'k')) v <<= 10, ++end;
  else if (end && (*end == 'M' || *end == 'm')) v <<= 20, ++end;
  else if (end && (*end == 'G' || *end == 'g')) v <<= 30, ++end;
  ARG_CHECK(errno == 0 && end && *end == 0 && v >= lo && v <= hi, "%s=%s: expected an integer in [%lld, %lld]", name,
            s, lo, hi);
  *out = v;
  return mkcclSuccess;
}

mkcclResult_t envRanksPerNode(int* out) {
  long long v = 0;
  MKCCL_CHECK(envInt("MKCCL_RANKS_PER_NODE", 1, 1 << 20, &v));
  *out = (int)v;
  return mkcclSuccess;
}

mkcclResult_t envShareGpus(bool* out) {
  long long v = 0;
  MKCCL_CHECK(envInt("MKCCL_SHARE_GPUS", 0, 1, &v));
  *out = v != 0;
  return mkcclSuccess;
}

mkcclResult_t resolveConfig(const mkcclConfig_t* config, ResolvedConfig* out) {
  ResolvedConfig r;
  long long v = r.timeoutMs;
  MKCCL_CHECK(envInt("MKCCL_TIMEOUT_MS", 1, 1ll << 31, &v));
  r.timeoutMs = (int)v;
  v = -1;
  MKCCL_CHECK(envInt("MKCCL_COMM_CTAS", 0, 1024, &v));
  r.commCtas = (int)v;
  v = -1;
  MKCCL_CHECK(envInt("MKCCL_MAX_CTAS", 1, 1024, &v));
  r.maxCtas = (int)v;
  v = (long long)r.workspaceBytes;
  MKCCL_CHECK(envInt("MKCCL_WORKSPACE_BYTES", 1 << 20, 1ll << 40, &v));
  r.workspaceBytes = (size_t)v;

  if (config) {
    ARG_CHECK(config->magic == MKCCL_CONFIG_MAGIC,
              "config: bad magic 0x%x (initialize it with MKCCL_CONFIG_INITIALIZER)", config->magic);
    ARG_CHECK(config->version >= 1 && config->version <= MKCCL_CONFIG_VERSION,
              "config: version %u is not supported by this library (<= %d)", config->version, MKCCL_CONFIG_VERSION);
    // Version 1 ends before `tuning` (version 2).
    const size_t need = config->version >= 2 ? sizeof(mkcclConfig_t) : offsetof(mkcclConfig_t, tuning);
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
      ARG_CHECK(config->workspaceBytes >= (1 << 20), "config.workspaceBytes=%lld: expected >= 1 MiB",
                config->workspaceBytes);
      r.workspaceBytes = (size_t)config->workspaceBytes;
    }
  }
  *out = r;
  return mkcclSuccess;
}

}  // namespace mkccl
