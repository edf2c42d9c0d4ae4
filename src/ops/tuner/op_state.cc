// The ops' per-communicator state (op_state.h), made at communicator init, and mkcclSetTuning.
#include "ops/tuner/op_state.h"
#include <stddef.h>
#include "base/check.h"
#include "base/log.h"
#include "runtime/ops.h"

namespace mkccl {

mkcclResult_t opStateCreate(const mkcclConfig_t* config, std::shared_ptr<OpState>* out) {
  auto s = std::make_shared<OpState>();
  // mkcclConfig_t.tuning exists from version 2; an older struct has no such field.
  const bool hasField = config != nullptr && config->version >= 2 &&
                        config->size >= offsetof(mkcclConfig_t, tuning) + sizeof(config->tuning);
  if (hasField && config->tuning != nullptr)
    MKCCL_CHECK(parseTuning("config.tuning", config->tuning, &s->tuning));
  else
    MKCCL_CHECK(processTuning(&s->tuning));
  const std::string set = tuningString(s->tuning);
  if (!set.empty()) MKCCL_INFO("tuning overrides: %s", set.c_str());
  *out = std::move(s);
  return mkcclSuccess;
}

mkcclResult_t setTuning(mkcclComm* comm, const char* text) {
  if (comm == nullptr) return setProcessTuning(text);
  Tuning t;
  MKCCL_CHECK(parseTuning("mkcclSetTuning", text, &t));
  OpState& s = opState(comm);
  std::lock_guard<std::mutex> lock(s.mu);
  s.tuning = t;
  for (std::shared_ptr<void>& c : s.caches) c.reset();  // plans follow the overrides
  MKCCL_INFO("tuning overrides: %s", text && *text ? text : "(none)");
  return mkcclSuccess;
}

}  // namespace mkccl
