// The bootstrap (see bootstrap.h).
//
// Connections: every rank listens on one socket. At create it connects to the root (retrying until
// the deadline), sends its address, gets the table of all addresses, then connects to the next rank
// of the ring and accepts the previous one: allGather and barrier run around that ring (each step
// sends and receives at once), broadcast forwards along it. send/recv use one socket per ordered
// pair of ranks, connected by the sender on its first send and accepted by the receiver on its first
// recv; so messages are FIFO per pair and a send completes without the receiver as long as the
// kernel can buffer it. Connections are told apart by a hello (rank, kind, the id's token).
//
// Failure is final: the first error of any operation (or abort()) shuts every socket down, so peers
// blocked on this rank fail at once instead of waiting for their timeout. Later calls return the same
// error. While an operation waits, it also watches its ring sockets that it is not using: a ring
// neighbour that hangs up without having said goodbye (destroy sends a bye on both ring sockets)
// has crashed or aborted, so the wait ends with mkcclRemoteError, and the failure cascades around the
// ring to every rank blocked in the bootstrap, whatever it waits for (a recv from a rank that will
// never connect, say). Only abort() may be called concurrently with the other calls.
#include "runtime/bootstrap.h"
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "runtime/bootstrap_wire.h"
#include "runtime/check.h"
#include "runtime/log.h"
#include "runtime/settings.h"

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
  uint64_t token = randomU64();
  idEncode(addr, token, 0, id);
  MKCCL_INFO("bootstrap: root listening on %s (%s)", socketAddrToString(addr).c_str(), ifname.c_str());
  return bootstrapRootStart(fd, addr, token, bootstrapDefaultTimeoutMs());
}

struct Bootstrap::Impl {
  int rank = -1, nranks = 0, timeoutMs = 0;
  uint64_t idToken = 0;
  int listenFd = -1;
  std::vector<SocketAddress> addrs;
  std::vector<std::string> names;  // "rank 3 (1.2.3.4:5)"
  int ringNext = -1, ringPrev = -1;
  std::vector<int> p2pOut, p2pIn;
  std::map<std::pair<int, uint32_t>, int> unclaimed;  // accepted before anyone asked for them
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
      MsgHeader bye = {kMsgMagic, kTagBye, 0};
      for (int fd : {ringNext, ringPrev})
        if (fd >= 0) ::send(fd, &bye, sizeof(bye), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
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

  // Every failure ends the bootstrap (see the top of the file).
  mkcclResult_t failed(mkcclResult_t r, const char* op) {
    if (r == mkcclSuccess) return r;
    if (aborted) return setError(mkcclInvalidUsage, "%s: the bootstrap was aborted", what(op).c_str());
    broken = r;
    brokenMsg = lastError();
    shutdownAll();
    return r;
  }

  // Runs op(watch) with the ring sockets not in `busy` watched; a watched neighbour that hung up
  // without a bye fails it (see the top of the file).
  template <class Op>
  mkcclResult_t watched(const char* w, int busyA, int busyB, Op op) {
    int ring[2] = {ringNext, ringPrev};
    for (;;) {
      int fds[2] = {-1, -1}, which[2] = {0, 0}, k = 0;
      for (int i = 0; i < 2; i++)
        if (watchRing[i] && ring[i] >= 0 && ring[i] != busyA && ring[i] != busyB) fds[k] = ring[i], which[k++] = i;
      SocketWatch sw;
      sw.fds = fds, sw.n = k;
      mkcclResult_t r = op(&sw);
      if (r != mkcclInProgress) return r;
      MKCCL_CHECK(neighbourHungUp(which[sw.fired], w));
    }
  }

  mkcclResult_t neighbourHungUp(int which, const char* w) {
    int fd = which == 0 ? ringNext : ringPrev;
    int peer = which == 0 ? (rank + 1) % nranks : (rank + nranks - 1) % nranks;
    watchRing[which] = false;  // decided now, one way or the other
    MsgHeader h;
    ssize_t n = ::recv(fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
    if (n == (ssize_t)sizeof(h) && h.magic == kMsgMagic && h.tag == kTagBye) {
      MKCCL_INFO("%s: %s has left", w, names[peer].c_str());
      return mkcclSuccess;
    }
    // Data still queued: it will be read (and judged) by the ring operation it belongs to.
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return mkcclSuccess;
    if (aborted) return mkcclInvalidUsage;
    return setError(mkcclRemoteError, "%s: %s aborted or died (it hung up without leaving cleanly)", w,
                    names[peer].c_str());
  }

  mkcclResult_t transfer(SocketIo* ops, int nops, const Deadline& dl, const char* w) {
    return watched(w, ops[0].fd, nops > 1 ? ops[1].fd : -1,
                   [&](SocketWatch* sw) { return socketTransfer(ops, nops, dl, w, sw); });
  }
  mkcclResult_t sendMsg(int fd, uint32_t tag, const void* data, size_t len, const Deadline& dl, const char* w,
                        int peer) {
    MsgHeader h = {kMsgMagic, tag, len};
    MKCCL_TRACE("%s: send tag 0x%x, %zu bytes to %s", w, tag, len, names[peer].c_str());
    SocketIo op;
    op.fd = fd, op.isSend = true, op.peer = names[peer].c_str();
    if (len <= 4096) {  // small: one segment
      char buf[sizeof(h) + 4096];
      memcpy(buf, &h, sizeof(h));
      if (len) memcpy(buf + sizeof(h), data, len);
      op.buf = buf, op.len = sizeof(h) + len;
      return transfer(&op, 1, dl, w);
    }
    op.buf = &h, op.len = sizeof(h);
    MKCCL_CHECK(transfer(&op, 1, dl, w));
    op.buf = const_cast<void*>(data), op.len = len, op.done = 0;
    return transfer(&op, 1, dl, w);
  }
  mkcclResult_t recvMsg(int fd, uint32_t tag, void* data, size_t len, const Deadline& dl, const char* w, int peer) {
    MsgHeader h;
    SocketIo op;
    op.fd = fd, op.isSend = false, op.buf = &h, op.len = sizeof(h), op.peer = names[peer].c_str();
    MKCCL_CHECK(transfer(&op, 1, dl, w));
    MKCCL_CHECK(msgCheckHeader(fd, h, tag, len, dl, w, names[peer].c_str()));
    op.buf = data, op.len = len, op.done = 0;
    return transfer(&op, 1, dl, w);
  }

  mkcclResult_t connectTo(int peer, ConnKind kind, const Deadline& dl, int* fd) {
    std::string w = what(kind == kConnRing ? "connect (ring)" : "connect (send)");
    int s = -1;
    MKCCL_CHECK(watched(w.c_str(), -1, -1, [&](SocketWatch* sw) {
      return socketConnect(addrs[peer], dl, names[peer].c_str(), &s, sw);
    }));
    track(s);
    ConnHello h = {idToken, rank, kind};
    MKCCL_CHECK(sendMsg(s, kTagConnHello, &h, sizeof(h), dl, w.c_str(), peer));
    MKCCL_INFO("%s: connected to %s", w.c_str(), names[peer].c_str());
    *fd = s;
    return mkcclSuccess;
  }

  // The connection `peer` made to us for `kind`; others that arrive meanwhile are kept for later.
  mkcclResult_t acceptFrom(int peer, ConnKind kind, const Deadline& dl, int* fd) {
    std::string w = what(kind == kConnRing ? "accept (ring)" : "accept (recv)");
    auto key = std::make_pair(peer, (uint32_t)kind);
    for (;;) {
      auto it = unclaimed.find(key);
      if (it != unclaimed.end()) {
        *fd = it->second;
        unclaimed.erase(it);
        MKCCL_INFO("%s: accepted %s", w.c_str(), names[peer].c_str());
        return mkcclSuccess;
      }
      int s = -1;
      MKCCL_CHECK(watched(w.c_str(), -1, -1, [&](SocketWatch* sw) {
        return socketAccept(listenFd, dl, names[peer].c_str(), &s, sw);
      }));
      track(s);
      // The hello: a connection that fails to say it (not an mkccl rank) is dropped, not fatal.
      ConnHello h;
      MsgHeader mh;
      SocketIo op;
      op.fd = s, op.isSend = false, op.buf = &mh, op.len = sizeof(mh), op.peer = "an incoming connection";
      mkcclResult_t helloRes = mkcclSuccess;
      MKCCL_CHECK(watched(w.c_str(), -1, -1, [&](SocketWatch* sw) {
        mkcclResult_t r = socketTransfer(&op, 1, dl, w.c_str(), sw);
        if (r == mkcclSuccess && op.buf == &mh) {
          r = msgCheckHeader(s, mh, kTagConnHello, sizeof(h), dl, w.c_str(), op.peer);
          op.buf = &h, op.len = sizeof(h), op.done = 0;
          if (r == mkcclSuccess) r = socketTransfer(&op, 1, dl, w.c_str(), sw);
        }
        if (r == mkcclInProgress) return r;
        helloRes = r;
        return mkcclSuccess;
      }));
      if (helloRes == mkcclTimeout) return helloRes;
      if (helloRes != mkcclSuccess) {
        MKCCL_WARN("%s: dropping an incoming connection: %s", w.c_str(), lastError());
        shutdown(s, SHUT_RDWR);
        continue;
      }
      if (h.token != idToken || h.rank < 0 || h.rank >= nranks || (h.kind != kConnRing && h.kind != kConnP2p)) {
        MKCCL_WARN("%s: ignoring a connection from another communicator (rank %d, kind %u)", w.c_str(), h.rank,
                   h.kind);
        shutdown(s, SHUT_RDWR);
        continue;
      }
      auto k = std::make_pair((int)h.rank, h.kind);
      if (unclaimed.count(k) || (h.kind == kConnRing && ringPrev >= 0) || (h.kind == kConnP2p && p2pIn[h.rank] >= 0))
        return setError(mkcclInternalError, "%s: %s connected twice for the same purpose", w.c_str(),
                        names[h.rank].c_str());
      unclaimed[k] = s;
    }
  }

  // One ring step: send a message to the next rank while receiving one from the previous.
  mkcclResult_t ringExchange(uint32_t tag, const void* sendBuf, void* recvBuf, size_t bytes, const Deadline& dl,
                             const char* w) {
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    MsgHeader out = {kMsgMagic, tag, bytes}, in;
    SocketIo ops[2];
    ops[0].fd = ringNext, ops[0].isSend = true, ops[0].buf = &out, ops[0].len = sizeof(out);
    ops[0].peer = names[next].c_str();
    ops[1].fd = ringPrev, ops[1].isSend = false, ops[1].buf = &in, ops[1].len = sizeof(in);
    ops[1].peer = names[prev].c_str();
    MKCCL_CHECK(transfer(ops, 2, dl, w));
    MKCCL_CHECK(msgCheckHeader(ringPrev, in, tag, bytes, dl, w, names[prev].c_str()));
    ops[0].buf = const_cast<void*>(sendBuf), ops[0].len = bytes, ops[0].done = 0;
    ops[1].buf = recvBuf, ops[1].len = bytes, ops[1].done = 0;
    return transfer(ops, 2, dl, w);
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
    hello.token = idToken, hello.rank = rank, hello.nranks = nranks, hello.listenAddr = me;
    MKCCL_CHECK(msgSend(rfd, kTagRootHello, &hello, sizeof(hello), dl, w.c_str(), rootName.c_str()));
    std::vector<char> table(sizeof(RootTable) + (size_t)nranks * sizeof(SocketAddress));
    mkcclResult_t r = msgRecv(rfd, kTagRootTable, table.data(), table.size(), dl, w.c_str(), rootName.c_str());
    if (r == mkcclTimeout) {
      // Tell the root, so that every rank times out now, and knows which ranks are missing.
      MsgHeader giveUp = {kMsgMagic, kTagRootGiveUp, 0};
      ::send(rfd, &giveUp, sizeof(giveUp), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    MKCCL_CHECK(r);
    untrackClose(rfd);  // the root is done with us
    RootTable t;
    memcpy(&t, table.data(), sizeof(t));
    *token = t.nonce;
    addrs.resize(nranks);
    memcpy(addrs.data(), table.data() + sizeof(t), (size_t)nranks * sizeof(SocketAddress));
    for (int q = 0; q < nranks; q++) names.push_back("rank " + std::to_string(q) + " (" + socketAddrToString(addrs[q]) + ")");
    MKCCL_INFO("%s: rendezvous with %d ranks done", w.c_str(), nranks);

    p2pOut.assign(nranks, -1);
    p2pIn.assign(nranks, -1);
    if (nranks > 1) {
      MKCCL_CHECK(connectTo((rank + 1) % nranks, kConnRing, dl, &ringNext));
      MKCCL_CHECK(acceptFrom((rank + nranks - 1) % nranks, kConnRing, dl, &ringPrev));
    }
    return mkcclSuccess;
  }

  // MKCCL_COMM_ID: rank 0 serves the rendezvous at the fixed address. The port may still be held by
  // the root of a previous communicator that is sending its last replies: retry until the deadline.
  mkcclResult_t startCommIdRoot(const SocketAddress& root, const Deadline& dl) {
    for (;;) {
      SocketAddress a = root;
      int fd = -1;
      mkcclResult_t r = socketListen(&a, &fd);
      if (r == mkcclSuccess) {
        MKCCL_INFO("%s: serving the rendezvous of MKCCL_COMM_ID at %s", what("init").c_str(),
                   socketAddrToString(a).c_str());
        return bootstrapRootStart(fd, a, idToken, timeoutMs);
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
  Deadline dl(timeoutMs);
  uint64_t nonce = 0;
  mkcclResult_t r = I.setup(root, (flags & kIdFromCommId) && rank == 0, dl, &nonce);
  if (r != mkcclSuccess) {
    I.broken = r;  // no goodbye: peers must not take this for a clean departure
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
  if (I.rank != root) r = I.recvMsg(I.ringPrev, tag, data, bytes, dl, w.c_str(), prev);
  if (r == mkcclSuccess && next != root) r = I.sendMsg(I.ringNext, tag, data, bytes, dl, w.c_str(), next);
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
  if (I.p2pOut[peer] < 0) r = I.connectTo(peer, kConnP2p, dl, &I.p2pOut[peer]);
  if (r == mkcclSuccess) r = I.sendMsg(I.p2pOut[peer], tag, data, bytes, dl, w.c_str(), peer);
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
  if (I.p2pIn[peer] < 0) {
    int fd = -1;
    r = I.acceptFrom(peer, kConnP2p, dl, &fd);
    if (r == mkcclSuccess) I.p2pIn[peer] = fd;
  }
  if (r == mkcclSuccess) r = I.recvMsg(I.p2pIn[peer], tag, data, bytes, dl, w.c_str(), peer);
  return I.failed(r, "recv");
}

void Bootstrap::abort() {
  if (!impl_) return;
  impl_->aborted = true;
  impl_->shutdownAll();
  MKCCL_INFO("%s: aborted", impl_->what("abort").c_str());
}

}  // namespace mkccl
