// The bootstrap (see bootstrap.h).
//
// Connections: every rank listens on one socket. At create it connects to the root (retrying until
// the deadline), sends its address, gets the table of all addresses, then connects to the next rank
// of the ring and accepts the previous one: allGather and barrier run around that ring (each step
// sends and receives at once), broadcast forwards along it. send/recv use one socket per ordered
// pair of ranks, connected by the sender on its first send and accepted by the receiver on its first
// recv; so messages are FIFO per pair and a send completes without the receiver as long as the
// kernel can buffer it. Every message is a frame authenticated by its channel (bootstrap_wire.h).
//
// The listening socket is open to anyone on the network: connections are accepted as they come and
// read side by side, each keeping its bytes until its hello is complete, so an idle or slow
// stranger holds up nothing; a hello whose MAC fails is a stranger's and is dropped unread; at most
// kMaxPending connections wait for their hello (the oldest goes first).
//
// Failure is final: the first error of any operation (or abort()) ends the bootstrap. Before its
// sockets shut down, a rank that failed sends a note with its reason on every connection not in the
// middle of a frame, so peers blocked on it fail at once, with that reason, instead of waiting for
// their timeout. Later calls return the same error. While an operation waits, it also watches its
// ring sockets that it is not using: a ring neighbour that sends such a note, or hangs up without
// having said goodbye (destroy sends a bye on both ring sockets), has failed, so the wait ends with
// mkcclRemoteError and the failure cascades around the ring to every rank blocked in the bootstrap,
// whatever it waits for. Only abort() may be called concurrently with the other calls.
#include "runtime/bootstrap.h"
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "runtime/bootstrap_wire.h"
#include "base/check.h"
#include "base/log.h"
#include "base/settings.h"

namespace mkccl {

mkcclResult_t bootstrapCreateRoot(mkcclUniqueId* id) {
  ARG_CHECK(id != nullptr, "mkcclGetUniqueId: uniqueId is NULL");
  MKCCL_CHECK(settingsRefresh());
  const std::string& commId = settings().commId;
  if (!commId.empty()) return idFromCommId(commId.c_str(), id);  // rank 0 serves it in Bootstrap::create
  SocketAddress addr;
  std::string ifname;
  MKCCL_CHECK(socketFindInterface(&addr, &ifname));
  int fd = -1;
  MKCCL_CHECK(socketListen(&addr, &fd));
  Key128 key = randomKey();
  idEncode(addr, randomU64(), key, 0, id);
  MKCCL_INFO("bootstrap: root listening on %s (%s)", socketAddrToString(addr).c_str(), ifname.c_str());
  return bootstrapRootStart(fd, addr, key, bootstrapDefaultTimeoutMs());
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxPending = 64;     // accepted connections whose hello is not complete yet
constexpr int kStarvedPauseMs = 20;    // out of descriptors: the listening socket rests this long
constexpr size_t kHelloFrame = frameBytes(sizeof(ConnHello));

// One connection to a peer rank: its socket and its two channels.
struct Conn {
  int fd = -1;
  Channel tx, rx;
  bool txMid = false;  // a frame is partly sent: nothing else may go out on it
};

// An accepted connection whose hello is not complete yet.
struct Pending {
  int fd = -1;
  Clock::time_point since;
  size_t got = 0;
  unsigned char buf[kHelloFrame];
};

}  // namespace

struct Bootstrap::Impl {
  int rank = -1, nranks = 0, timeoutMs = 0;
  uint64_t idToken = 0;
  Key128 idKey, session;
  int listenFd = -1;
  std::vector<SocketAddress> addrs;
  std::vector<std::string> names;  // "rank 3 (1.2.3.4:5)"
  Conn ringNext, ringPrev;
  std::vector<Conn> p2pOut, p2pIn;
  std::map<std::pair<int, uint32_t>, Conn> unclaimed;  // accepted before anyone asked for them
  std::vector<Pending> pending;
  Clock::time_point acceptPausedUntil;
  int acceptStarvedErr = 0;
  int strangers = 0;
  std::deque<std::pair<uint32_t, std::vector<char>>> selfQueue;

  std::mutex fdMutex;  // the set of sockets, against a concurrent abort()
  std::vector<int> allFds;
  std::atomic<bool> aborted{false};
  mkcclResult_t broken = mkcclSuccess;
  std::string brokenMsg;

  bool watchRing[2] = {true, true};  // next, prev: still watched for a hang-up

  ~Impl() {
    if (!aborted && broken == mkcclSuccess) {
      // A clean departure: neighbours that still wait for others must not take us for a crash.
      for (Conn* c : {&ringNext, &ringPrev}) {
        if (c->fd < 0 || c->txMid) continue;
        std::vector<char> bye = frameBuild(c->tx, kFrameBye, 0, nullptr, 0);
        ::send(c->fd, bye.data(), bye.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      }
    }
    for (const Pending& p : pending) close(p.fd);
    for (int fd : allFds) {
      // Unread data would turn the close into a reset, which can overtake what we sent last.
      char sink[4096];
      while (::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      }
      close(fd);
    }
  }

  std::string what(const char* op) const {
    return "bootstrap rank " + std::to_string(rank) + "/" + std::to_string(nranks) + " " + op;
  }

  // Takes ownership; a socket added after abort() is shut down right away.
  void track(int fd) {
    std::lock_guard<std::mutex> lock(fdMutex);
    allFds.push_back(fd);
    if (aborted || broken != mkcclSuccess) shutdown(fd, SHUT_RDWR);
  }

  void untrackClose(int fd) {
    std::lock_guard<std::mutex> lock(fdMutex);
    for (size_t i = 0; i < allFds.size(); i++)
      if (allFds[i] == fd) allFds.erase(allFds.begin() + i);
    close(fd);
  }

  // (Pending connections are the operation thread's alone; shutting the listening socket down
  // wakes a wait on them.)
  void shutdownAll() {
    std::lock_guard<std::mutex> lock(fdMutex);
    for (int fd : allFds) shutdown(fd, SHUT_RDWR);
  }

  mkcclResult_t usable(const char* op) const {
    if (aborted) return setError(mkcclInvalidUsage, "%s: the bootstrap was aborted", what(op).c_str());
    if (broken != mkcclSuccess)
      return setError(broken, "%s: the bootstrap failed earlier: %s", what(op).c_str(), brokenMsg.c_str());
    return mkcclSuccess;
  }

  // Tells every peer connected to us why we fail, on each connection that is between frames (a
  // note behind half a frame would be garbage). Best effort: never waits.
  void sendFailNotes(mkcclResult_t r) {
    std::vector<char> note = failNote(r, rank, brokenMsg);  // the message names this rank
    auto tell = [&](Conn& c) {
      if (c.fd < 0 || c.txMid) return;
      std::vector<char> f = frameBuild(c.tx, kFrameAbort, 0, note.data(), note.size());
      ::send(c.fd, f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      c.txMid = true;  // nothing after it
    };
    tell(ringNext);
    tell(ringPrev);
    for (Conn& c : p2pOut) tell(c);
    for (Conn& c : p2pIn) tell(c);
    for (auto& u : unclaimed) tell(u.second);
  }

  // Every failure ends the bootstrap (see the top of the file).
  mkcclResult_t failed(mkcclResult_t r, const char* op) {
    if (r == mkcclSuccess) return r;
    if (aborted) return setError(mkcclInvalidUsage, "%s: the bootstrap was aborted", what(op).c_str());
    broken = r;
    brokenMsg = lastError();
    sendFailNotes(r);
    shutdownAll();
    recordError(r, brokenMsg.c_str());
    return r;
  }

  // Runs op(watch) with the ring sockets not in `busy` watched; a watched neighbour that sent a
  // failure note or hung up without a bye fails it (see the top of the file).
  template <class Op>
  mkcclResult_t watched(const char* w, const Conn* busyA, const Conn* busyB, Op op) {
    Conn* ring[2] = {&ringNext, &ringPrev};
    for (;;) {
      int fds[2] = {-1, -1}, which[2] = {0, 0}, k = 0;
      for (int i = 0; i < 2; i++)
        if (watchRing[i] && ring[i]->fd >= 0 && ring[i] != busyA && ring[i] != busyB)
          fds[k] = ring[i]->fd, which[k++] = i;
      SocketWatch sw;
      sw.fds = fds, sw.n = k;
      mkcclResult_t r = op(&sw);
      if (r != mkcclInProgress) return r;
      MKCCL_CHECK(neighbourStirred(which[sw.fired], w));
    }
  }

  // A watched ring socket is readable or hung up: a bye, a failure note, or data of a later
  // operation (left for it), or a crash.
  mkcclResult_t neighbourStirred(int which, const char* w) {
    Conn& c = which == 0 ? ringNext : ringPrev;
    int peer = which == 0 ? (rank + 1) % nranks : (rank + nranks - 1) % nranks;
    watchRing[which] = false;  // decided now, one way or the other
    MsgHeader h;
    ssize_t n = ::recv(c.fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
    if (n == (ssize_t)sizeof(h) && frameHeaderValid(c.rx, h)) {
      if (h.kind == kFrameBye && h.len == 0) {
        (void)!::recv(c.fd, &h, sizeof(h), MSG_DONTWAIT);
        frameDone(c.rx);
        MKCCL_INFO("%s: %s has left", w, names[peer].c_str());
        return mkcclSuccess;
      }
      if (h.kind == kFrameAbort) {
        // Its note: read it (sent in one piece) and fail with its reason.
        Deadline dl(std::min(timeoutMs, 1000));
        MsgHeader got;
        MKCCL_CHECK(socketRecvAll(c.fd, &got, sizeof(got), dl, w, names[peer].c_str()));
        return frameCheckHeader(c.fd, c.rx, got, kFrameData, 0, 0, dl, w, names[peer].c_str());
      }
    }
    // Data still queued: it will be read (and judged) by the operation it belongs to.
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return mkcclSuccess;
    if (aborted) return mkcclInvalidUsage;
    return setError(mkcclRemoteError, "%s: %s aborted or died (it hung up without leaving cleanly)", w,
                    names[peer].c_str());
  }

  mkcclResult_t transfer(SocketIo* ops, int nops, const Conn* a, const Conn* b, const Deadline& dl, const char* w) {
    return watched(w, a, b, [&](SocketWatch* sw) { return socketTransfer(ops, nops, dl, w, sw); });
  }

  // A frame to a peer: header, payload, MAC, as one transfer.
  mkcclResult_t sendFrame(Conn& c, FrameKind kind, uint32_t tag, const void* data, size_t len, const Deadline& dl,
                          const char* w, const char* peer) {
    MsgHeader h = frameHeader(c.tx, kind, tag, len);
    uint64_t mac = len ? framePayloadMac(c.tx, data, len) : 0;
    MKCCL_TRACE("%s: send kind %u tag 0x%x, %zu bytes to %s", w, kind, tag, len, peer);
    SocketIo op;
    op.fd = c.fd, op.isSend = true, op.peer = peer;
    op.buf = &h, op.len = sizeof(h);
    if (len) op.buf2 = const_cast<void*>(data), op.len2 = len, op.buf3 = &mac, op.len3 = sizeof(mac);
    c.txMid = true;
    MKCCL_CHECK(transfer(&op, 1, &c, nullptr, dl, w));
    c.txMid = false;
    frameDone(c.tx);
    return mkcclSuccess;
  }

  mkcclResult_t recvFrame(Conn& c, uint32_t tag, void* data, size_t len, const Deadline& dl, const char* w,
                          const char* peer) {
    MsgHeader h;
    SocketIo op;
    op.fd = c.fd, op.isSend = false, op.peer = peer;
    op.set(&h, sizeof(h));
    MKCCL_CHECK(transfer(&op, 1, &c, nullptr, dl, w));
    MKCCL_CHECK(frameCheckHeader(c.fd, c.rx, h, kFrameData, tag, len, dl, w, peer));
    uint64_t mac = 0;
    op.set(data, len);
    if (len) op.buf2 = &mac, op.len2 = sizeof(mac);
    MKCCL_CHECK(transfer(&op, 1, &c, nullptr, dl, w));
    if (len && mac != framePayloadMac(c.rx, data, len))
      return setError(mkcclRemoteError, "%s: the payload from %s failed its check (a corrupted stream)", w, peer);
    frameDone(c.rx);
    return mkcclSuccess;
  }

  mkcclResult_t connectTo(int peer, ConnKind kind, const Deadline& dl, Conn* out) {
    std::string w = what(kind == kConnRing ? "connect (ring)" : "connect (send)");
    int s = -1;
    MKCCL_CHECK(watched(w.c_str(), nullptr, nullptr, [&](SocketWatch* sw) {
      return socketConnect(addrs[peer], dl, names[peer].c_str(), &s, sw);
    }));
    track(s);
    ConnHello h = {rank, peer, kind, 0, randomU64()};
    Conn c;
    c.fd = s;
    c.tx = connHelloChannel(session);
    MKCCL_CHECK(sendFrame(c, kFrameConnHello, 0, &h, sizeof(h), dl, w.c_str(), names[peer].c_str()));
    connChannels(session, h, &c.tx, &c.rx);
    MKCCL_INFO("%s: connected to %s", w.c_str(), names[peer].c_str());
    *out = c;
    return mkcclSuccess;
  }

  // The connection `peer` made to us for `kind`; others that arrive meanwhile are kept for later.
  mkcclResult_t acceptFrom(int peer, ConnKind kind, const Deadline& dl, Conn* out) {
    std::string w = what(kind == kConnRing ? "accept (ring)" : "accept (recv)");
    auto key = std::make_pair(peer, (uint32_t)kind);
    for (;;) {
      auto it = unclaimed.find(key);
      if (it != unclaimed.end()) {
        *out = it->second;
        unclaimed.erase(it);
        MKCCL_INFO("%s: accepted %s", w.c_str(), names[peer].c_str());
        return mkcclSuccess;
      }
      MKCCL_CHECK(watched(w.c_str(), nullptr, nullptr,
                          [&](SocketWatch* sw) { return pumpAccepts(dl, w.c_str(), names[peer].c_str(), sw); }));
    }
  }

  // One round of the listening socket: waits (bounded by dl) until it or a pending connection is
  // readable, accepts what is queued and reads what has arrived. mkcclSuccess when something may
  // have changed, mkcclInProgress when a watched socket fired.
  mkcclResult_t pumpAccepts(const Deadline& dl, const char* w, const char* waitingFor, SocketWatch* sw) {
    if (aborted) return setError(mkcclInvalidUsage, "%s: the bootstrap was aborted", w);
    if (dl.expired())
      return setError(mkcclTimeout, "%s: timed out after %lld ms waiting for a connection from %s%s%s", w,
                      (long long)dl.timeoutMs(), waitingFor, acceptStarvedErr ? " (accept failed: " : "",
                      acceptStarvedErr ? (std::string(strerror(acceptStarvedErr)) + ")").c_str() : "");
    const bool paused = Clock::now() < acceptPausedUntil;
    std::vector<pollfd> pfds;
    pfds.push_back({paused ? -1 : listenFd, POLLIN, 0});
    for (const Pending& p : pending) pfds.push_back({p.fd, POLLIN, 0});
    const size_t nio = pfds.size();
    // Watched sockets: hang-ups only (a failing neighbour sends its note, then shuts down).
    for (int i = 0; i < sw->n; i++) pfds.push_back({sw->fds[i], POLLRDHUP, 0});
    int wait = dl.remainingMs();
    if (paused) wait = std::min(wait, kStarvedPauseMs);
    int n = poll(pfds.data(), pfds.size(), wait);
    if (n < 0 && errno != EINTR) return setError(mkcclSystemError, "%s: poll failed: %s", w, strerror(errno));
    if (n <= 0) return mkcclSuccess;
    for (int i = 0; i < sw->n; i++)
      if (pfds[nio + i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        sw->fired = i;
        return mkcclInProgress;
      }
    // Pending connections first (their indices match pfds); closed ones (fd -1) go after the pass.
    for (size_t i = 0; i + 1 < nio; i++)
      if (pfds[i + 1].revents) MKCCL_CHECK(readPending(pending[i], w));
    pending.erase(std::remove_if(pending.begin(), pending.end(), [](const Pending& p) { return p.fd < 0; }),
                  pending.end());
    if (pfds[0].revents) MKCCL_CHECK(acceptAll(w));
    return mkcclSuccess;
  }

  mkcclResult_t acceptAll(const char* w) {
    for (int i = 0; i < 64; i++) {
      int s = accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (s < 0) {
        int e = errno;
        if (e == EINTR || e == ECONNABORTED) continue;
        if (socketOutOfResources(e)) {
          acceptStarvedErr = e;
          if (evictOldestPending()) continue;  // room made: try again
          acceptPausedUntil = Clock::now() + std::chrono::milliseconds(kStarvedPauseMs);
          break;
        }
        if (e == EAGAIN || e == EWOULDBLOCK) break;  // accepted all that is queued
        return setError(mkcclSystemError, "%s: accept failed: %s", w, strerror(e));  // shut down (abort), ...
      }
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Pending p;
      p.fd = s;
      p.since = Clock::now();
      pending.push_back(p);
      // Its hello usually came with it: read it now, before newer strangers can crowd it out.
      MKCCL_CHECK(readPending(pending.back(), w));
      if (pending.back().fd < 0) pending.pop_back();
      while (pending.size() > kMaxPending) evictOldestPending();
    }
    return mkcclSuccess;
  }

  bool evictOldestPending() {
    if (pending.empty()) return false;
    auto oldest = std::min_element(pending.begin(), pending.end(),
                                   [](const Pending& a, const Pending& b) { return a.since < b.since; });
    close(oldest->fd);
    pending.erase(oldest);
    strangers++;
    return true;
  }

  // Reads what a pending connection sent. Its hello complete and valid: it becomes unclaimed. Not
  // holding the session key: dropped. Holding it but saying something else: a rank of ours broke the
  // protocol, which fails the bootstrap. p.fd becomes -1 when p is done with.
  mkcclResult_t readPending(Pending& p, const char* w) {
    for (;;) {
      ssize_t r = ::recv(p.fd, p.buf + p.got, sizeof(p.buf) - p.got, 0);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return mkcclSuccess;
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return dropPending(p, "it hung up before its hello");
      p.got += (size_t)r;
      if (p.got >= sizeof(MsgHeader)) break;
    }
    MsgHeader h;
    memcpy(&h, p.buf, sizeof(h));
    Channel hc = connHelloChannel(session);
    if (!frameHeaderValid(hc, h)) return dropPending(p, "not a rank of this communicator (its hello failed its check)");
    if (h.kind != kFrameConnHello || h.len != sizeof(ConnHello)) {
      dropPending(p, "");
      return setError(mkcclInternalError, "%s: a rank connected with a frame of kind %u and %llu bytes, expected a "
                      "hello of %zu bytes (mixed libmkccl versions?)", w, h.kind, (unsigned long long)h.len,
                      sizeof(ConnHello));
    }
    if (p.got < kHelloFrame) return mkcclSuccess;  // the rest is on its way
    ConnHello ch;
    uint64_t mac;
    memcpy(&ch, p.buf + sizeof(h), sizeof(ch));
    memcpy(&mac, p.buf + sizeof(h) + sizeof(ch), sizeof(mac));
    if (mac != framePayloadMac(hc, &ch, sizeof(ch))) return dropPending(p, "its hello failed its check");
    if (ch.to != rank || ch.from < 0 || ch.from >= nranks || (ch.kind != kConnRing && ch.kind != kConnP2p)) {
      dropPending(p, "");
      return setError(mkcclInternalError, "%s: a rank's hello says from %d to %d, kind %u (this is rank %d of %d)", w,
                      ch.from, ch.to, ch.kind, rank, nranks);
    }
    auto k = std::make_pair((int)ch.from, ch.kind);
    if (unclaimed.count(k) || (ch.kind == kConnRing && ringPrev.fd >= 0) ||
        (ch.kind == kConnP2p && p2pIn[ch.from].fd >= 0))
      return dropPending(p, "a second connection for the same purpose (a replay?)");
    Conn c;
    c.fd = p.fd;
    connChannels(session, ch, &c.rx, &c.tx);
    p.fd = -1;
    track(c.fd);
    unclaimed[k] = c;
    return mkcclSuccess;
  }

  mkcclResult_t dropPending(Pending& p, const char* why) {
    if (*why) MKCCL_TRACE("%s: dropping an incoming connection: %s", what("accept").c_str(), why);
    close(p.fd);
    p.fd = -1;
    strangers++;
    return mkcclSuccess;
  }

  // One ring step: send a message to the next rank while receiving one from the previous. Both
  // headers first, then both payloads, so no rank waits for a payload before it sent its own.
  mkcclResult_t ringExchange(uint32_t tag, const void* sendBuf, void* recvBuf, size_t bytes, const Deadline& dl,
                             const char* w) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    MsgHeader out = frameHeader(ringNext.tx, kFrameData, tag, bytes), in;
    uint64_t outMac = bytes ? framePayloadMac(ringNext.tx, sendBuf, bytes) : 0, inMac = 0;
    SocketIo ops[2];
    ops[0].fd = ringNext.fd, ops[0].isSend = true, ops[0].peer = names[next].c_str();
    ops[0].set(&out, sizeof(out));
    ops[1].fd = ringPrev.fd, ops[1].isSend = false, ops[1].peer = names[prev].c_str();
    ops[1].set(&in, sizeof(in));
    ringNext.txMid = true;
    MKCCL_CHECK(transfer(ops, 2, &ringNext, &ringPrev, dl, w));
    mkcclResult_t bad = frameCheckHeader(ringPrev.fd, ringPrev.rx, in, kFrameData, tag, bytes, dl, w, ops[1].peer);
    ops[0].set(const_cast<void*>(sendBuf), bytes);
    if (bytes) ops[0].buf2 = &outMac, ops[0].len2 = sizeof(outMac);
    ops[1].set(recvBuf, bytes);
    if (bytes) ops[1].buf2 = &inMac, ops[1].len2 = sizeof(inMac);
    if (bad != mkcclSuccess) {
      // Finish our frame first, so that our failure note can follow it.
      std::string msg = lastError();
      if (transfer(ops, 1, &ringNext, &ringPrev, dl, w) == mkcclSuccess) ringNext.txMid = false, frameDone(ringNext.tx);
      return recordError(bad, msg.c_str());
    }
    MKCCL_CHECK(transfer(ops, 2, &ringNext, &ringPrev, dl, w));
    ringNext.txMid = false;
    frameDone(ringNext.tx);
    if (bytes && inMac != framePayloadMac(ringPrev.rx, recvBuf, bytes))
      return setError(mkcclRemoteError, "%s: the payload from %s failed its check (a corrupted stream)", w,
                      ops[1].peer);
    frameDone(ringPrev.rx);
    return mkcclSuccess;
  }

  mkcclResult_t ringAllGather(uint32_t tag, char* data, size_t bytes, const char* op) {
    if (nranks == 1) return mkcclSuccess;
    Deadline dl(timeoutMs);
    std::string w = what(op);
    for (int step = 0; step < nranks - 1; step++) {
      size_t sendIdx = (size_t)((rank - step + nranks) % nranks);
      size_t recvIdx = (size_t)((rank - step - 1 + 2 * nranks) % nranks);
      MKCCL_CHECK(ringExchange(tag, data + sendIdx * bytes, data + recvIdx * bytes, bytes, dl, w.c_str()));
    }
    return mkcclSuccess;
  }

  mkcclResult_t setup(const SocketAddress& root, bool serveRoot, const Deadline& dl, uint64_t* token) {
    std::string w = what("init");
    if (serveRoot) MKCCL_CHECK(startCommIdRoot(root, dl));

    // Listen where peers can reach us: with the root on loopback all ranks are on this host.
    SocketAddress me;
    std::string ifname = "lo";
    if (socketAddrIsLoopback(root) && settings().socketIfname.empty()) {
      me = root;
      if (me.sa.sa_family == AF_INET) me.sin.sin_port = 0; else me.sin6.sin6_port = 0;
    } else {
      MKCCL_CHECK(socketFindInterface(&me, &ifname));
    }
    MKCCL_CHECK(socketListen(&me, &listenFd));
    track(listenFd);
    MKCCL_INFO("%s: listening on %s (%s)", w.c_str(), socketAddrToString(me).c_str(), ifname.c_str());

    // Rendezvous.
    std::string rootName = "the root at " + socketAddrToString(root);
    int rfd = -1;
    MKCCL_CHECK(socketConnect(root, dl, rootName.c_str(), &rfd));
    track(rfd);
    RootHello hello;
    memset(&hello, 0, sizeof(hello));
    hello.version = kHelloVersion, hello.rank = rank, hello.nranks = nranks, hello.nonce = randomU64();
    hello.listenAddr = me;
    Channel hc = helloChannel(idKey), toRoot, fromRoot;
    rootConnChannels(idKey, hello.nonce, &toRoot, &fromRoot);
    MKCCL_CHECK(frameSend(rfd, hc, kFrameRootHello, 0, &hello, sizeof(hello), dl, w.c_str(), rootName.c_str()));
    std::vector<char> table(sizeof(RootTable) + (size_t)nranks * sizeof(SocketAddress));
    mkcclResult_t r = frameRecv(rfd, fromRoot, kFrameRootTable, 0, table.data(), table.size(), dl, w.c_str(),
                                rootName.c_str());
    if (r == mkcclRemoteError && frameless(fromRoot))
      r = setError(r, "%s (does that root serve this id? A stale or altered id gets no answer)", lastError());
    if (r == mkcclTimeout) {
      // Tell the root, so that every rank times out now, and knows which ranks are missing.
      std::string msg = lastError();
      std::vector<char> note = failNote(mkcclTimeout, rank, "timed out");
      std::vector<char> f = frameBuild(toRoot, kFrameRootAbort, 0, note.data(), note.size());
      ::send(rfd, f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      recordError(r, msg.c_str());
    }
    MKCCL_CHECK(r);
    untrackClose(rfd);  // the root is done with us
    RootTable t;
    memcpy(&t, table.data(), sizeof(t));
    *token = t.nonce;
    session = sessionKey(idKey, t.nonce);
    addrs.resize(nranks);
    memcpy(addrs.data(), table.data() + sizeof(t), (size_t)nranks * sizeof(SocketAddress));
    for (int q = 0; q < nranks; q++) names.push_back("rank " + std::to_string(q) + " (" + socketAddrToString(addrs[q]) + ")");
    MKCCL_INFO("%s: rendezvous with %d ranks done", w.c_str(), nranks);

    p2pOut.assign(nranks, Conn());
    p2pIn.assign(nranks, Conn());
    if (nranks > 1) {
      MKCCL_CHECK(connectTo((rank + 1) % nranks, kConnRing, dl, &ringNext));
      MKCCL_CHECK(acceptFrom((rank + nranks - 1) % nranks, kConnRing, dl, &ringPrev));
    }
    return mkcclSuccess;
  }

  // MKCCL_COMM_ID: rank 0 serves the rendezvous at the fixed address. The port may still be held by
  // the root of a previous communicator that is sending its last replies: retry until the deadline.
  static bool frameless(const Channel& ch) { return ch.seq == 0; }

  mkcclResult_t startCommIdRoot(const SocketAddress& root, const Deadline& dl) {
    for (;;) {
      SocketAddress a = root;
      int fd = -1;
      mkcclResult_t r = socketListen(&a, &fd);
      if (r == mkcclSuccess) {
        MKCCL_INFO("%s: serving the rendezvous of MKCCL_COMM_ID at %s", what("init").c_str(),
                   socketAddrToString(a).c_str());
        return bootstrapRootStart(fd, a, idKey, timeoutMs);
      }
      if (r != mkcclInvalidUsage) return r;
      if (dl.expired())
        return setError(mkcclInvalidUsage, "%s: MKCCL_COMM_ID address %s stays in use (%s)", what("init").c_str(),
                        socketAddrToString(root).c_str(), lastError());
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, dl.remainingMs())));
    }
  }
};

mkcclResult_t Bootstrap::create(const mkcclUniqueId& id, int rank, int nranks, int timeoutMs,
                                std::unique_ptr<Bootstrap>* out) {
  ARG_CHECK(out != nullptr, "bootstrap: out is NULL");
  ARG_CHECK(nranks >= 1 && nranks <= (1 << 20), "bootstrap: nranks=%d out of range [1, %d]", nranks, 1 << 20);
  ARG_CHECK(rank >= 0 && rank < nranks, "bootstrap: rank=%d out of range for nranks=%d", rank, nranks);
  ARG_CHECK(timeoutMs > 0, "bootstrap: timeoutMs=%d must be > 0", timeoutMs);
  SocketAddress root;
  uint16_t flags = 0;
  MKCCL_CHECK(idDecode(id, &root, &flags));

  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->impl_.reset(new Impl());
  Impl& I = *b->impl_;
  I.rank = rank, I.nranks = nranks, I.timeoutMs = timeoutMs, I.idToken = bootstrapIdToken(id);
  I.idKey = idKey(id);
  Deadline dl(timeoutMs);
  uint64_t nonce = 0;
  mkcclResult_t r = I.setup(root, (flags & kIdFromCommId) && rank == 0, dl, &nonce);
  if (r != mkcclSuccess) {
    std::string msg = lastError();
    I.failed(r, "init");  // peers already connected get the reason; no goodbye
    recordError(r, msg.c_str());
    return r;
  }
  b->rank_ = rank;
  b->nranks_ = nranks;
  // An MKCCL_COMM_ID id is the same for every run: the root's nonce tells runs apart.
  b->token_ = (flags & kIdFromCommId) ? mixToken(I.idToken, nonce) : I.idToken;
  *out = std::move(b);
  return mkcclSuccess;
}

Bootstrap::~Bootstrap() = default;

mkcclResult_t Bootstrap::allGather(void* data, size_t bytes) {
  Impl& I = *impl_;
  MKCCL_CHECK(I.usable("allGather"));
  ARG_CHECK(data != nullptr || bytes == 0, "bootstrap allGather: data is NULL");
  return I.failed(I.ringAllGather(kTagAllGather, (char*)data, bytes, "allGather"), "allGather");
}

mkcclResult_t Bootstrap::barrier() {
  Impl& I = *impl_;
  MKCCL_CHECK(I.usable("barrier"));
  // After nranks-1 ring steps every rank has heard (indirectly) from every other.
  std::vector<char> tokens(I.nranks, 1);
  return I.failed(I.ringAllGather(kTagBarrier, tokens.data(), 1, "barrier"), "barrier");
}

mkcclResult_t Bootstrap::broadcast(void* data, size_t bytes, int root) {
  Impl& I = *impl_;
  MKCCL_CHECK(I.usable("broadcast"));
  ARG_CHECK(root >= 0 && root < I.nranks, "bootstrap broadcast: root=%d out of range for nranks=%d", root, I.nranks);
  ARG_CHECK(data != nullptr || bytes == 0, "bootstrap broadcast: data is NULL");
  if (I.nranks == 1) return mkcclSuccess;
  Deadline dl(I.timeoutMs);
  std::string w = I.what("broadcast");
  int next = (I.rank + 1) % I.nranks, prev = (I.rank + I.nranks - 1) % I.nranks;
  uint32_t tag = kTagBroadcast + (uint32_t)root;
  mkcclResult_t r = mkcclSuccess;
  if (I.rank != root) r = I.recvFrame(I.ringPrev, tag, data, bytes, dl, w.c_str(), I.names[prev].c_str());
  if (r == mkcclSuccess && next != root)
    r = I.sendFrame(I.ringNext, kFrameData, tag, data, bytes, dl, w.c_str(), I.names[next].c_str());
  return I.failed(r, "broadcast");
}

mkcclResult_t Bootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  Impl& I = *impl_;
  MKCCL_CHECK(I.usable("send"));
  ARG_CHECK(peer >= 0 && peer < I.nranks, "bootstrap send: peer=%d out of range for nranks=%d", peer, I.nranks);
  ARG_CHECK(data != nullptr || bytes == 0, "bootstrap send: data is NULL");
  if (peer == I.rank) {
    I.selfQueue.emplace_back(tag, std::vector<char>((const char*)data, (const char*)data + bytes));
    return mkcclSuccess;
  }
  Deadline dl(I.timeoutMs);
  std::string w = I.what("send");
  mkcclResult_t r = mkcclSuccess;
  if (I.p2pOut[peer].fd < 0) r = I.connectTo(peer, kConnP2p, dl, &I.p2pOut[peer]);
  if (r == mkcclSuccess) r = I.sendFrame(I.p2pOut[peer], kFrameData, tag, data, bytes, dl, w.c_str(), I.names[peer].c_str());
  return I.failed(r, "send");
}

mkcclResult_t Bootstrap::recv(int peer, uint32_t tag, void* data, size_t bytes) {
  Impl& I = *impl_;
  MKCCL_CHECK(I.usable("recv"));
  ARG_CHECK(peer >= 0 && peer < I.nranks, "bootstrap recv: peer=%d out of range for nranks=%d", peer, I.nranks);
  ARG_CHECK(data != nullptr || bytes == 0, "bootstrap recv: data is NULL");
  if (peer == I.rank) {
    if (I.selfQueue.empty())
      return setError(mkcclInvalidUsage, "%s: recv from itself with no message sent to itself",
                      I.what("recv").c_str());
    auto& m = I.selfQueue.front();
    if (m.first != tag || m.second.size() != bytes)
      return I.failed(setError(mkcclInternalError,
                               "%s: expected a message with tag 0x%x and %zu bytes from itself, got tag 0x%x and %zu "
                               "bytes",
                               I.what("recv").c_str(), tag, bytes, m.first, m.second.size()),
                      "recv");
    if (bytes) memcpy(data, m.second.data(), bytes);
    I.selfQueue.pop_front();
    return mkcclSuccess;
  }
  Deadline dl(I.timeoutMs);
  std::string w = I.what("recv");
  mkcclResult_t r = mkcclSuccess;
  if (I.p2pIn[peer].fd < 0) r = I.acceptFrom(peer, kConnP2p, dl, &I.p2pIn[peer]);
  if (r == mkcclSuccess) r = I.recvFrame(I.p2pIn[peer], tag, data, bytes, dl, w.c_str(), I.names[peer].c_str());
  return I.failed(r, "recv");
}

void Bootstrap::abort() {
  if (!impl_) return;
  impl_->aborted = true;
  impl_->shutdownAll();
  MKCCL_INFO("%s: aborted", impl_->what("abort").c_str());
}

}  // namespace mkccl
