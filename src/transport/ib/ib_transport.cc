// The ib transport: one RC QP per peer on another node. A put is an RDMA WRITE of the data
// followed by an 8-byte inline RDMA WRITE of the flag value into the receiver's flag array; RC
// executes them in order, so the flag never lands before the data. A batch of puts to one peer is
// one chain of WRs of which only the last (and one every sqDepth/2, so the send queue can be
// reaped) is signalled; a signalled completion retires every WR before it on that QP.
#include "transport/ib/ib_transport.h"
#include <errno.h>
#include <string.h>
#include <deque>
#include <random>
#include "base/check.h"
#include "base/log.h"

namespace mkccl {
namespace ib {
namespace {

struct IbConn {
  net::ConnHeader h;
  uint32_t qpn, psn;
  uint16_t lid;
  uint8_t useGid;
  uint8_t mtu;
  uint32_t pad;
  uint8_t gid[16];
  uint64_t windowAddr;
  uint32_t windowRkey;
  uint32_t flagsRkey;
  uint64_t flagsAddr;
  uint64_t flagsBytes;
};

constexpr uint64_t kUnsignalled = (1ull << 40) - 1;  // wr id (low 40 bits) of WRs not signalled

// What one signalled WR retires.
struct Batch {
  uint64_t id;
  int wrs;                       // WRs retired by its completion
  std::vector<uint64_t> cookies; // puts whose last WR is among them
};

struct Peer {
  void* qp = nullptr;
  uint32_t qpn = 0, psn = 0;
  bool connected = false;
  bool failed = false;
  IbConn remote{};
  int outstanding = 0;  // WRs posted and not retired
  uint64_t nextBatch = 0;
  std::deque<Batch> batches;
};

class IbTransport final : public net::Transport {
 public:
  IbTransport(std::unique_ptr<Verbs> v, const IbOptions& o) : v_(std::move(v)), o_(o) {}
  ~IbTransport() override {
    for (Peer& p : peers_)
      if (p.qp) v_->destroyQp(p.qp);
    v_->deregMr(&windowMr_);
    v_->deregMr(&flagsMr_);
  }

  const char* name() const override { return "ib"; }
  net::Caps caps() const override {
    net::Caps c;
    c.writesFlags = true;
    c.deviceMemory = true;
    c.arrivalValueBits = 64;
    return c;
  }

  mkcclResult_t setup(const net::Setup& s) override {
    s_ = s;
    if (o_.sqDepth < 4) return setError(mkcclInternalError, "ib: send queue depth %d is too small", o_.sqDepth);
    if (s.flags.base == nullptr || s.flags.bytes < (uint64_t)s.nranks * s.flagsPerPeer * 8)
      return setError(mkcclInternalError, "ib: the flag array is missing or too small");
    MKCCL_CHECK(v_->open(s.device, o_.port, &port_));
    const char* how1 = "";
    const char* how2 = "";
    MKCCL_CHECK(v_->regMr(s.window.base, s.window.bytes, s.window.device, &windowMr_, &how1));
    MKCCL_CHECK(v_->regMr(s.flags.base, s.flags.bytes, s.flags.device, &flagsMr_, &how2));
    MKCCL_CHECK(v_->createCq(o_.sqDepth * 4));
    peers_.assign(s.nranks, Peer{});
    MKCCL_INFO("ib: device %s port %d (%s, lid %u, mtu %d), window %llu bytes registered by %s, flags by %s",
               v_->deviceName().c_str(), o_.port, port_.ethernet ? "RoCE" : "InfiniBand", port_.lid,
               128 << port_.mtu, (unsigned long long)s.window.bytes, how1, how2);
    return mkcclSuccess;
  }

  mkcclResult_t connData(int peer, std::vector<uint8_t>* out) override {
    if (peer < 0 || peer >= s_.nranks || peer == s_.rank)
      return setError(mkcclInternalError, "ib: connection data for rank %d of %d", peer, s_.nranks);
    Peer& p = peers_[peer];
    if (!p.qp) {
      MKCCL_CHECK(v_->createQp(o_.sqDepth, 8, &p.qp, &p.qpn));
      MKCCL_CHECK(v_->toInit(p.qp));
      p.psn = (uint32_t)(rng_() & 0xffffff);
    }
    IbConn c{};
    c.h.magic = net::kConnMagic;
    c.h.version = net::kConnVersion;
    c.h.kind = net::kConnKindIb;
    c.h.bytes = sizeof(IbConn);
    c.h.rank = s_.rank;
    c.h.peer = peer;
    c.h.windowBytes = s_.window.bytes;
    c.qpn = p.qpn;
    c.psn = p.psn;
    c.lid = port_.lid;
    c.useGid = port_.ethernet ? 1 : 0;
    c.mtu = (uint8_t)port_.mtu;
    memcpy(c.gid, port_.gid, 16);
    c.windowAddr = (uint64_t)(uintptr_t)s_.window.base;
    c.windowRkey = windowMr_.rkey;
    c.flagsAddr = (uint64_t)(uintptr_t)s_.flags.base;
    c.flagsRkey = flagsMr_.rkey;
    c.flagsBytes = s_.flags.bytes;
    out->resize(sizeof(c));
    memcpy(out->data(), &c, sizeof(c));
    return mkcclSuccess;
  }

  mkcclResult_t connect(int peer, const void* data, size_t bytes) override {
    if (peer < 0 || peer >= s_.nranks || peer == s_.rank || !peers_[peer].qp)
      return setError(mkcclInternalError, "ib: connect to rank %d before its connection data was made", peer);
    MKCCL_CHECK(net::connCheck(data, bytes, net::kConnKindIb, sizeof(IbConn), peer, s_.rank, s_.window.bytes, "ib"));
    IbConn c;
    memcpy(&c, data, sizeof(c));
    if (c.qpn == 0 || c.qpn > 0xffffff || c.psn > 0xffffff || c.mtu < 1 || c.mtu > 5 ||
        c.flagsBytes < (uint64_t)s_.nranks * s_.flagsPerPeer * 8 || (c.useGid != 0) != port_.ethernet)
      return setError(mkcclRemoteError,
                      "ib: connection data from rank %d is malformed (qpn %u, psn %u, mtu %u, flags %llu bytes, %s "
                      "addressing vs this rank's %s)",
                      peer, c.qpn, c.psn, c.mtu, (unsigned long long)c.flagsBytes, c.useGid ? "GID" : "LID",
                      port_.ethernet ? "GID" : "LID");
    Peer& p = peers_[peer];
    p.remote = c;
    QpRemote r;
    r.qpn = c.qpn;
    r.psn = c.psn;
    r.lid = c.lid;
    r.useGid = c.useGid != 0;
    memcpy(r.gid, c.gid, 16);
    r.mtu = std::min<int>(c.mtu, port_.mtu);
    MKCCL_CHECK(v_->toRtr(p.qp, r));
    MKCCL_CHECK(v_->toRts(p.qp, p.psn));
    p.connected = true;
    return mkcclSuccess;
  }

  mkcclResult_t post(int peer, const net::PutOp* ops, int n, int* taken) override {
    *taken = 0;
    if (peer < 0 || peer >= s_.nranks || !peers_[peer].connected)
      return setError(mkcclInvalidUsage, "ib: put to rank %d, which is not connected (another node's rank?)", peer);
    Peer& p = peers_[peer];
    if (p.failed) return mkcclSuccess;  // its error was reported; nothing more goes to it
    const uint64_t W = s_.window.bytes;
    wrs_.clear();
    values_.clear();
    values_.reserve(n);
    Batch cur{p.nextBatch, 0, {}};
    const size_t batchesBefore = p.batches.size();
    const int outstandingBefore = p.outstanding;
    const uint64_t nextBefore = p.nextBatch;
    const uint64_t peerTag = (uint64_t)peer << 40;
    int sinceSignal = 0;
    const int room = o_.sqDepth - p.outstanding;
    for (int i = 0; i < n; ++i) {
      const net::PutOp& op = ops[i];
      if (op.srcOff > W || op.bytes > W - op.srcOff || op.dstOff > W || op.bytes > W - op.dstOff ||
          (int)op.flag >= s_.flagsPerPeer)
        return setError(mkcclInvalidUsage, "ib: put to rank %d: [%llu, +%llu) -> [%llu, ...) flag %u is out of range",
                        peer, (unsigned long long)op.srcOff, (unsigned long long)op.bytes,
                        (unsigned long long)op.dstOff, op.flag);
      const int pieces = (int)((op.bytes + o_.maxWrBytes - 1) / o_.maxWrBytes);
      if (pieces + 1 > o_.sqDepth)
        return setError(mkcclInvalidUsage, "ib: a put of %llu bytes to rank %d needs %d work requests; the send queue "
                        "holds %d", (unsigned long long)op.bytes, peer, pieces + 1, o_.sqDepth);
      if ((int)wrs_.size() + pieces + 1 > room) break;  // flow control: the rest waits for completions
      for (uint64_t off = 0; off < op.bytes; off += o_.maxWrBytes) {
        SendWr w;
        w.localAddr = (uint64_t)(uintptr_t)s_.window.base + op.srcOff + off;
        w.length = (uint32_t)std::min<uint64_t>(o_.maxWrBytes, op.bytes - off);
        w.lkey = windowMr_.lkey;
        w.remoteAddr = p.remote.windowAddr + op.dstOff + off;
        w.rkey = p.remote.windowRkey;
        w.wrId = peerTag | kUnsignalled;
        wrs_.push_back(w);
        ++sinceSignal;
      }
      values_.push_back(op.value);
      SendWr f;
      f.localAddr = (uint64_t)(uintptr_t)&values_.back();
      f.length = 8;
      f.inlineData = true;
      f.remoteAddr = p.remote.flagsAddr + ((uint64_t)s_.rank * s_.flagsPerPeer + op.flag) * 8;
      f.rkey = p.remote.flagsRkey;
      f.wrId = peerTag | kUnsignalled;
      wrs_.push_back(f);
      ++sinceSignal;
      cur.cookies.push_back(op.cookie);
      ++*taken;
      // Signal now and then so the send queue can be reaped before it fills.
      if (sinceSignal >= o_.sqDepth / 2 || *taken == n) {
        signal(p, cur, sinceSignal);
        sinceSignal = 0;
      }
    }
    if (sinceSignal > 0) signal(p, cur, sinceSignal);
    if (wrs_.empty()) return mkcclSuccess;
    const int rc = v_->postSend(p.qp, wrs_.data(), (int)wrs_.size());
    if (rc != 0) {
      // Nothing of the chain counts as posted: forget the batches recorded for it.
      p.batches.resize(batchesBefore);
      p.outstanding = outstandingBefore;
      p.nextBatch = nextBefore;
      *taken = 0;
      if (rc == ENOMEM) return mkcclSuccess;  // full after all: retry after completions
      return setError(mkcclSystemError, "ib: ibv_post_send to rank %d failed: %s", peer, strerror(rc));
    }
    return mkcclSuccess;
  }

  mkcclResult_t poll(std::vector<net::Event>* events) override {
    Wc wc[32];
    const int n = v_->pollCq(wc, 32);
    if (n < 0) return setError(mkcclSystemError, "ib: polling the completion queue failed");
    for (int i = 0; i < n; ++i) {
      const int peer = (int)(wc[i].wrId >> 40);
      const uint64_t id = wc[i].wrId & kUnsignalled;
      if (peer < 0 || peer >= s_.nranks)
        return setError(mkcclInternalError, "ib: completion for unknown work request 0x%llx",
                        (unsigned long long)wc[i].wrId);
      Peer& p = peers_[peer];
      if (wc[i].status != 0) {
        // After an error the QP flushes every WR, signalled or not: report the peer once.
        if (id != kUnsignalled && !p.batches.empty() && p.batches.front().id == id) {
          p.outstanding -= p.batches.front().wrs;
          p.batches.pop_front();
        }
        if (!p.failed) {
          p.failed = true;
          net::Event ev;
          ev.type = net::Event::kError;
          ev.peer = peer;
          ev.error = mkcclRemoteError;
          char msg[256];
          snprintf(msg, sizeof(msg), "ib: a put to rank %d failed on %s: %s (status %d, vendor error 0x%x)", peer,
                   v_->deviceName().c_str(), v_->statusString(wc[i].status), wc[i].status, wc[i].vendorErr);
          ev.message = msg;
          events->push_back(ev);
        }
        continue;
      }
      if (p.batches.empty() || p.batches.front().id != id)
        return setError(mkcclInternalError, "ib: completion %llu of rank %d's QP does not match the oldest batch",
                        (unsigned long long)id, peer);
      Batch b = std::move(p.batches.front());
      p.batches.pop_front();
      p.outstanding -= b.wrs;
      for (uint64_t c : b.cookies) {
        net::Event ev;
        ev.type = net::Event::kSendDone;
        ev.cookie = c;
        ev.peer = peer;
        events->push_back(ev);
      }
    }
    return mkcclSuccess;
  }

 private:
  // Marks the last WR built as signalled, retiring the `count` WRs since the previous signal.
  void signal(Peer& p, Batch& cur, int count) {
    wrs_.back().signaled = true;
    wrs_.back().wrId = ((uint64_t)(&p - peers_.data()) << 40) | cur.id;
    cur.wrs = count;
    p.outstanding += count;
    p.batches.push_back(std::move(cur));
    cur = Batch{++p.nextBatch, 0, {}};
  }

  std::unique_ptr<Verbs> v_;
  IbOptions o_;
  net::Setup s_;
  PortInfo port_;
  Mr windowMr_, flagsMr_;
  std::vector<Peer> peers_;
  std::vector<SendWr> wrs_;
  std::vector<uint64_t> values_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace

std::unique_ptr<net::Transport> makeIbTransport(std::unique_ptr<Verbs> verbs, const IbOptions& opt) {
  return std::unique_ptr<net::Transport>(new IbTransport(std::move(verbs), opt));
}

}  // namespace ib
}  // namespace mkccl
