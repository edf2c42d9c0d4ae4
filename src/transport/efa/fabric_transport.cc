// The libfabric transport: RDM endpoints (provider efa in production, tcp where no RDMA NIC exists).
//
// A put is an RMA write into the peer's registered window. How the receiver learns it landed:
//  - remote CQ data (fi_writedata): the sender's rank, the flag and the low bits of the value ride
//    in the CQ data of the write (8 bytes: src:16|flag:12|value:32; 4 bytes, as on EFA:
//    flag:12|value:20 with the sender found through FI_SOURCE);
//  - a notice message (32 bytes: flag, full value, dstOff, bytes) after the write, when the receiver
//    stages through host memory and must know which range to copy to the GPU.
// Either notification is posted right after the data when the provider orders it after the write
// (FI_ORDER_WAW / FI_ORDER_SAW: tcp), else only once the data write has completed (EFA's SRD does not
// order; a completion of a write means it was delivered).
#include "transport/net.h"

#if MKCCL_HAVE_LIBFABRIC
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <string.h>
#include <algorithm>
#include <deque>
#include <unordered_map>
#include <mutex>
#include "base/check.h"
#include "base/log.h"
#include "transport/net_lib.h"

namespace mkccl {
namespace net {
namespace {

// The few functions of libfabric that are not inline wrappers over its objects' ops, found in
// libfabric.so.1 when a communicator first needs it (transport/net_lib.h says why not before).
struct FabricApi {
  int (*getinfo)(uint32_t, const char*, const char*, uint64_t, const struct fi_info*, struct fi_info**);
  void (*freeinfo)(struct fi_info*);
  struct fi_info* (*dupinfo)(const struct fi_info*);
  int (*fabric)(struct fi_fabric_attr*, struct fid_fabric**, void*);
  const char* (*strerror)(int);
};
const FabricApi* gFi = nullptr;  // set once loaded; every transport exists after that

const FabricApi* fabricApi(std::string* why) {
  static std::once_flag once;
  static FabricApi api;
  static std::string err;
  std::call_once(once, [] {
    static const char* const names[] = {"libfabric.so.1", "libfabric.so"};
    void* h = netLibOpen(names, 2, &err);
    if (!h) return;
    bool ok = (api.getinfo = (decltype(api.getinfo))netLibSym(h, "fi_getinfo", &err)) &&
              (api.freeinfo = (decltype(api.freeinfo))netLibSym(h, "fi_freeinfo", &err)) &&
              (api.dupinfo = (decltype(api.dupinfo))netLibSym(h, "fi_dupinfo", &err)) &&
              (api.fabric = (decltype(api.fabric))netLibSym(h, "fi_fabric", &err)) &&
              (api.strerror = (decltype(api.strerror))netLibSym(h, "fi_strerror", &err));
    if (ok) gFi = &api;
  });
  if (!gFi && why) *why = err;
  return gFi;
}

constexpr uint32_t kNoticeMagic = 0x6e6f7465;  // "note"
struct Notice {
  uint32_t magic;
  uint16_t src;
  uint16_t flag;
  uint64_t value;
  uint64_t dstOff;
  uint64_t bytes;
};
static_assert(sizeof(Notice) == 32, "notice is 32 bytes");

struct FabricConn {
  ConnHeader h;
  uint64_t windowAddr;  // remote address of window offset 0 (0 unless FI_MR_VIRT_ADDR)
  uint64_t windowKey;
  uint32_t wantRanges;  // 1: send me notices (I stage)
  uint32_t cqDataBytes;
  uint32_t addrLen;
  uint32_t pad;
  uint8_t addr[256];
};

constexpr int kRecvBufs = 128;      // notices (and CQ-data writes that consume a buffer) in flight to us
constexpr int kMaxActiveOps = 2048; // puts accepted and not yet completed
constexpr int kNoticeBufs = 512;    // notices being sent

std::string fiErr(int rc) {
  return gFi ? std::string(gFi->strerror(rc < 0 ? -rc : rc)) : "libfabric error " + std::to_string(rc);
}

struct OpState;

struct Req {
  fi_context2 ctx;  // first: libfabric hands &ctx back as op_context
  enum Kind { kData, kNotify, kRecv } kind = kData;
  OpState* op = nullptr;
  Notice* buf = nullptr;  // kNotify / kRecv
};

struct OpState {
  PutOp op;
  uint64_t posted = 0;      // data bytes posted
  int outstanding = 0;      // data requests posted, not completed
  bool notifyPosted = false;
  bool notifyDone = false;
  bool failed = false;
};

struct Peer {
  bool connected = false;
  fi_addr_t addr = FI_ADDR_UNSPEC;
  uint64_t windowAddr = 0, windowKey = 0;
  bool ranges = false;  // notices instead of CQ data
};

class FabricTransport final : public Transport {
 public:
  explicit FabricTransport(std::string provider) : provider_(std::move(provider)) {}
  ~FabricTransport() override { close(); }

  const char* name() const override { return "libfabric"; }
  Caps caps() const override {
    Caps c;
    c.writesFlags = false;
    c.deviceMemory = info_ ? (info_->caps & FI_HMEM) != 0 : false;
    c.arrivalValueBits = cqDataBytes_ >= 8 ? 32 : 20;
    return c;
  }

  mkcclResult_t setup(const Setup& s) override {
    s_ = s;
    if (s.window.bytes == 0 || s.window.base == nullptr)
      return setError(mkcclInternalError, "libfabric: no window to register");
    MKCCL_CHECK(open(s.window.device));
    MKCCL_CHECK(regMem(s.window.base, s.window.bytes, s.window.device, 1, &windowMr_));
    windowDesc_ = fi_mr_desc(windowMr_);
    // Notices we send and receive live in one registered pool.
    pool_.resize(kRecvBufs + kNoticeBufs);
    MKCCL_CHECK(regMem(pool_.data(), pool_.size() * sizeof(Notice), false, 2, &poolMr_));
    poolDesc_ = fi_mr_desc(poolMr_);
    for (int i = 0; i < kNoticeBufs; ++i) freeNotice_.push_back(&pool_[kRecvBufs + i]);
    recvReqs_.resize(kRecvBufs);
    for (int i = 0; i < kRecvBufs; ++i) {
      recvReqs_[i].kind = Req::kRecv;
      recvReqs_[i].buf = &pool_[i];
      MKCCL_CHECK(postRecv(&recvReqs_[i]));
    }
    peers_.assign(s.nranks, Peer{});
    MKCCL_INFO("libfabric: provider %s, fabric %s, domain %s, CQ data %d bytes, msg order%s%s, mr_mode 0x%x%s",
               info_->fabric_attr->prov_name, info_->fabric_attr->name, info_->domain_attr->name, cqDataBytes_,
               orderWaw_ ? " WAW" : "", orderSaw_ ? " SAW" : "", info_->domain_attr->mr_mode,
               (info_->caps & FI_HMEM) ? ", FI_HMEM" : "");
    return mkcclSuccess;
  }

  mkcclResult_t connData(int peer, std::vector<uint8_t>* out) override {
    FabricConn c{};
    c.h.magic = kConnMagic;
    c.h.version = kConnVersion;
    c.h.kind = kConnKindFabric;
    c.h.bytes = sizeof(FabricConn);
    c.h.rank = s_.rank;
    c.h.peer = -1;
    c.h.windowBytes = s_.window.bytes;
    c.windowAddr = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)s_.window.base : 0;
    c.windowKey = fi_mr_key(windowMr_);
    c.wantRanges = s_.wantRanges ? 1 : 0;
    c.cqDataBytes = (uint32_t)cqDataBytes_;
    size_t len = sizeof(c.addr);
    int rc = fi_getname(&ep_->fid, c.addr, &len);
    if (rc != 0) return setError(mkcclSystemError, "libfabric: fi_getname failed: %s", fiErr(rc).c_str());
    c.addrLen = (uint32_t)len;
    out->resize(sizeof(c));
    memcpy(out->data(), &c, sizeof(c));
    return mkcclSuccess;
  }

  mkcclResult_t connect(int peer, const void* data, size_t bytes) override {
    if (peer < 0 || peer >= s_.nranks || peer == s_.rank)
      return setError(mkcclInternalError, "libfabric: connect to rank %d of %d", peer, s_.nranks);
    MKCCL_CHECK(connCheck(data, bytes, kConnKindFabric, sizeof(FabricConn), peer, s_.rank, s_.window.bytes, "libfabric"));
    FabricConn c;
    memcpy(&c, data, sizeof(c));
    if (c.addrLen == 0 || c.addrLen > sizeof(c.addr))
      return setError(mkcclRemoteError, "libfabric: rank %d sent an endpoint address of %u bytes", peer, c.addrLen);
    if (c.cqDataBytes != (uint32_t)cqDataBytes_)
      return setError(mkcclRemoteError, "libfabric: rank %d has %u bytes of CQ data, this rank %d: same provider needed",
                      peer, c.cqDataBytes, cqDataBytes_);
    Peer& p = peers_[peer];
    int rc = fi_av_insert(av_, c.addr, 1, &p.addr, 0, nullptr);
    if (rc != 1)
      return setError(mkcclRemoteError, "libfabric: rank %d's endpoint address is not usable (fi_av_insert: %s)", peer,
                      fiErr(rc).c_str());
    p.windowAddr = c.windowAddr;
    p.windowKey = c.windowKey;
    p.ranges = c.wantRanges != 0;
    p.connected = true;
    addrRank_[p.addr] = peer;
    return mkcclSuccess;
  }

  mkcclResult_t post(int peer, const PutOp* ops, int n, int* taken) override {
    *taken = 0;
    if (peer < 0 || peer >= s_.nranks || !peers_[peer].connected)
      return setError(mkcclInvalidUsage, "libfabric: put to rank %d, which is not connected (another node's rank?)", peer);
    events_ = &deferred_;
    for (int i = 0; i < n; ++i) {
      const PutOp& o = ops[i];
      if (o.srcOff > s_.window.bytes || o.bytes > s_.window.bytes - o.srcOff || o.dstOff > s_.window.bytes ||
          o.bytes > s_.window.bytes - o.dstOff)
        return setError(mkcclInvalidUsage,
                        "put to rank %d: [%llu, +%llu) -> [%llu, +%llu) runs past the %llu-byte network window", peer,
                        (unsigned long long)o.srcOff, (unsigned long long)o.bytes, (unsigned long long)o.dstOff,
                        (unsigned long long)o.bytes, (unsigned long long)s_.window.bytes);
      if (o.flag >= (1u << 12))
        return setError(mkcclInvalidUsage, "put to rank %d: flag %u out of range", peer, o.flag);
      if (active_ >= kMaxActiveOps) break;
      auto* st = new OpState{};
      st->op = o;
      st->op.peer = peer;
      ++active_;
      queue_.push_back(st);
      ++*taken;
    }
    return advance();
  }

  mkcclResult_t poll(std::vector<Event>* events) override {
    events->insert(events->end(), deferred_.begin(), deferred_.end());
    deferred_.clear();
    events_ = events;
    fi_cq_data_entry e[32];
    fi_addr_t src[32];
    for (int round = 0; round < 4; ++round) {
      ssize_t n = fi_cq_readfrom(cq_, e, 32, src);
      if (n == -FI_EAGAIN) break;
      if (n == -FI_EAVAIL) {
        MKCCL_CHECK(readError());
        continue;
      }
      if (n < 0) return setError(mkcclSystemError, "libfabric: fi_cq_read failed: %s", fiErr((int)n).c_str());
      for (ssize_t i = 0; i < n; ++i) MKCCL_CHECK(handle(e[i], src[i]));
      if (n < 32) break;
    }
    MKCCL_CHECK(advance());
    events_ = &deferred_;
    return mkcclSuccess;
  }

 private:
  mkcclResult_t open(bool deviceWindow) {
    std::string why;
    if (!fabricApi(&why)) return setError(mkcclInvalidUsage, "the efa transport is not available: %s", why.c_str());
    SignalHandlersKept keep("libfabric");
    fi_info* hints = gFi->dupinfo(nullptr);
    if (!hints) return setError(mkcclSystemError, "libfabric: fi_allocinfo failed");
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_SEND | FI_RECV | (deviceWindow ? FI_HMEM : 0);
    hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT | (deviceWindow ? FI_MR_HMEM : 0);
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(provider_.c_str());
    const char* node = s_.loopbackOnly ? "127.0.0.1" : nullptr;
    // FI_SOURCE (who sent a write) is needed only with 4-byte CQ data: ask for it, then without.
    hints->caps |= FI_SOURCE;
    int rc = gFi->getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, nullptr, node ? FI_SOURCE : 0, hints, &info_);
    if (rc != 0) {
      hints->caps &= ~FI_SOURCE;
      rc = gFi->getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, nullptr, node ? FI_SOURCE : 0, hints, &info_);
    }
    gFi->freeinfo(hints);
    if (rc != 0 || info_ == nullptr)
      return setError(mkcclSystemError,
                      "libfabric: provider '%s' offers no RDM endpoint with RMA writes%s (fi_getinfo: %s); set "
                      "MKCCL_NET_PROVIDER or MKCCL_NET",
                      provider_.c_str(), deviceWindow ? " on GPU memory" : "", fiErr(rc).c_str());
    cqDataBytes_ = (int)info_->domain_attr->cq_data_size;
    if (cqDataBytes_ < 4)
      return setError(mkcclSystemError, "libfabric: provider %s has %d bytes of remote CQ data; 4 needed",
                      info_->fabric_attr->prov_name, cqDataBytes_);
    cqDataBytes_ = cqDataBytes_ >= 8 ? 8 : 4;
    orderWaw_ = (info_->tx_attr->msg_order & FI_ORDER_WAW) != 0;
    orderSaw_ = (info_->tx_attr->msg_order & FI_ORDER_SAW) != 0;
    maxMsg_ = info_->ep_attr->max_msg_size ? info_->ep_attr->max_msg_size : (1ull << 30);
    if (maxMsg_ > (1ull << 30)) maxMsg_ = 1ull << 30;
    if (cqDataBytes_ == 4 && !(info_->caps & FI_SOURCE)) {
      // 4 bytes of CQ data leave no room for the sender: it must come from FI_SOURCE.
      gFi->freeinfo(info_);
      info_ = nullptr;
      return setError(mkcclSystemError, "libfabric: provider %s has 4-byte CQ data and no FI_SOURCE",
                      provider_.c_str());
    }
    if ((rc = gFi->fabric(info_->fabric_attr, &fabric_, nullptr)) != 0)
      return setError(mkcclSystemError, "libfabric: fi_fabric failed: %s", fiErr(rc).c_str());
    if ((rc = fi_domain(fabric_, info_, &domain_, nullptr)) != 0)
      return setError(mkcclSystemError, "libfabric: fi_domain failed: %s", fiErr(rc).c_str());
    fi_cq_attr cqa{};
    cqa.format = FI_CQ_FORMAT_DATA;
    cqa.size = 4096;
    if ((rc = fi_cq_open(domain_, &cqa, &cq_, nullptr)) != 0)
      return setError(mkcclSystemError, "libfabric: fi_cq_open failed: %s", fiErr(rc).c_str());
    fi_av_attr ava{};
    ava.type = FI_AV_TABLE;
    ava.count = (size_t)s_.nranks;
    if ((rc = fi_av_open(domain_, &ava, &av_, nullptr)) != 0)
      return setError(mkcclSystemError, "libfabric: fi_av_open failed: %s", fiErr(rc).c_str());
    if ((rc = fi_endpoint(domain_, info_, &ep_, nullptr)) != 0)
      return setError(mkcclSystemError, "libfabric: fi_endpoint failed: %s", fiErr(rc).c_str());
    if ((rc = fi_ep_bind(ep_, &av_->fid, 0)) != 0 || (rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)) != 0)
      return setError(mkcclSystemError, "libfabric: fi_ep_bind failed: %s", fiErr(rc).c_str());
    if ((rc = fi_enable(ep_)) != 0)
      return setError(mkcclSystemError, "libfabric: fi_enable failed: %s", fiErr(rc).c_str());
    return mkcclSuccess;
  }

  mkcclResult_t regMem(void* base, uint64_t bytes, bool device, uint64_t key, fid_mr** mr) {
    iovec iov{base, (size_t)bytes};
    fi_mr_attr a{};
    a.mr_iov = &iov;
    a.iov_count = 1;
    a.access = FI_WRITE | FI_REMOTE_WRITE | FI_READ | FI_REMOTE_READ | FI_SEND | FI_RECV;
    a.requested_key = key;
    a.iface = device ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
    if (device) a.device.cuda = s_.window.cudaDev;
    int rc = fi_mr_regattr(domain_, &a, 0, mr);
    if (rc != 0)
      return setError(mkcclSystemError, "libfabric: registering %llu bytes of %s memory failed: %s",
                      (unsigned long long)bytes, device ? "GPU" : "host", fiErr(rc).c_str());
    if (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      if ((rc = fi_mr_bind(*mr, &ep_->fid, 0)) != 0 || (rc = fi_mr_enable(*mr)) != 0)
        return setError(mkcclSystemError, "libfabric: binding a memory region failed: %s", fiErr(rc).c_str());
    }
    return mkcclSuccess;
  }

  mkcclResult_t postRecv(Req* r) {
    ssize_t rc;
    do {
      rc = fi_recv(ep_, r->buf, sizeof(Notice), poolDesc_, FI_ADDR_UNSPEC, &r->ctx);
      if (rc == -FI_EAGAIN) fi_cq_read(cq_, nullptr, 0);
    } while (rc == -FI_EAGAIN);
    if (rc != 0) return setError(mkcclSystemError, "libfabric: fi_recv failed: %s", fiErr((int)rc).c_str());
    return mkcclSuccess;
  }

  uint64_t cqData(const PutOp& o) const {
    if (cqDataBytes_ >= 8)
      return ((uint64_t)(s_.rank & 0xffff) << 44) | ((uint64_t)(o.flag & 0xfff) << 32) | (o.value & 0xffffffffull);
    return ((uint64_t)(o.flag & 0xfff) << 20) | (o.value & 0xfffff);
  }

  // Posts what can be posted, in order; stops at the first full queue.
  mkcclResult_t advance() {
    while (!queue_.empty()) {
      OpState* st = queue_.front();
      const Peer& p = peers_[st->op.peer];
      bool blocked = false;
      MKCCL_CHECK(step(st, p, &blocked));
      if (blocked) break;
      queue_.pop_front();
    }
    return mkcclSuccess;
  }

  // Posts the next pieces of one put. *blocked: the provider's queue is full, try later.
  mkcclResult_t step(OpState* st, const Peer& p, bool* blocked) {
    const PutOp& o = st->op;
    char* src = (char*)s_.window.base + o.srcOff;
    // Data pieces; with CQ data the last piece carries it (if ordering allows posting it now).
    while (st->posted < o.bytes) {
      const uint64_t n = std::min<uint64_t>(maxMsg_, o.bytes - st->posted);
      const bool last = st->posted + n == o.bytes;
      const bool carry = last && !p.ranges && (st->posted == 0 || orderWaw_);
      if (last && !p.ranges && !carry && st->outstanding > 0) return mkcclSuccess;  // wait for the earlier pieces
      Req* r = newReq(Req::kData, st);
      const uint64_t raddr = p.windowAddr + o.dstOff + st->posted;
      ssize_t rc = carry ? fi_writedata(ep_, src + st->posted, n, windowDesc_, cqData(o), p.addr, raddr, p.windowKey,
                                        &r->ctx)
                         : fi_write(ep_, src + st->posted, n, windowDesc_, p.addr, raddr, p.windowKey, &r->ctx);
      if (rc == -FI_EAGAIN) {
        freeReq(r);
        *blocked = true;
        return mkcclSuccess;
      }
      if (rc != 0) {
        freeReq(r);
        return failOp(st, "fi_write", (int)rc);
      }
      st->posted += n;
      ++st->outstanding;
      if (carry) st->notifyPosted = true;
    }
    if (!st->notifyPosted) {
      const bool ordered = p.ranges ? orderSaw_ : orderWaw_;
      if (st->outstanding > 0 && !ordered) return mkcclSuccess;  // posted from handle() once the data is delivered
      ssize_t rc;
      Req* r;
      if (p.ranges) {
        if (freeNotice_.empty()) {
          *blocked = true;
          return mkcclSuccess;
        }
        r = newReq(Req::kNotify, st);
        r->buf = freeNotice_.back();
        freeNotice_.pop_back();
        *r->buf = Notice{kNoticeMagic, (uint16_t)s_.rank, (uint16_t)o.flag, o.value, o.dstOff, o.bytes};
        rc = fi_send(ep_, r->buf, sizeof(Notice), poolDesc_, p.addr, &r->ctx);
      } else {
        r = newReq(Req::kNotify, st);
        rc = fi_writedata(ep_, src, 0, windowDesc_, cqData(o), p.addr, p.windowAddr + o.dstOff, p.windowKey, &r->ctx);
      }
      if (rc == -FI_EAGAIN) {
        freeReq(r);
        *blocked = true;
        return mkcclSuccess;
      }
      if (rc != 0) {
        freeReq(r);
        return failOp(st, p.ranges ? "fi_send" : "fi_writedata", (int)rc);
      }
      st->notifyPosted = true;
      ++st->outstanding;
    }
    return mkcclSuccess;
  }

  mkcclResult_t failOp(OpState* st, const char* what, int rc) {
    Event ev;
    ev.type = Event::kError;
    ev.peer = st->op.peer;
    ev.error = mkcclRemoteError;
    ev.message = std::string("libfabric: ") + what + " to rank " + std::to_string(st->op.peer) + " failed: " + fiErr(rc);
    events_->push_back(ev);
    st->failed = true;
    st->posted = st->op.bytes;
    st->notifyPosted = true;
    if (st->outstanding == 0) finish(st, false);
    return mkcclSuccess;
  }

  void finish(OpState* st, bool ok) {
    if (ok && !st->failed) {
      Event ev;
      ev.type = Event::kSendDone;
      ev.cookie = st->op.cookie;
      ev.peer = st->op.peer;
      events_->push_back(ev);
    }
    --active_;
    delete st;
  }

  mkcclResult_t handle(const fi_cq_data_entry& e, fi_addr_t src) {
    Req* r = static_cast<Req*>(e.op_context);
    const bool isRecvReq = r != nullptr && r->kind == Req::kRecv;
    if (e.flags & FI_REMOTE_CQ_DATA) {
      Event ev;
      ev.type = Event::kArrival;
      if (cqDataBytes_ >= 8) {
        ev.peer = (int)((e.data >> 44) & 0xffff);
        ev.flag = (uint32_t)(e.data >> 32) & 0xfff;
        ev.value = e.data & 0xffffffffull;
        ev.valueBits = 32;
      } else {
        auto it = addrRank_.find(src);
        if (it == addrRank_.end())
          return setError(mkcclRemoteError, "libfabric: a write with CQ data came from an unknown endpoint");
        ev.peer = it->second;
        ev.flag = (uint32_t)(e.data >> 20) & 0xfff;
        ev.value = e.data & 0xfffff;
        ev.valueBits = 20;
      }
      if (ev.peer < 0 || ev.peer >= s_.nranks || ev.peer == s_.rank)
        return setError(mkcclRemoteError, "libfabric: CQ data names sender rank %d", ev.peer);
      events_->push_back(ev);
      if (isRecvReq) return postRecv(r);  // FI_RX_CQ_DATA providers consume a receive buffer
      return mkcclSuccess;
    }
    if (r == nullptr) return mkcclSuccess;
    if (isRecvReq) {
      const Notice nt = *r->buf;
      MKCCL_CHECK(postRecv(r));
      if (nt.magic != kNoticeMagic || nt.src >= s_.nranks || nt.dstOff > s_.window.bytes ||
          nt.bytes > s_.window.bytes - nt.dstOff)
        return setError(mkcclRemoteError, "libfabric: malformed arrival notice (magic 0x%x, from %u, [%llu, +%llu))",
                        nt.magic, nt.src, (unsigned long long)nt.dstOff, (unsigned long long)nt.bytes);
      Event ev;
      ev.type = Event::kArrival;
      ev.peer = nt.src;
      ev.flag = nt.flag;
      ev.value = nt.value;
      ev.valueBits = 64;
      ev.hasRange = true;
      ev.dstOff = nt.dstOff;
      ev.bytes = nt.bytes;
      events_->push_back(ev);
      return mkcclSuccess;
    }
    OpState* st = r->op;
    if (r->kind == Req::kNotify) {
      if (r->buf) freeNotice_.push_back(r->buf);
      st->notifyDone = true;
    }
    freeReq(r);
    --st->outstanding;
    if (st->outstanding == 0) {
      if (st->posted == st->op.bytes && st->notifyPosted)
        finish(st, true);
      else if (std::find(queue_.begin(), queue_.end(), st) == queue_.end())
        queue_.push_front(st);  // what was posted is delivered: the rest (its notification) may go now
    }
    return mkcclSuccess;
  }

  mkcclResult_t readError() {
    fi_cq_err_entry err{};
    ssize_t n = fi_cq_readerr(cq_, &err, 0);
    if (n < 0) return mkcclSuccess;
    Req* r = static_cast<Req*>(err.op_context);
    const char* detail = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
    if (r != nullptr && r->kind == Req::kRecv) {
      if (closing_ || err.err == FI_ECANCELED) return mkcclSuccess;
      return setError(mkcclRemoteError, "libfabric: receive failed: %s (%s)", fiErr(err.err).c_str(), detail);
    }
    Event ev;
    ev.type = Event::kError;
    ev.error = mkcclRemoteError;
    ev.peer = r && r->op ? r->op->op.peer : -1;
    ev.message = "libfabric: a put to rank " + std::to_string(ev.peer) + " failed: " + fiErr(err.err) + " (" +
                 (detail ? detail : "") + ")";
    events_->push_back(ev);
    if (r && r->op) {
      OpState* st = r->op;
      st->failed = true;
      if (r->kind == Req::kNotify && r->buf) freeNotice_.push_back(r->buf);
      freeReq(r);
      st->posted = st->op.bytes;
      st->notifyPosted = true;
      if (--st->outstanding == 0) finish(st, false);
    }
    return mkcclSuccess;
  }

  Req* newReq(Req::Kind k, OpState* st) {
    Req* r;
    if (!freeReqs_.empty()) {
      r = freeReqs_.back();
      freeReqs_.pop_back();
    } else {
      reqs_.emplace_back(new Req());
      r = reqs_.back().get();
    }
    *r = Req{};
    r->kind = k;
    r->op = st;
    return r;
  }
  void freeReq(Req* r) { freeReqs_.push_back(r); }

  void close() {
    closing_ = true;
    if (ep_) fi_close(&ep_->fid);
    if (windowMr_) fi_close(&windowMr_->fid);
    if (poolMr_) fi_close(&poolMr_->fid);
    if (av_) fi_close(&av_->fid);
    if (cq_) fi_close(&cq_->fid);
    if (domain_) fi_close(&domain_->fid);
    if (fabric_) fi_close(&fabric_->fid);
    if (info_) gFi->freeinfo(info_);
    ep_ = nullptr;
    windowMr_ = poolMr_ = nullptr;
    av_ = nullptr;
    cq_ = nullptr;
    domain_ = nullptr;
    fabric_ = nullptr;
    info_ = nullptr;
    for (OpState* st : queue_) (void)st;  // owned through active ops below
    queue_.clear();
  }

  std::string provider_;
  Setup s_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* windowMr_ = nullptr;
  fid_mr* poolMr_ = nullptr;
  void* windowDesc_ = nullptr;
  void* poolDesc_ = nullptr;
  int cqDataBytes_ = 0;
  bool orderWaw_ = false, orderSaw_ = false;
  uint64_t maxMsg_ = 1ull << 30;
  bool closing_ = false;
  std::vector<Peer> peers_;
  std::unordered_map<fi_addr_t, int> addrRank_;
  std::vector<Notice> pool_;
  std::vector<Notice*> freeNotice_;
  std::vector<Req> recvReqs_;
  std::vector<std::unique_ptr<Req>> reqs_;
  std::vector<Req*> freeReqs_;
  std::deque<OpState*> queue_;  // accepted, not fully posted
  int active_ = 0;
  std::vector<Event> deferred_;  // events raised while posting, handed out by the next poll
  std::vector<Event>* events_ = &deferred_;
};

}  // namespace

std::string fabricUnavailableReason(const std::string& provider) {
  std::string why;
  if (!fabricApi(&why)) return why;
  SignalHandlersKept keep("libfabric");
  fi_info* hints = gFi->dupinfo(nullptr);
  if (!hints) return "fi_allocinfo failed";
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->fabric_attr->prov_name = strdup(provider.c_str());
  fi_info* info = nullptr;
  int rc = gFi->getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints, &info);
  gFi->freeinfo(hints);
  if (info) gFi->freeinfo(info);
  if (rc != 0 || info == nullptr) return "libfabric provider '" + provider + "' not usable: " + fiErr(rc);
  return "";
}

mkcclResult_t fabricCreate(const std::string& provider, std::unique_ptr<Transport>* out) {
  out->reset(new FabricTransport(provider));
  return mkcclSuccess;
}

}  // namespace net
}  // namespace mkccl

#else  // !MKCCL_HAVE_LIBFABRIC

#include "base/log.h"
namespace mkccl {
namespace net {
std::string fabricUnavailableReason(const std::string&) { return "libmkccl was built without libfabric"; }
mkcclResult_t fabricCreate(const std::string&, std::unique_ptr<Transport>*) {
  return setError(mkcclInvalidUsage,
                  "the efa transport is not available: libmkccl was built without libfabric (install its headers, "
                  "e.g. libfabric-dev, and rebuild; or set MKCCL_NET=ib)");
}
}  // namespace net
}  // namespace mkccl

#endif
