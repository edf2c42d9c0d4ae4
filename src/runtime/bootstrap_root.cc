// The rendezvous service (see bootstrap_root.h). One poll() loop over the listening socket and the
// ranks' connections, so a slow or dead connection never holds up the others.
#include "runtime/bootstrap_root.h"
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_wire.h"
#include "runtime/log.h"

namespace mkccl {
namespace {

std::atomic<int> rootsActive{0};
constexpr int kMaxRanks = 1 << 20;
constexpr int kReplyGraceMs = 1000;  // to send the table/error after the deadline decided things

struct RootConn {
  int fd = -1;
  size_t got = 0;
  unsigned char buf[sizeof(MsgHeader) + sizeof(RootHello)];
  bool hello = false;
  RootHello h;
};

class RootService {
 public:
  RootService(int fd, const SocketAddress& addr, uint64_t token, int timeoutMs)
      : listenFd_(fd), addr_(addr), token_(token), timeoutMs_(timeoutMs), dl_(timeoutMs) {}

  void run() {
    name_ = "bootstrap root " + socketAddrToString(addr_);
    MKCCL_INFO("%s: waiting for the ranks (timeout %d ms)", name_.c_str(), timeoutMs_);
    std::vector<pollfd> pfds;
    for (;;) {
      if (failRes_ == mkcclSuccess && nranks_ > 0 && arrived_ == nranks_) break;
      if (failRes_ != mkcclSuccess && answered_ >= std::max(nranks_, 1)) break;
      pfds.assign(1, pollfd{listenFd_, POLLIN, 0});
      for (const RootConn& c : conns_) pfds.push_back({c.fd, POLLIN, 0});
      int n = poll(pfds.data(), pfds.size(), dl_.remainingMs());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        fail(mkcclSystemError, std::string("the root's poll failed: ") + strerror(errno));
        break;
      }
      if (n == 0) {
        if (failRes_ == mkcclSuccess) fail(mkcclTimeout, timeoutMessage());
        break;
      }
      // Connections first (their indices match pfds), then new ones. Closed ones (fd -1) are
      // removed only after the pass, so the indices hold.
      for (size_t i = 0; i < conns_.size(); i++)
        if (conns_[i].fd >= 0 && pfds[i + 1].revents && !readConn(conns_[i])) socketClose(&conns_[i].fd);
      conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const RootConn& c) { return c.fd < 0; }),
                   conns_.end());
      if (pfds[0].revents) acceptAll();
    }
    socketClose(&listenFd_);  // before the replies: a new root may bind this port once ranks return
    if (failRes_ == mkcclSuccess) sendTables();
    for (RootConn& c : conns_) socketClose(&c.fd);
    MKCCL_INFO("%s: done (%s)", name_.c_str(), failRes_ == mkcclSuccess ? "all ranks connected" : "failed");
  }

 private:
  void acceptAll() {
    for (;;) {
      int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN: accepted all pending; anything else: try again at the next poll
      RootConn c;
      c.fd = fd;
      conns_.push_back(c);
    }
  }

  // false: drop the connection.
  bool readConn(RootConn& c) {
    if (c.hello) {
      // A rank that said hello only waits now: readable means it gave up (its own timeout passed:
      // then everyone times out, with the missing ranks named), or went away.
      MsgHeader h;
      ssize_t r = recv(c.fd, &h, sizeof(h), MSG_PEEK);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (r > 0 && r < (ssize_t)sizeof(h)) return true;  // the rest is on its way
      bool gaveUp = r == (ssize_t)sizeof(h) && h.magic == kMsgMagic && h.tag == kTagRootGiveUp;
      if (r > 0 && !gaveUp) {
        char scratch[256];
        (void)!recv(c.fd, scratch, sizeof(scratch), 0);  // not the protocol: ignore it
        return true;
      }
      std::string who = "rank " + std::to_string(c.h.rank) + " (" + socketAddrToString(c.h.listenAddr) + ")";
      socketClose(&c.fd);
      answered_++;  // it waits for nothing any more
      if (failRes_ == mkcclSuccess) {
        if (gaveUp)
          fail(mkcclTimeout, who + " timed out waiting for the other ranks; " + missingRanks());
        else
          fail(mkcclRemoteError, who + " disconnected from the root before all ranks arrived (it exited or crashed)");
      }
      return false;
    }
    ssize_t r = recv(c.fd, c.buf + c.got, sizeof(c.buf) - c.got, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (r <= 0) return false;  // gone before saying who it is: nothing to count
    c.got += (size_t)r;
    if (c.got < sizeof(c.buf)) return true;
    MsgHeader h;
    memcpy(&h, c.buf, sizeof(h));
    memcpy(&c.h, c.buf + sizeof(h), sizeof(c.h));
    if (h.magic != kMsgMagic || h.tag != kTagRootHello || h.len != sizeof(RootHello)) {
      MKCCL_WARN("%s: dropping a connection that is not an mkccl rank", name_.c_str());
      return false;
    }
    if (c.h.token != token_) {
      reply(c, mkcclInvalidUsage,
            "this rank's unique id belongs to another communicator than the root's at " + socketAddrToString(addr_));
      return false;
    }
    c.hello = true;
    onHello(c);
    return failRes_ == mkcclSuccess;  // after a failure every rank told is closed
  }

  void onHello(RootConn& c) {
    const RootHello& h = c.h;
    MKCCL_INFO("%s: rank %d of %d arrived from %s", name_.c_str(), h.rank, h.nranks,
               socketAddrToString(h.listenAddr).c_str());
    if (failRes_ != mkcclSuccess) {
      reply(c, failRes_, failMsg_);
      answered_++;
      return;
    }
    std::string who = "rank " + std::to_string(h.rank) + " (" + socketAddrToString(h.listenAddr) + ")";
    if (h.nranks < 1 || h.nranks > kMaxRanks)
      return fail(mkcclInvalidUsage, who + " passed nranks=" + std::to_string(h.nranks));
    if (nranks_ > 0 && h.nranks != nranks_)
      return fail(mkcclInvalidUsage, who + " passed nranks=" + std::to_string(h.nranks) + " but rank " +
                                         std::to_string(firstRank_) + " passed nranks=" + std::to_string(nranks_) +
                                         ": every rank must pass the same nranks");
    if (h.rank < 0 || h.rank >= h.nranks)
      return fail(mkcclInvalidUsage, who + " is out of range for nranks=" + std::to_string(h.nranks));
    if (nranks_ < 0) {
      nranks_ = h.nranks;
      firstRank_ = h.rank;
      present_.assign(nranks_, false);
    }
    if (present_[h.rank])
      return fail(mkcclInvalidUsage, "two processes claim rank " + std::to_string(h.rank) + " (the second is at " +
                                         socketAddrToString(h.listenAddr) + "): ranks must be distinct");
    present_[h.rank] = true;
    arrived_++;
  }

  // The first failure wins; every rank that said hello is told and let go.
  void fail(mkcclResult_t res, const std::string& msg) {
    failRes_ = res;
    failMsg_ = msg;
    MKCCL_WARN("%s: rendezvous failed: %s", name_.c_str(), msg.c_str());
    for (RootConn& c : conns_) {
      if (!c.hello || c.fd < 0) continue;
      reply(c, res, msg);
      answered_++;
      socketClose(&c.fd);
    }
  }

  void reply(RootConn& c, mkcclResult_t res, const std::string& msg) {
    std::string payload(sizeof(RootError), '\0');
    RootError e = {(int32_t)res};
    memcpy(&payload[0], &e, sizeof(e));
    payload += msg;
    Deadline dl(kReplyGraceMs);
    msgSend(c.fd, kTagRootError, payload.data(), payload.size(), dl, name_.c_str(), "a rank");
  }

  void sendTables() {
    std::vector<char> table(sizeof(RootTable) + (size_t)nranks_ * sizeof(SocketAddress));
    RootTable t = {randomU64()};
    memcpy(table.data(), &t, sizeof(t));
    for (const RootConn& c : conns_)
      if (c.hello)
        memcpy(table.data() + sizeof(t) + (size_t)c.h.rank * sizeof(SocketAddress), &c.h.listenAddr,
               sizeof(SocketAddress));
    Deadline dl(std::max(dl_.remainingMs(), kReplyGraceMs));
    for (const RootConn& c : conns_)
      if (c.hello && c.fd >= 0) msgSend(c.fd, kTagRootTable, table.data(), table.size(), dl, name_.c_str(), "a rank");
  }

  std::string timeoutMessage() const {
    return "the root timed out after " + std::to_string(timeoutMs_) + " ms (MKCCL_TIMEOUT_MS) with " + missingRanks();
  }

  std::string missingRanks() const {
    if (nranks_ < 0) return "no rank arrived";
    std::string m = std::to_string(arrived_) + " of " + std::to_string(nranks_) + " ranks arrived; missing:";
    int listed = 0;
    for (int r = 0; r < nranks_ && listed < 16; r++)
      if (!present_[r]) m += " " + std::to_string(r), listed++;
    if (nranks_ - arrived_ > listed) m += " ...";
    return m;
  }

  int listenFd_;
  SocketAddress addr_;
  uint64_t token_;
  int timeoutMs_;
  Deadline dl_;
  std::string name_;
  std::vector<RootConn> conns_;
  int nranks_ = -1, firstRank_ = -1, arrived_ = 0, answered_ = 0;
  std::vector<bool> present_;
  mkcclResult_t failRes_ = mkcclSuccess;
  std::string failMsg_;
};

}  // namespace

mkcclResult_t bootstrapRootStart(int listenFd, const SocketAddress& addr, uint64_t token, int timeoutMs) {
  rootsActive++;
  try {
    std::thread([=] {
      try {
        RootService(listenFd, addr, token, timeoutMs).run();
      } catch (const std::exception& e) {
        MKCCL_WARN("bootstrap root %s: %s", socketAddrToString(addr).c_str(), e.what());
      }
      rootsActive--;
    }).detach();
  } catch (const std::system_error& e) {
    rootsActive--;
    close(listenFd);
    return setError(mkcclSystemError, "bootstrap: cannot start the root thread: %s", e.what());
  }
  return mkcclSuccess;
}

int bootstrapRootsActive() { return rootsActive.load(); }

}  // namespace mkccl
