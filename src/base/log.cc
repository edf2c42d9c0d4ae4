// MKCCL_DEBUG logging and the per-thread last-error message.
#include "base/log.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <mutex>
#include <string>
#include "base/settings.h"

namespace mkccl {
namespace {

thread_local int tlsRank = -1;
thread_local std::string tlsLastError;
std::mutex logMutex;  // one line at a time from the threads of a process

const char* hostName() {
  static char name[64] = {0};
  if (!name[0]) {
    gethostname(name, sizeof(name) - 1);
    if (char* dot = strchr(name, '.')) *dot = 0;
  }
  return name;
}

}  // namespace

namespace {
std::atomic<int> gLevel{-1};  // -1: not read yet
}  // namespace

LogLevel logLevel() {
  int l = gLevel.load(std::memory_order_relaxed);
  if (l >= 0) return (LogLevel)l;
  // WARN while MKCCL_DEBUG is parsed, so that the parser's own complaint is shown.
  int expected = -1;
  gLevel.compare_exchange_strong(expected, (int)LogLevel::Warn);
  LogLevel level = settingsDebugLevel();
  gLevel.store((int)level);
  return level;
}

void logSetLevel(LogLevel level) { gLevel.store((int)level); }

void setLogRank(int rank) { tlsRank = rank; }

static void vlog(LogLevel level, const char* file, int line, const char* fmt, va_list ap) {
  static const char* names[] = {"", "WARN", "INFO", "TRACE"};
  char msg[2048];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char rank[24] = "";
  if (tlsRank >= 0) snprintf(rank, sizeof(rank), " [%d]", tlsRank);
  std::lock_guard<std::mutex> lock(logMutex);
  if (level == LogLevel::Trace) {
    // Trace lines carry CLOCK_MONOTONIC in microseconds: one clock for every process of a host,
    // so the proxies' lines of several ranks order into one timeline.
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double us = (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
    fprintf(stderr, "%s:%d:%ld%s MKCCL %s %.1f %s:%d %s\n", hostName(), (int)getpid(), (long)syscall(SYS_gettid), rank,
            names[(int)level], us, base, line, msg);
  }
  else
    fprintf(stderr, "%s:%d:%ld%s MKCCL %s %s\n", hostName(), (int)getpid(), (long)syscall(SYS_gettid), rank,
            names[(int)level], msg);
}

void logf(LogLevel level, const char* file, int line, const char* fmt, ...) {
  if (logLevel() < level) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(level, file, line, fmt, ap);
  va_end(ap);
}

mkcclResult_t setError(mkcclResult_t res, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  tlsLastError = msg;
  if (logLevel() >= LogLevel::Warn) logf(LogLevel::Warn, __FILE__, __LINE__, "%s", msg);
  return res;
}

const char* lastError() { return tlsLastError.c_str(); }

mkcclResult_t recordError(mkcclResult_t res, const char* msg) {
  tlsLastError = msg;
  return res;
}

}  // namespace mkccl
