// The hub of spawnLocal (see hub.h): one thread, one poll() loop over the ranks' connections.
#include "launch/hub.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <new>
#include "launch/launch_io.h"

namespace mkccl {
namespace launch {
namespace {

const char* opName(uint32_t op) {
  switch (op) {
    case kHubAllGather: return "allGather";
    case kHubBroadcast: return "broadcast";
    case kHubBarrier: return "barrier";
    default: return "?";
  }
}

std::string describe(const HubRequest& q) {
  std::string s = std::string(opName(q.op)) + "(" + std::to_string(q.bytes) + " bytes";
  if (q.op == kHubBroadcast) s += ", root " + std::to_string(q.arg);
  return s + ") as collective #" + std::to_string(q.seq);
}

}  // namespace

int Hub::start(int n, std::string* addr, std::string* err) {
  n_ = n;
  exited_.assign(n, false);
  gone_.assign(n, false);
  byRank_.assign(n, nullptr);
  if (listenLoopback(&listenFd_, addr, err)) return -1;
  fcntl(listenFd_, F_SETFL, fcntl(listenFd_, F_GETFL) | O_NONBLOCK);
  if (pipe2(stopPipe_, O_CLOEXEC | O_NONBLOCK) || pipe2(wakePipe_, O_CLOEXEC | O_NONBLOCK)) {
    *err = std::string("pipe: ") + strerror(errno);
    return -1;
  }
  thread_ = std::thread([this] { run(); });
  return 0;
}

void Hub::rankExited(int r) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (r >= 0 && r < n_) exited_[r] = true;
  }
  if (wakePipe_[1] >= 0) (void)!write(wakePipe_[1], "x", 1);
}

void Hub::stop() {
  if (thread_.joinable()) {
    (void)!write(stopPipe_[1], "x", 1);
    thread_.join();
  }
  for (auto& c : conns_)
    if (c->fd >= 0) close(c->fd);
  conns_.clear();
  for (int* fd : {&listenFd_, &stopPipe_[0], &stopPipe_[1], &wakePipe_[0], &wakePipe_[1]})
    if (*fd >= 0) close(*fd), *fd = -1;
}

void Hub::run() {
  std::vector<pollfd> pfds;
  for (;;) {
    pfds.clear();
    pfds.push_back({stopPipe_[0], POLLIN, 0});
    pfds.push_back({wakePipe_[0], POLLIN, 0});
    pfds.push_back({listenFd_, POLLIN, 0});
    for (auto& c : conns_) pfds.push_back({c->fd, (short)(c->ready ? 0 : POLLIN), 0});
    if (poll(pfds.data(), pfds.size(), -1) < 0 && errno != EINTR) return;
    if (pfds[0].revents) return;
    if (pfds[1].revents) {
      char sink[64];
      while (read(wakePipe_[0], sink, sizeof(sink)) > 0) {
      }
      std::lock_guard<std::mutex> lock(mutex_);
      for (int r = 0; r < n_; r++)
        if (exited_[r]) gone_[r] = true;
    }
    for (size_t i = 0; i < conns_.size(); i++)
      if (pfds[3 + i].revents && !readConn(*conns_[i])) drop(*conns_[i]);
    conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const std::unique_ptr<Conn>& c) { return c->fd < 0; }),
                 conns_.end());
    if (pfds[2].revents) {
      int fd;
      while ((fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        // Replies are small header + payload writes: Nagle would hold each for ~40 ms.
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conns_.emplace_back(new Conn());
        conns_.back()->fd = fd;
      }
    }
    tryRound();
  }
}

void Hub::drop(Conn& c) {
  if (c.rank >= 0) {
    gone_[c.rank] = true;
    byRank_[c.rank] = nullptr;
  }
  close(c.fd);
  c.fd = -1;
}

bool Hub::readConn(Conn& c) {
  if (c.ready) return false;  // not polled for input: only a hang-up or an error reports here
  char* dst;
  size_t want;
  if (c.got < sizeof(HubRequest)) {
    dst = (char*)&c.req + c.got, want = sizeof(HubRequest) - c.got;
  } else {
    size_t off = c.got - sizeof(HubRequest);
    dst = c.payload.data() + off, want = c.payload.size() - off;
  }
  ssize_t r = recv(c.fd, dst, want, 0);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (r <= 0) return false;  // the rank closed its connection (exited, or finished)
  c.got += (size_t)r;
  if (c.got == sizeof(HubRequest)) {
    const HubRequest& q = c.req;
    if (q.magic != kHubMagic) return false;
    if (q.op == kHubHello) return onHello(c);
    if (c.rank < 0 || q.rank != c.rank || (q.op != kHubAllGather && q.op != kHubBroadcast && q.op != kHubBarrier))
      return false;
    uint64_t payload = q.op == kHubAllGather ? q.bytes : (q.op == kHubBroadcast && q.arg == c.rank) ? q.bytes : 0;
    try {
      c.payload.assign(payload, 0);
    } catch (const std::bad_alloc&) {
      return false;
    }
  }
  if (c.got >= sizeof(HubRequest) && c.got == sizeof(HubRequest) + c.payload.size()) c.ready = true;
  return true;
}

bool Hub::onHello(Conn& c) {
  const HubRequest& q = c.req;
  c.got = 0;
  std::string why;
  if (q.rank < 0 || q.rank >= n_ || q.arg != n_)
    why = "rank " + std::to_string(q.rank) + " of " + std::to_string(q.arg) + " does not belong to this world of " +
          std::to_string(n_) + " ranks";
  else if (byRank_[q.rank] || gone_[q.rank])
    why = "rank " + std::to_string(q.rank) + " connected twice";
  if (!why.empty()) {
    reply(c, false, why.data(), why.size());
    return false;
  }
  c.rank = q.rank;
  byRank_[q.rank] = &c;
  return reply(c, true, nullptr, 0);
}

bool Hub::reply(Conn& c, bool ok, const void* data, uint64_t len) {
  HubReply h = {kHubMagic, ok ? 1u : 0u, len};
  std::string err;
  return writeAll(c.fd, &h, sizeof(h), kNoTimeout, stopPipe_[0], "hub reply", &err) == 0 &&
         writeAll(c.fd, data, len, kNoTimeout, stopPipe_[0], "hub reply", &err) == 0;
}

void Hub::failReady(const std::string& msg) {
  for (auto& c : conns_) {
    if (c->fd < 0 || !c->ready) continue;
    c->ready = false, c->got = 0, c->payload.clear();
    if (!reply(*c, false, msg.data(), msg.size())) drop(*c);
  }
}

void Hub::tryRound() {
  const Conn* any = nullptr;
  for (auto& c : conns_)
    if (c->fd >= 0 && c->ready) any = c.get();
  if (!any) return;
  for (int r = 0; r < n_; r++)
    if (gone_[r])
      return failReady("rank " + std::to_string(r) + " exited (or closed its connection to the hub) before joining " +
                       describe(any->req));
  for (int r = 0; r < n_; r++)
    if (!byRank_[r] || !byRank_[r]->ready) return;  // still waiting for r
  const HubRequest& q0 = byRank_[0]->req;
  for (int r = 1; r < n_; r++) {
    const HubRequest& q = byRank_[r]->req;
    if (q.op != q0.op || q.bytes != q0.bytes || q.seq != q0.seq || (q.op == kHubBroadcast && q.arg != q0.arg))
      return failReady("the ranks disagree: rank 0 called " + describe(q0) + ", rank " + std::to_string(r) +
                       " called " + describe(q));
  }
  if (q0.op == kHubBroadcast && (q0.arg < 0 || q0.arg >= n_))
    return failReady("broadcast root " + std::to_string(q0.arg) + " is out of range");
  std::vector<char> out;
  if (q0.op == kHubAllGather) {
    try {
      out.resize(q0.bytes * n_);
    } catch (const std::bad_alloc&) {
      return failReady("allGather of " + std::to_string(q0.bytes) + " bytes per rank: out of memory in the hub");
    }
    for (int r = 0; r < n_; r++)
      if (q0.bytes) memcpy(out.data() + q0.bytes * r, byRank_[r]->payload.data(), q0.bytes);
  } else if (q0.op == kHubBroadcast) {
    out.swap(byRank_[q0.arg]->payload);
  }
  for (int r = 0; r < n_; r++) {
    Conn& c = *byRank_[r];
    c.ready = false, c.got = 0;
    c.payload.clear();
  }
  for (int r = 0; r < n_; r++) {
    Conn* c = byRank_[r];
    if (c && !reply(*c, true, out.data(), out.size())) drop(*c);
  }
}

}  // namespace launch
}  // namespace mkccl
