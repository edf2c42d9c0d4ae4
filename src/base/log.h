// Logging (MKCCL_DEBUG=WARN|INFO|TRACE, read by base/settings.h; stderr, rank prefix) and the
// last-error message.
#pragma once
#include "mkccl.h"

namespace mkccl {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel logLevel();
// Sets the level (the settings reader, when MKCCL_DEBUG changed).
void logSetLevel(LogLevel level);
// The rank shown in this thread's log prefix (-1: none). Set while a thread works for a comm.
void setLogRank(int rank);
void logf(LogLevel level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Records msg as this thread's last error (mkcclGetLastError), logs it at WARN, returns res.
mkcclResult_t setError(mkcclResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* lastError();
// Records msg as this thread's last error without logging it (an error logged once already).
mkcclResult_t recordError(mkcclResult_t res, const char* msg);

}  // namespace mkccl

#define MKCCL_WARN(...) ::mkccl::logf(::mkccl::LogLevel::Warn, __FILE__, __LINE__, __VA_ARGS__)
#define MKCCL_INFO(...)                                                                 \
  do {                                                                                  \
    if (::mkccl::logLevel() >= ::mkccl::LogLevel::Info)                                 \
      ::mkccl::logf(::mkccl::LogLevel::Info, __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)
#define MKCCL_TRACE(...)                                                                \
  do {                                                                                  \
    if (::mkccl::logLevel() >= ::mkccl::LogLevel::Trace)                                \
      ::mkccl::logf(::mkccl::LogLevel::Trace, __FILE__, __LINE__, __VA_ARGS__);         \
  } while (0)
