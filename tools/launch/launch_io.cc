// Socket I/O of the launcher (see launch_io.h).
#include "launch/launch_io.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <climits>
#include "base/settings.h"

namespace mkccl {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

int msLeft(Clock::time_point end, int timeoutMs) {
  if (timeoutMs == kNoTimeout) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
  return ms <= 0 ? 0 : (int)std::min<long long>(ms, INT_MAX);
}

int fail(std::string* err, const std::string& msg) {
  if (err) *err = msg;
  return -1;
}

// Waits until fd is ready for `events`: 0 ready, -1 with *err otherwise.
int waitFd(int fd, short events, Clock::time_point end, int timeoutMs, int stopFd, const char* what,
           std::string* err) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {stopFd, POLLIN, 0}};
    int n = poll(p, stopFd >= 0 ? 2 : 1, msLeft(end, timeoutMs));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(err, std::string(what) + ": poll failed: " + strerror(errno));
    if (n == 0)
      return fail(err, std::string(what) + ": timed out after " + std::to_string(timeoutMs) +
                           " ms (MKCCL_LAUNCH_TIMEOUT_MS; a rank may have hung or exited)");
    if (stopFd >= 0 && p[1].revents) return fail(err, std::string(what) + ": stopped");
    return 0;
  }
}

}  // namespace

int writeAll(int fd, const void* buf, size_t len, int timeoutMs, int stopFd, const char* what, std::string* err) {
  auto end = Clock::now() + std::chrono::milliseconds(timeoutMs == kNoTimeout ? 0 : timeoutMs);
  const char* p = (const char*)buf;
  while (len > 0) {
    ssize_t r = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      p += r, len -= (size_t)r;
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (waitFd(fd, POLLOUT, end, timeoutMs, stopFd, what, err)) return -1;
      continue;
    }
    return fail(err, std::string(what) + ": the other side went away (" + strerror(errno) + ")");
  }
  return 0;
}

int readAll(int fd, void* buf, size_t len, int timeoutMs, int stopFd, const char* what, std::string* err) {
  auto end = Clock::now() + std::chrono::milliseconds(timeoutMs == kNoTimeout ? 0 : timeoutMs);
  char* p = (char*)buf;
  while (len > 0) {
    ssize_t r = recv(fd, p, len, MSG_DONTWAIT);
    if (r > 0) {
      p += r, len -= (size_t)r;
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (waitFd(fd, POLLIN, end, timeoutMs, stopFd, what, err)) return -1;
      continue;
    }
    return fail(err, std::string(what) + ": the other side went away (" + (r == 0 ? "end of stream" : strerror(errno)) +
                         ")");
  }
  return 0;
}

int listenLoopback(int* fd, std::string* addr, std::string* err) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(err, std::string("socket: ") + strerror(errno));
  sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(s, (sockaddr*)&a, sizeof(a)) != 0 || listen(s, SOMAXCONN) != 0 || getsockname(s, (sockaddr*)&a, &len) != 0) {
    int e = errno;
    close(s);
    return fail(err, std::string("cannot listen on 127.0.0.1: ") + strerror(e));
  }
  *fd = s;
  *addr = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  return 0;
}

int connectLoopback(const std::string& addr, int timeoutMs, int* fd, std::string* err) {
  size_t colon = addr.rfind(':');
  sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  char* end = nullptr;
  long port = colon == std::string::npos ? 0 : strtol(addr.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || port <= 0 || port > 65535 || *end ||
      inet_pton(AF_INET, addr.substr(0, colon).c_str(), &a.sin_addr) != 1)
    return fail(err, "bad hub address \"" + addr + "\" (expected <ipv4>:<port>)");
  a.sin_port = htons((uint16_t)port);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return fail(err, std::string("socket: ") + strerror(errno));
    if (connect(s, (sockaddr*)&a, sizeof(a)) == 0) {
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
      *fd = s;
      return 0;
    }
    int e = errno;
    close(s);
    if ((e != ECONNREFUSED && e != EINTR && e != EAGAIN) || Clock::now() >= deadline)
      return fail(err, "cannot connect to the hub at " + addr + ": " + strerror(e));
    usleep(20000);
  }
}

int hostTimeoutMs(int* ms, std::string* err) {
  // Not MKCCL_TIMEOUT_MS: tests shorten the library's timeout without wanting the world's
  // host collectives (between long benchmarks) cut short.
  if (settingsCheck(SettingId::LaunchTimeoutMs) != mkcclSuccess) {
    if (err) *err = lastError();
    return 1;
  }
  *ms = settings().launchTimeoutMs;
  return 0;
}

}  // namespace launch
}  // namespace mkccl
