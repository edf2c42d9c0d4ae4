// The rendezvous service (see bootstrap_root.h). One poll() loop over the listening socket and the
// connections, so a slow, idle or hostile connection never holds up the others.
//
// What keeps it bounded whatever arrives: every byte read is consumed (a partial frame waits in the
// connection's buffer, not in the socket, so poll never reports it again); the deadline is checked
// on every pass, not only when poll times out; out of descriptors, it stops polling the listening
// socket for a moment instead of spinning on it (and drops the oldest connection that has not said
// hello, to make room); connections that have not said hello are capped. A connection whose first
// frame does not carry the id's MAC is a stranger's and is dropped unread; a connection that proves
// it holds the key is a rank, and anything wrong it says fails the rendezvous with the reason.
#include "runtime/bootstrap_root.h"
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_wire.h"
#include "base/log.h"

namespace mkccl {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> rootsActive{0};
constexpr int kMaxRanks = 1 << 20;
constexpr int kReplyGraceMs = 1000;    // to send the table/errors after the deadline decided things
constexpr size_t kMaxStrangers = 1024;  // connections that have not said hello yet
constexpr int kStarvedPauseMs = 20;     // out of descriptors: the listening socket rests this long
constexpr size_t kReadChunk = 4096;

struct RootConn {
  int fd = -1;
  Clock::time_point since;
  std::vector<char> in;  // received, not consumed yet
  bool hello = false;
  RootHello h;
  Channel rx, tx;  // after the hello
  std::string who;
};

class RootService {
 public:
  RootService(int fd, const SocketAddress& addr, const Key128& key, int timeoutMs)
      : listenFd_(fd), addr_(addr), key_(key), timeoutMs_(timeoutMs), dl_(timeoutMs) {}

  void run() {
    name_ = "bootstrap root " + socketAddrToString(addr_);
    MKCCL_INFO("%s: waiting for the ranks (timeout %d ms)", name_.c_str(), timeoutMs_);
    std::vector<pollfd> pfds;
    for (;;) {
      if (failRes_ == mkcclSuccess && nranks_ > 0 && arrived_ == nranks_) break;
      if (failRes_ != mkcclSuccess && answered_ >= std::max(nranks_, 1)) break;
      if (dl_.expired()) {
        if (failRes_ == mkcclSuccess) fail(mkcclTimeout, timeoutMessage());
        break;
      }
      const bool paused = Clock::now() < pausedUntil_;
      pfds.assign(1, pollfd{paused ? -1 : listenFd_, POLLIN, 0});
      for (const RootConn& c : conns_) pfds.push_back({c.fd, POLLIN, 0});
      int wait = dl_.remainingMs();
      if (paused) wait = std::min(wait, kStarvedPauseMs);
      int n = poll(pfds.data(), pfds.size(), wait);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        fail(mkcclSystemError, std::string("the root's poll failed: ") + strerror(errno));
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
    MKCCL_INFO("%s: done (%s; %d connection(s) without this id's key dropped)", name_.c_str(),
               failRes_ == mkcclSuccess ? "all ranks connected" : "failed", strangers_);
  }

 private:
  void acceptAll() {
    for (int i = 0; i < 256; i++) {
      int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        RootConn c;
        c.fd = fd;
        c.since = Clock::now();
        conns_.push_back(std::move(c));
        continue;
      }
      int e = errno;
      if (e == EINTR || e == ECONNABORTED) continue;
      if (socketOutOfResources(e)) {
        starvedErr_ = e;
        if (evictOldestStranger()) continue;  // room made: try again
        pausedUntil_ = Clock::now() + std::chrono::milliseconds(kStarvedPauseMs);
      }
      break;  // EAGAIN: accepted all pending
    }
    while (strangerCount() > kMaxStrangers && evictOldestStranger()) {
    }
  }

  size_t strangerCount() const {
    size_t n = 0;
    for (const RootConn& c : conns_) n += c.fd >= 0 && !c.hello;
    return n;
  }

  // Closes the connection that has waited longest without a hello; false when there is none.
  bool evictOldestStranger() {
    RootConn* oldest = nullptr;
    for (RootConn& c : conns_)
      if (c.fd >= 0 && !c.hello && (!oldest || c.since < oldest->since)) oldest = &c;
    if (!oldest) return false;
    socketClose(&oldest->fd);
    strangers_++;
    return true;
  }

  // false: drop the connection.
  bool readConn(RootConn& c) {
    char buf[kReadChunk];
    for (int round = 0; round < 16; round++) {  // bounded work per pass: others get their turn
      ssize_t r = recv(c.fd, buf, sizeof(buf), 0);
      if (r > 0) {
        c.in.insert(c.in.end(), buf, buf + r);
        if ((size_t)r < sizeof(buf)) break;
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      return gone(c);
    }
    return consume(c);
  }

  // End of stream or a reset.
  bool gone(RootConn& c) {
    if (!c.hello) return false;  // gone before saying who it is: nothing to count
    socketClose(&c.fd);
    answered_++;  // it waits for nothing any more
    if (failRes_ == mkcclSuccess)
      fail(mkcclRemoteError, c.who + " disconnected from the root before all ranks arrived (it exited or crashed)");
    return false;
  }

  // Takes the complete frames out of c.in. false: drop the connection.
  bool consume(RootConn& c) {
    for (;;) {
      if (c.in.size() < sizeof(MsgHeader)) return true;  // the rest is on its way
      MsgHeader h;
      memcpy(&h, c.in.data(), sizeof(h));
      if (!c.hello) {
        if (!frameHeaderValid(helloChannel(key_), h)) {
          MKCCL_TRACE("%s: dropping a connection that does not hold this id's key", name_.c_str());
          strangers_++;
          return false;
        }
        // It holds the key: a rank of this id, whatever it says next.
        if (h.kind != kFrameRootHello || h.len != sizeof(RootHello)) {
          fail(mkcclInvalidUsage, "a rank sent a hello of kind " + std::to_string(h.kind) + " and " +
                                      std::to_string(h.len) + " bytes, expected kind " +
                                      std::to_string(kFrameRootHello) + " and " + std::to_string(sizeof(RootHello)) +
                                      " bytes (mixed libmkccl versions?)");
          return false;
        }
        if (c.in.size() < frameBytes(h.len)) return true;
        uint64_t mac;
        memcpy(&c.h, c.in.data() + sizeof(h), sizeof(c.h));
        memcpy(&mac, c.in.data() + sizeof(h) + sizeof(c.h), sizeof(mac));
        if (mac != framePayloadMac(helloChannel(key_), &c.h, sizeof(c.h))) {
          fail(mkcclRemoteError, "a rank's hello failed its check (a corrupted stream)");
          return false;
        }
        c.in.erase(c.in.begin(), c.in.begin() + (long)frameBytes(h.len));
        c.hello = true;
        rootConnChannels(key_, c.h.nonce, &c.rx, &c.tx);
        c.who = "rank " + std::to_string(c.h.rank) + " (" + socketAddrToString(c.h.listenAddr) + ")";
        if (c.h.version != kHelloVersion) {
          fail(mkcclInvalidUsage, c.who + " speaks bootstrap version " + std::to_string(c.h.version) +
                                      ", the root version " + std::to_string(kHelloVersion));
          return false;
        }
        onHello(c);
        if (failRes_ != mkcclSuccess) return false;  // after a failure every rank told is closed
        continue;
      }
      // A rank that said hello only waits now: the one frame it may send is its failure note (its own
      // timeout passed, or it failed).
      if (!frameHeaderValid(c.rx, h)) {
        protocolError(c, "sent bytes that are not a frame of the rendezvous (a corrupted stream)");
        return false;
      }
      if (h.kind != kFrameRootAbort || h.len < sizeof(FailNote) || h.len > sizeof(FailNote) + kMaxFailText) {
        protocolError(c, "sent an unexpected frame (kind " + std::to_string(h.kind) + ", " + std::to_string(h.len) +
                             " bytes) while waiting for the table");
        return false;
      }
      if (c.in.size() < frameBytes(h.len)) return true;
      std::vector<char> payload(c.in.begin() + sizeof(h), c.in.begin() + sizeof(h) + (long)h.len);
      uint64_t mac;
      memcpy(&mac, c.in.data() + sizeof(h) + h.len, sizeof(mac));
      if (mac != framePayloadMac(c.rx, payload.data(), payload.size())) {
        protocolError(c, "sent a note that failed its check (a corrupted stream)");
        return false;
      }
      int rank = -1;
      std::string text;
      mkcclResult_t res = failNoteParse(payload, &rank, &text);
      std::string who = c.who;
      socketClose(&c.fd);
      answered_++;  // it waits for nothing any more
      if (failRes_ == mkcclSuccess)
        fail(res, who + (res == mkcclTimeout ? " timed out waiting for the other ranks; " + missingRanks()
                                             : " failed: " + text));
      return false;
    }
  }

  // A rank (it holds the key) broke the protocol: the rendezvous fails, everyone is told why.
  void protocolError(RootConn& c, const std::string& what) {
    std::string who = c.who;
    socketClose(&c.fd);
    answered_++;
    if (failRes_ == mkcclSuccess) fail(mkcclRemoteError, who + " " + what);
  }

  void onHello(RootConn& c) {
    const RootHello& h = c.h;
    MKCCL_INFO("%s: rank %d of %d arrived from %s", name_.c_str(), h.rank, h.nranks,
               socketAddrToString(h.listenAddr).c_str());
    if (failRes_ != mkcclSuccess) {
      if (nranks_ < 0 && h.nranks >= 1 && h.nranks <= kMaxRanks) nranks_ = h.nranks;  // how many to tell
      reply(c, failRes_, failMsg_);
      answered_++;
      return;
    }
    const std::string& who = c.who;
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

  // One grace period for all the replies, however many ranks read slowly.
  const Deadline& replyDeadline() {
    if (!replyDl_) replyDl_.reset(new Deadline(std::max(dl_.remainingMs(), kReplyGraceMs)));
    return *replyDl_;
  }

  void reply(RootConn& c, mkcclResult_t res, const std::string& msg) {
    std::vector<char> note = failNote(res, -1, msg);
    frameSend(c.fd, c.tx, kFrameRootError, 0, note.data(), note.size(), replyDeadline(), name_.c_str(),
              c.who.c_str());
  }

  void sendTables() {
    std::vector<char> table(sizeof(RootTable) + (size_t)nranks_ * sizeof(SocketAddress));
    RootTable t = {randomU64()};
    memcpy(table.data(), &t, sizeof(t));
    for (const RootConn& c : conns_)
      if (c.hello)
        memcpy(table.data() + sizeof(t) + (size_t)c.h.rank * sizeof(SocketAddress), &c.h.listenAddr,
               sizeof(SocketAddress));
    for (RootConn& c : conns_)
      if (c.hello && c.fd >= 0)
        frameSend(c.fd, c.tx, kFrameRootTable, 0, table.data(), table.size(), replyDeadline(), name_.c_str(),
                  c.who.c_str());
  }

  std::string timeoutMessage() const {
    std::string m = "the root timed out after " + std::to_string(timeoutMs_) + " ms (MKCCL_TIMEOUT_MS) with " +
                    missingRanks();
    if (starvedErr_) m += std::string(" (accepting connections failed: ") + strerror(starvedErr_) + ")";
    return m;
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
  Key128 key_;
  int timeoutMs_;
  Deadline dl_;
  std::unique_ptr<Deadline> replyDl_;
  std::string name_;
  std::vector<RootConn> conns_;
  int nranks_ = -1, firstRank_ = -1, arrived_ = 0, answered_ = 0, strangers_ = 0;
  std::vector<bool> present_;
  mkcclResult_t failRes_ = mkcclSuccess;
  std::string failMsg_;
  Clock::time_point pausedUntil_;
  int starvedErr_ = 0;
};

}  // namespace

mkcclResult_t bootstrapRootStart(int listenFd, const SocketAddress& addr, const Key128& idKey, int timeoutMs) {
  rootsActive++;
  try {
    std::thread([=] {
      try {
        RootService(listenFd, addr, idKey, timeoutMs).run();
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
