// Socket I/O of the launcher's hub and its clients (private to tools/launch). Every wait is a poll()
// bounded by a timeout and, on the hub's side, interruptible through a stop fd.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string>

namespace mkccl {
namespace launch {

constexpr int kNoTimeout = -1;

// Returns 0, or -1 with the reason in *err. timeoutMs == kNoTimeout: no limit. stopFd >= 0: give up
// as soon as it is readable.
int writeAll(int fd, const void* buf, size_t len, int timeoutMs, int stopFd, const char* what, std::string* err);
int readAll(int fd, void* buf, size_t len, int timeoutMs, int stopFd, const char* what, std::string* err);

// A listening TCP socket on 127.0.0.1 (any port); *addr = "127.0.0.1:<port>".
int listenLoopback(int* fd, std::string* addr, std::string* err);
// Connects to "<ipv4>:<port>", retrying while refused until the timeout.
int connectLoopback(const std::string& addr, int timeoutMs, int* fd, std::string* err);

// *ms = MKCCL_LAUNCH_TIMEOUT_MS (base/settings.h; default 600 s): the bound on one host
// collective of the world. 1 with *err naming the variable when its value is not valid.
int hostTimeoutMs(int* ms, std::string* err);

}  // namespace launch
}  // namespace mkccl
