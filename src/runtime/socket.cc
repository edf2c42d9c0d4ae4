// Socket helpers of the bootstrap (see socket.h).
#include "runtime/socket.h"
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <climits>
#include <vector>
#include "base/env.h"
#include "base/log.h"
#include "base/settings.h"

namespace mkccl {

int Deadline::remainingMs() const {
  auto left = end_ - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(left + std::chrono::microseconds(999)).count();
  return (int)std::min<int64_t>(ms, INT_MAX);
}

socklen_t socketAddrLen(const SocketAddress& a) {
  return a.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

std::string socketAddrToString(const SocketAddress& a) {
  char ip[INET6_ADDRSTRLEN] = "?";
  char out[INET6_ADDRSTRLEN + 16];
  if (a.sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a.sin.sin_addr, ip, sizeof(ip));
    snprintf(out, sizeof(out), "%s:%u", ip, ntohs(a.sin.sin_port));
  } else if (a.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a.sin6.sin6_addr, ip, sizeof(ip));
    snprintf(out, sizeof(out), "[%s]:%u", ip, ntohs(a.sin6.sin6_port));
  } else {
    snprintf(out, sizeof(out), "<family %d>", a.sa.sa_family);
  }
  return out;
}

bool socketAddrIsLoopback(const SocketAddress& a) {
  if (a.sa.sa_family == AF_INET) return (ntohl(a.sin.sin_addr.s_addr) >> 24) == 127;
  if (a.sa.sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr);
  return false;
}

bool socketAddrEqual(const SocketAddress& a, const SocketAddress& b) {
  if (a.sa.sa_family != b.sa.sa_family) return false;
  if (a.sa.sa_family == AF_INET)
    return a.sin.sin_port == b.sin.sin_port && a.sin.sin_addr.s_addr == b.sin.sin_addr.s_addr;
  if (a.sa.sa_family == AF_INET6)
    return a.sin6.sin6_port == b.sin6.sin6_port &&
           memcmp(&a.sin6.sin6_addr, &b.sin6.sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

// ---- interface choice ----

namespace {

struct IfFilter {
  bool set = false, exclude = false, exact = false;
  std::vector<std::string> names;

  bool matches(const char* ifname) const {
    bool hit = false;
    for (const std::string& n : names)
      if (exact ? n == ifname : strncmp(ifname, n.c_str(), n.size()) == 0) hit = true;
    return exclude ? !hit : hit;
  }
};

IfFilter parseIfFilter(const char* env) {
  IfFilter f;
  if (!env || !*env) return f;
  f.set = true;
  if (*env == '^') f.exclude = true, env++;
  if (*env == '=') f.exact = true, env++;
  std::string list(env);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    if (comma > pos) f.names.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return f;
}

// How good an address of a chosen interface is: IPv4, then global IPv6, then link-local IPv6.
int addrRank(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return 3;
  if (sa->sa_family == AF_INET6) {
    const in6_addr* a = &((const sockaddr_in6*)sa)->sin6_addr;
    return IN6_IS_ADDR_LINKLOCAL(a) ? 1 : 2;
  }
  return 0;
}

}  // namespace

mkcclResult_t socketFindInterface(SocketAddress* addr, std::string* ifname) {
  const std::string& envText = settings().socketIfname;
  const char* env = envText.c_str();
  IfFilter filter = parseIfFilter(env);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return setError(mkcclSystemError, "bootstrap: getifaddrs failed: %s", strerror(errno));

  // Interfaces in the order the kernel lists them; the first acceptable one wins.
  std::vector<std::string> order, upNames;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_name || std::find(order.begin(), order.end(), i->ifa_name) != order.end()) continue;
    order.push_back(i->ifa_name);
  }
  const ifaddrs* best = nullptr;
  for (const std::string& name : order) {
    int bestRank = 0;
    const ifaddrs* pick = nullptr;
    bool up = false, loop = false;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (name != i->ifa_name || !i->ifa_addr) continue;
      if (!(i->ifa_flags & IFF_UP)) continue;
      up = true;
      loop = i->ifa_flags & IFF_LOOPBACK;
      int r = addrRank(i->ifa_addr);
      if (r > bestRank) bestRank = r, pick = i;
    }
    if (!up || !pick) continue;
    upNames.push_back(name);
    if (filter.set) {
      if (!filter.matches(name.c_str())) continue;
    } else {
      if (loop || bestRank != 3 || !name.compare(0, 6, "docker") || !name.compare(0, 5, "virbr")) continue;
    }
    if (!best) best = pick;
  }

  mkcclResult_t res = mkcclSuccess;
  memset(addr, 0, sizeof(*addr));
  if (best) {
    *ifname = best->ifa_name;
    if (best->ifa_addr->sa_family == AF_INET) {
      memcpy(&addr->sin, best->ifa_addr, sizeof(sockaddr_in));
      addr->sin.sin_port = 0;
    } else {
      memcpy(&addr->sin6, best->ifa_addr, sizeof(sockaddr_in6));
      addr->sin6.sin6_port = 0;
      if (IN6_IS_ADDR_LINKLOCAL(&addr->sin6.sin6_addr)) addr->sin6.sin6_scope_id = if_nametoindex(best->ifa_name);
    }
  } else if (filter.set) {
    std::string avail;
    for (const std::string& n : upNames) avail += (avail.empty() ? "" : ", ") + n;
    res = setError(mkcclInvalidArgument,
                   "bootstrap: MKCCL_SOCKET_IFNAME=%s matches no UP interface with an IP address "
                   "(UP interfaces: %s)",
                   env, avail.empty() ? "none" : avail.c_str());
  } else {
    *ifname = "lo";
    addr->sin.sin_family = AF_INET;
    addr->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  freeifaddrs(list);
  if (res == mkcclSuccess) MKCCL_TRACE("bootstrap: using interface %s (%s)", ifname->c_str(), socketAddrToString(*addr).c_str());
  return res;
}

mkcclResult_t socketParseHostPort(const char* text, const char* what, SocketAddress* out) {
  std::string s(text ? text : "");
  std::string host, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close != std::string::npos && close + 1 < s.size() && s[close + 1] == ':')
      host = s.substr(1, close - 1), port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon != std::string::npos && s.find(':') == colon) host = s.substr(0, colon), port = s.substr(colon + 1);
  }
  if (host.empty() || port.empty())
    return setError(mkcclInvalidArgument,
                    "%s=\"%s\" is not <host>:<port> (IPv6 as [addr]:port, port 1-65535)", what, s.c_str());
  long long p = 0;
  if (parseNumber((std::string(what) + " port").c_str(), port.c_str(), 1, 65535, &p) != mkcclSuccess)
    return setError(mkcclInvalidArgument, "%s=\"%s\": %s", what, s.c_str(), lastError());
  addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    return setError(mkcclInvalidArgument, "%s=\"%s\": cannot resolve host \"%s\": %s", what, s.c_str(), host.c_str(),
                    gai_strerror(rc));
  const addrinfo* pick = res;  // prefer IPv4, as the interface choice does
  for (const addrinfo* r = res; r; r = r->ai_next)
    if (r->ai_family == AF_INET) {
      pick = r;
      break;
    }
  memset(out, 0, sizeof(*out));
  memcpy(out, pick->ai_addr, std::min<size_t>(pick->ai_addrlen, sizeof(*out)));
  if (out->sa.sa_family == AF_INET)
    out->sin.sin_port = htons((uint16_t)p);
  else
    out->sin6.sin6_port = htons((uint16_t)p);
  freeaddrinfo(res);
  return mkcclSuccess;
}

// ---- connections ----

namespace {

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Appends the watched sockets to pfds (hang-ups only: data arriving on them is not our business).
void addWatch(std::vector<pollfd>* pfds, const SocketWatch* w) {
  if (!w) return;
  for (int i = 0; i < w->n; i++) pfds->push_back({w->fds[i], POLLRDHUP, 0});
}

// true when a watched socket (they follow `first` in pfds) reported a hang-up; sets watch->fired.
bool watchFired(const std::vector<pollfd>& pfds, size_t first, SocketWatch* w) {
  if (!w) return false;
  for (int i = 0; i < w->n; i++)
    if (pfds[first + i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      w->fired = i;
      return true;
    }
  return false;
}

}  // namespace

void socketClose(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

mkcclResult_t socketListen(SocketAddress* addr, int* fd) {
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return setError(mkcclSystemError, "bootstrap: socket() failed: %s", strerror(errno));
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, &addr->sa, socketAddrLen(*addr)) != 0) {
    int e = errno;
    close(s);
    mkcclResult_t r = e == EADDRINUSE ? mkcclInvalidUsage : e == EADDRNOTAVAIL ? mkcclInvalidArgument : mkcclSystemError;
    return setError(r, "bootstrap: cannot bind to %s: %s%s",
                    socketAddrToString(*addr).c_str(), strerror(e),
                    e == EADDRNOTAVAIL ? " (not an address of this host)" : "");
  }
  if (listen(s, SOMAXCONN) != 0) {
    int e = errno;
    close(s);
    return setError(mkcclSystemError, "bootstrap: listen on %s failed: %s", socketAddrToString(*addr).c_str(),
                    strerror(e));
  }
  socklen_t len = sizeof(*addr);
  getsockname(s, &addr->sa, &len);
  *fd = s;
  return mkcclSuccess;
}

mkcclResult_t socketConnect(const SocketAddress& addr, const Deadline& dl, const char* what, int* fd,
                            SocketWatch* watch) {
  int backoffMs = 5;
  int lastErr = 0;
  for (;;) {
    int s = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return setError(mkcclSystemError, "bootstrap: socket() failed: %s", strerror(errno));
    int err = 0;
    if (connect(s, &addr.sa, socketAddrLen(addr)) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p = {s, POLLOUT, 0};
        int n;
        while ((n = poll(&p, 1, dl.remainingMs())) < 0 && errno == EINTR) {
        }
        socklen_t len = sizeof(err);
        if (n == 1)
          getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        else
          err = ETIMEDOUT;
      }
    }
    if (err == 0) {
      setNoDelay(s);
      *fd = s;
      return mkcclSuccess;
    }
    close(s);
    lastErr = err;
    // Refused/unreachable: the listener is not up yet (or the network is settling); try again.
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
                 err == ECONNRESET || err == EAGAIN || err == EINTR;
    if (!retry)
      return setError(mkcclSystemError, "bootstrap: connect to %s failed: %s", what, strerror(err));
    int left = dl.remainingMs();
    if (left <= 0) break;
    std::vector<pollfd> pfds;
    addWatch(&pfds, watch);
    if (poll(pfds.data(), pfds.size(), std::min(backoffMs, left)) > 0 && watchFired(pfds, 0, watch))
      return mkcclInProgress;
    backoffMs = std::min(backoffMs * 2, 200);
  }
  return setError(mkcclTimeout, "bootstrap: could not connect to %s within %lld ms (last error: %s)", what,
                  (long long)dl.timeoutMs(), strerror(lastErr));
}

bool socketOutOfResources(int e) { return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM; }

mkcclResult_t socketAccept(int listenFd, const Deadline& dl, const char* what, int* fd, SocketWatch* watch) {
  std::vector<pollfd> pfds;
  int lastErr = 0;
  for (;;) {
    int s = accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s >= 0) {
      setNoDelay(s);
      *fd = s;
      return mkcclSuccess;
    }
    int e = errno;
    bool starved = socketOutOfResources(e);
    if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR && e != ECONNABORTED && !starved)
      return setError(mkcclSystemError, "bootstrap: accept (waiting for %s) failed: %s", what, strerror(e));
    if (starved) lastErr = e;
    // Starved, the listening socket stays readable: wait without it (a spin otherwise).
    pfds.assign(1, pollfd{starved ? -1 : listenFd, POLLIN, 0});
    addWatch(&pfds, watch);
    int left = dl.remainingMs();
    int n = poll(pfds.data(), pfds.size(), starved ? std::min(left, 20) : left);
    if (n > 0 && watchFired(pfds, 1, watch)) return mkcclInProgress;
    if (n < 0 && errno != EINTR)
      return setError(mkcclSystemError, "bootstrap: poll (waiting for %s) failed: %s", what, strerror(errno));
    if (dl.expired())
      return setError(mkcclTimeout, "bootstrap: timed out after %lld ms waiting for a connection from %s%s%s",
                      (long long)dl.timeoutMs(), what, lastErr ? "; accept failed: " : "",
                      lastErr ? strerror(lastErr) : "");
  }
}

namespace {

// The part of op not done yet, as iovecs; returns how many.
int remaining(const SocketIo& op, iovec* iov) {
  void* bufs[3] = {op.buf, op.buf2, op.buf3};
  size_t lens[3] = {op.len, op.len2, op.len3};
  size_t skip = op.done;
  int n = 0;
  for (int i = 0; i < 3; i++) {
    if (skip >= lens[i]) {
      skip -= lens[i];
      continue;
    }
    iov[n].iov_base = (char*)bufs[i] + skip;
    iov[n].iov_len = lens[i] - skip;
    skip = 0;
    n++;
  }
  return n;
}

}  // namespace

mkcclResult_t socketTransfer(SocketIo* ops, int nops, const Deadline& dl, const char* what, SocketWatch* watch) {
  std::vector<pollfd> pfds;
  std::vector<int> idx;
  for (;;) {
    pfds.clear();
    idx.clear();
    for (int i = 0; i < nops; i++) {
      if (ops[i].done >= ops[i].total()) continue;
      pfds.push_back({ops[i].fd, (short)(ops[i].isSend ? POLLOUT : POLLIN), 0});
      idx.push_back(i);
    }
    if (pfds.empty()) return mkcclSuccess;
    size_t nio = pfds.size();
    addWatch(&pfds, watch);
    int n = poll(pfds.data(), pfds.size(), dl.remainingMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      return setError(mkcclSystemError, "%s: poll failed: %s", what, strerror(errno));
    }
    // The deadline, checked on every pass: a peer that keeps the socket busy never extends it.
    if (n == 0 || dl.expired()) {
      const SocketIo& op = ops[idx[0]];
      return setError(mkcclTimeout, "%s: timed out after %lld ms waiting %s %s (%zu of %zu bytes done)", what,
                      (long long)dl.timeoutMs(), op.isSend ? "to send to" : "for data from", op.peer, op.done,
                      op.total());
    }
    for (size_t k = 0; k < nio; k++) {
      if (!pfds[k].revents) continue;
      SocketIo& op = ops[idx[k]];
      if (pfds[k].revents & POLLNVAL)
        return setError(mkcclSystemError, "%s: the socket to %s is closed", what, op.peer);
      iovec iov[3];
      msghdr m;
      memset(&m, 0, sizeof(m));
      m.msg_iov = iov;
      m.msg_iovlen = (size_t)remaining(op, iov);
      ssize_t r = op.isSend ? sendmsg(op.fd, &m, MSG_NOSIGNAL) : recvmsg(op.fd, &m, 0);
      if (r > 0) {
        op.done += (size_t)r;
        continue;
      }
      int e = r == 0 ? 0 : errno;
      if (r < 0 && (e == EAGAIN || e == EWOULDBLOCK || e == EINTR)) continue;
      if (r == 0 || e == ECONNRESET || e == EPIPE || e == ENOTCONN || e == ESHUTDOWN)
        return setError(mkcclRemoteError, "%s: %s closed the connection (%s; %zu of %zu bytes %s)", what, op.peer,
                        r == 0 ? "end of stream" : strerror(e), op.done, op.total(), op.isSend ? "sent" : "received");
      return setError(mkcclSystemError, "%s: %s to %s failed: %s", what, op.isSend ? "send" : "recv", op.peer,
                      strerror(e));
    }
    if (watchFired(pfds, nio, watch)) return mkcclInProgress;
  }
}

mkcclResult_t socketSendAll(int fd, const void* buf, size_t len, const Deadline& dl, const char* what,
                            const char* peer) {
  SocketIo op;
  op.fd = fd, op.isSend = true, op.buf = const_cast<void*>(buf), op.len = len, op.peer = peer;
  return socketTransfer(&op, 1, dl, what);
}

mkcclResult_t socketRecvAll(int fd, void* buf, size_t len, const Deadline& dl, const char* what, const char* peer) {
  SocketIo op;
  op.fd = fd, op.isSend = false, op.buf = buf, op.len = len, op.peer = peer;
  return socketTransfer(&op, 1, dl, what);
}

}  // namespace mkccl
