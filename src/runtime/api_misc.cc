// Library-level entry points: version, error strings, last error.
#include "mkccl.h"
#include "runtime/comm.h"
#include "base/check.h"
#include "runtime/ops.h"

using namespace mkccl;

mkcclResult_t mkcclGetVersion(int* version) {
  ARG_CHECK(version != nullptr, "mkcclGetVersion: version is NULL");
  *version = MKCCL_VERSION_CODE;
  return mkcclSuccess;
}

const char* mkcclGetErrorString(mkcclResult_t result) {
  switch (result) {
    case mkcclSuccess: return "no error";
    case mkcclUnhandledCudaError: return "unhandled CUDA error (run with MKCCL_DEBUG=WARN for details)";
    case mkcclSystemError: return "unhandled system error (run with MKCCL_DEBUG=WARN for details)";
    case mkcclInternalError: return "internal error - please report this issue";
    case mkcclInvalidArgument: return "invalid argument (run with MKCCL_DEBUG=WARN for details)";
    case mkcclInvalidUsage: return "invalid usage (run with MKCCL_DEBUG=WARN for details)";
    case mkcclRemoteError: return "remote process exited or there was a network error";
    case mkcclInProgress: return "operation in progress";
    case mkcclTimeout: return "a wait timed out (MKCCL_TIMEOUT_MS / config.timeoutMs)";
    default: return "unknown result code";
  }
}

const char* mkcclGetLastError(mkcclComm_t comm) {
  if (comm != nullptr && commLookup(comm, nullptr) == mkcclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errMutex);
    if (!comm->lastError.empty()) {
      // Copied to a thread-local string: the comm's may change under a later error.
      thread_local std::string copy;
      copy = comm->lastError;
      return copy.c_str();
    }
  }
  return lastError();
}

mkcclResult_t mkcclSetTuning(mkcclComm_t comm, const char* tuning) {
  if (comm != nullptr) MKCCL_CHECK(commCheckUsable(comm, "mkcclSetTuning"));
  return setTuning(comm, tuning);
}
