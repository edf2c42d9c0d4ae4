// SCM_RIGHTS fd exchange among the local ranks (see fdpass.h).
#include "transport/nvlink/fdpass.h"
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <chrono>
#include "base/check.h"

namespace mkccl {
namespace {

constexpr uint32_t kFdMagic = 0x6d6b6664;  // "mkfd"

struct FdHeader {
  uint32_t magic;
  int32_t fromLocalRank;
  uint64_t token;
};

socklen_t socketName(sockaddr_un* addr, uint64_t token, int globalRank) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, nothing on the file system to clean up.
  int n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "mkccl-%016llx-%d", (unsigned long long)token,
                   globalRank);
  return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + n);
}

int remainingMs(std::chrono::steady_clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return ms < 0 ? 0 : (int)ms;
}

mkcclResult_t sendFd(uint64_t token, int peerGlobal, int myLocal, int fd, std::chrono::steady_clock::time_point deadline) {
  sockaddr_un addr;
  socklen_t len = socketName(&addr, token, peerGlobal);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SYS_CHECK(s);
  // The peer listens before the bootstrap barrier we passed, so connect only fails on real errors;
  // retry briefly anyway (a full backlog answers EAGAIN).
  while (connect(s, (sockaddr*)&addr, len) != 0) {
    if ((errno != EAGAIN && errno != ECONNREFUSED) || remainingMs(deadline) == 0) {
      int err = errno;
      close(s);
      return setError(mkcclSystemError, "fd exchange: connect to rank %d failed: %s", peerGlobal, strerror(err));
    }
    usleep(1000);
  }
  FdHeader h{kFdMagic, myLocal, token};
  iovec iov{&h, sizeof(h)};
  char ctrl[CMSG_SPACE(sizeof(int))];
  memset(ctrl, 0, sizeof(ctrl));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof(ctrl);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n = sendmsg(s, &msg, MSG_NOSIGNAL);
  int err = errno;
  close(s);
  if (n != (ssize_t)sizeof(h))
    return setError(mkcclSystemError, "fd exchange: sending to rank %d failed: %s", peerGlobal, strerror(err));
  return mkcclSuccess;
}

mkcclResult_t recvFd(int listener, uint64_t token, int localRanks, std::chrono::steady_clock::time_point deadline,
                     int* fromLocal, int* fd) {
  pollfd p{listener, POLLIN, 0};
  int r = poll(&p, 1, remainingMs(deadline));
  if (r == 0) return setError(mkcclTimeout, "fd exchange: timed out waiting for a local peer's memory handle");
  SYS_CHECK(r);
  int s = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  SYS_CHECK(s);
  pollfd q{s, POLLIN, 0};
  if (poll(&q, 1, remainingMs(deadline)) <= 0) {
    close(s);
    return setError(mkcclTimeout, "fd exchange: a local peer connected but sent nothing");
  }
  FdHeader h{};
  iovec iov{&h, sizeof(h)};
  char ctrl[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof(ctrl);
  ssize_t n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
  int err = errno;
  close(s);
  if (n != (ssize_t)sizeof(h))
    return setError(mkcclSystemError, "fd exchange: short message from a local peer (%zd bytes: %s)", n, strerror(err));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS)
    return setError(mkcclInternalError, "fd exchange: a local peer's message carried no file descriptor");
  memcpy(fd, CMSG_DATA(c), sizeof(int));
  if (h.magic != kFdMagic || h.token != token || h.fromLocalRank < 0 || h.fromLocalRank >= localRanks) {
    close(*fd);
    return setError(mkcclInternalError, "fd exchange: malformed message (magic %x, local rank %d)", h.magic,
                    h.fromLocalRank);
  }
  *fromLocal = h.fromLocalRank;
  return mkcclSuccess;
}

}  // namespace

mkcclResult_t exchangeFds(uint64_t token, const std::function<mkcclResult_t()>& barrier,
                          const std::vector<int>& localRanks, int localRank, int myFd, int timeoutMs,
                          std::vector<int>* fds) {
  const int n = (int)localRanks.size();
  fds->assign(n, -1);
  (*fds)[localRank] = myFd;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SYS_CHECK(listener);
  sockaddr_un addr;
  socklen_t len = socketName(&addr, token, localRanks[localRank]);
  if (bind(listener, (sockaddr*)&addr, len) != 0 || listen(listener, 64) != 0) {
    int err = errno;
    close(listener);
    return setError(mkcclSystemError, "fd exchange: cannot listen on an abstract Unix socket: %s", strerror(err));
  }
  // Everybody listens before anybody connects.
  mkcclResult_t res = barrier();
  for (int q = 0; res == mkcclSuccess && q < n; ++q)
    if (q != localRank) res = sendFd(token, localRanks[q], localRank, myFd, deadline);
  for (int got = 0; res == mkcclSuccess && got < n - 1; ++got) {
    int from = -1, fd = -1;
    res = recvFd(listener, token, n, deadline, &from, &fd);
    if (res == mkcclSuccess) {
      if ((*fds)[from] != -1 || from == localRank) {
        close(fd);
        res = setError(mkcclInternalError, "fd exchange: local rank %d sent twice", from);
      } else {
        (*fds)[from] = fd;
      }
    }
  }
  close(listener);
  // Nobody leaves (and tears down its listener) while a peer may still connect to it.
  mkcclResult_t b = barrier();
  if (res == mkcclSuccess) res = b;
  if (res != mkcclSuccess)
    for (int q = 0; q < n; ++q)
      if (q != localRank && (*fds)[q] >= 0) close((*fds)[q]), (*fds)[q] = -1;
  return res;
}

}  // namespace mkccl
