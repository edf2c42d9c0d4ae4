// The Verbs interface on libibverbs (RC QPs, RDMA WRITE). Not run on a NIC yet: no machine of
// ours has one (docs/INTERNODE.md).
#include "transport/ib/ib_transport.h"
#include "transport/ib/verbs.h"

#if MKCCL_HAVE_IBVERBS
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <string.h>
#include <unistd.h>
#include <mutex>
#include <vector>
#include "base/check.h"
#include "base/log.h"
#include "transport/net_lib.h"

// verbs.h turns these into inline wrappers around versioned symbols; the functions below call
// what the wrappers call, through the table.
#undef ibv_query_port
#undef ibv_reg_mr

namespace mkccl {
namespace ib {
namespace {

// The functions of libibverbs used here (the data path, ibv_post_send and ibv_poll_cq, are inline
// calls through the context's ops), found in libibverbs.so.1 when a communicator first needs it.
struct VerbsApi {
  ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(ibv_device**);
  const char* (*get_device_name)(ibv_device*);
  ibv_context* (*open_device)(ibv_device*);
  int (*close_device)(ibv_context*);
  int (*query_port)(ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
  int (*query_gid)(ibv_context*, uint8_t, int, union ibv_gid*);
  int (*query_gid_ex)(ibv_context*, uint32_t, uint32_t, struct ibv_gid_entry*, uint32_t, size_t);
  ibv_pd* (*alloc_pd)(ibv_context*);
  int (*dealloc_pd)(ibv_pd*);
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int);
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int);
  int (*dereg_mr)(ibv_mr*);
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroy_cq)(ibv_cq*);
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*);
  int (*destroy_qp)(ibv_qp*);
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int);
  const char* (*wc_status_str)(enum ibv_wc_status);
};
const VerbsApi* gV = nullptr;  // set once loaded

const VerbsApi* verbsApi(std::string* why) {
  static std::once_flag once;
  static VerbsApi api;
  static std::string err;
  std::call_once(once, [] {
    static const char* const names[] = {"libibverbs.so.1", "libibverbs.so"};
    void* h = net::netLibOpen(names, 2, &err);
    if (!h) return;
#define MKCCL_VERBS_SYM(field, sym) (api.field = (decltype(api.field))net::netLibSym(h, sym, &err))
    bool ok = MKCCL_VERBS_SYM(get_device_list, "ibv_get_device_list") &&
              MKCCL_VERBS_SYM(free_device_list, "ibv_free_device_list") &&
              MKCCL_VERBS_SYM(get_device_name, "ibv_get_device_name") &&
              MKCCL_VERBS_SYM(open_device, "ibv_open_device") && MKCCL_VERBS_SYM(close_device, "ibv_close_device") &&
              MKCCL_VERBS_SYM(query_port, "ibv_query_port") && MKCCL_VERBS_SYM(query_gid, "ibv_query_gid") &&
              MKCCL_VERBS_SYM(query_gid_ex, "_ibv_query_gid_ex") && MKCCL_VERBS_SYM(alloc_pd, "ibv_alloc_pd") &&
              MKCCL_VERBS_SYM(dealloc_pd, "ibv_dealloc_pd") && MKCCL_VERBS_SYM(reg_mr, "ibv_reg_mr") &&
              MKCCL_VERBS_SYM(dereg_mr, "ibv_dereg_mr") && MKCCL_VERBS_SYM(create_cq, "ibv_create_cq") &&
              MKCCL_VERBS_SYM(destroy_cq, "ibv_destroy_cq") && MKCCL_VERBS_SYM(create_qp, "ibv_create_qp") &&
              MKCCL_VERBS_SYM(destroy_qp, "ibv_destroy_qp") && MKCCL_VERBS_SYM(modify_qp, "ibv_modify_qp") &&
              MKCCL_VERBS_SYM(wc_status_str, "ibv_wc_status_str");
#undef MKCCL_VERBS_SYM
    // dma-buf registration is newer than the rest: optional.
    api.reg_dmabuf_mr = (decltype(api.reg_dmabuf_mr))dlsym(h, "ibv_reg_dmabuf_mr");
    if (ok) gV = &api;
  });
  if (!gV && why) *why = err;
  return gV;
}

// What verbs.h's inline ibv_query_port does, through the table.
int queryPort(ibv_context* c, uint8_t port, ibv_port_attr* attr) {
  struct verbs_context* vctx = verbs_get_ctx_op(c, query_port);
  if (vctx) return vctx->query_port(c, port, attr, sizeof(*attr));
  memset(attr, 0, sizeof(*attr));
  return gV->query_port(c, port, (struct _compat_ibv_port_attr*)attr);
}

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

class RealVerbs final : public Verbs {
 public:
  explicit RealVerbs(DmabufExport exporter) : exporter_(exporter) {}
  ~RealVerbs() override {
    if (cq_) gV->destroy_cq(cq_);
    if (pd_) gV->dealloc_pd(pd_);
    if (ctx_) gV->close_device(ctx_);
  }

  mkcclResult_t open(const std::string& device, int port, PortInfo* out) override {
    std::string why;
    if (!verbsApi(&why)) return setError(mkcclInvalidUsage, "the ib transport is not available: %s", why.c_str());
    net::SignalHandlersKept keep("libibverbs");
    int n = 0;
    ibv_device** list = gV->get_device_list(&n);
    if (!list || n == 0) {
      if (list) gV->free_device_list(list);
      return setError(mkcclSystemError, "ib: no RDMA device found (ibv_get_device_list)");
    }
    for (int i = 0; i < n && !ctx_; ++i) {
      const char* name = gV->get_device_name(list[i]);
      if (!device.empty() && device != name) continue;
      ibv_context* c = gV->open_device(list[i]);
      if (!c) continue;
      ibv_port_attr pa{};
      if (queryPort(c, (uint8_t)port, &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
        ctx_ = c;
        name_ = name;
        portAttr_ = pa;
      } else {
        gV->close_device(c);
      }
    }
    gV->free_device_list(list);
    if (!ctx_)
      return setError(mkcclSystemError, "ib: %s%s has no active port %d", device.empty() ? "no RDMA device" : "device ",
                      device.c_str(), port);
    port_ = port;
    out->lid = portAttr_.lid;
    out->mtu = (int)portAttr_.active_mtu;
    out->ethernet = portAttr_.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (out->ethernet) {
      // RoCE: prefer a RoCE v2 GID (routable); else the first non-zero one.
      int pick = -1;
      for (int g = 0; g < portAttr_.gid_tbl_len && g < 256; ++g) {
        ibv_gid_entry e{};
        if (gV->query_gid_ex(ctx_, (uint32_t)port, (uint32_t)g, &e, 0, sizeof(e)) != 0) continue;
        bool zero = true;
        for (int b = 0; b < 16; ++b) zero &= e.gid.raw[b] == 0;
        if (zero) continue;
        if (e.gid_type == IBV_GID_TYPE_ROCE_V2) {
          pick = g;
          break;
        }
        if (pick < 0) pick = g;
      }
      if (pick < 0) return setError(mkcclSystemError, "ib: %s port %d (RoCE) has no GID", name_.c_str(), port);
      gidIndex_ = pick;
    }
    ibv_gid gid{};
    gV->query_gid(ctx_, (uint8_t)port, gidIndex_, &gid);
    memcpy(out->gid, gid.raw, 16);
    out->gidIndex = gidIndex_;
    pd_ = gV->alloc_pd(ctx_);
    if (!pd_) return setError(mkcclSystemError, "ib: ibv_alloc_pd on %s failed: %s", name_.c_str(), strerror(errno));
    return mkcclSuccess;
  }

  std::string deviceName() const override { return name_; }

  mkcclResult_t regMr(void* addr, uint64_t bytes, bool device, Mr* out, const char** how) override {
    ibv_mr* mr = nullptr;
    if (device && exporter_) {
      int fd = -1;
      if (gV->reg_dmabuf_mr && exporter_(addr, bytes, &fd) == mkcclSuccess && fd >= 0) {
        mr = gV->reg_dmabuf_mr(pd_, 0, bytes, (uint64_t)(uintptr_t)addr, fd, kAccess);
        ::close(fd);  // the MR keeps its own reference
        if (mr) *how = "dma-buf";
      }
    }
    if (!mr) {
      mr = gV->reg_mr(pd_, addr, bytes, kAccess);  // GPU memory: needs nvidia-peermem
      if (mr) *how = device ? "nvidia-peermem" : "host registration";
    }
    if (!mr)
      return setError(mkcclSystemError, "ib: registering %llu bytes of %s memory on %s failed: %s%s",
                      (unsigned long long)bytes, device ? "GPU" : "host", name_.c_str(), strerror(errno),
                      device ? " (neither dma-buf nor nvidia-peermem worked: is the nvidia-peermem module loaded?)" : "");
    out->handle = mr;
    out->lkey = mr->lkey;
    out->rkey = mr->rkey;
    return mkcclSuccess;
  }

  void deregMr(Mr* mr) override {
    if (mr->handle) gV->dereg_mr((ibv_mr*)mr->handle);
    mr->handle = nullptr;
  }

  mkcclResult_t createCq(int depth) override {
    cq_ = gV->create_cq(ctx_, depth, nullptr, nullptr, 0);
    if (!cq_) return setError(mkcclSystemError, "ib: gV->create_cq(%d) failed: %s", depth, strerror(errno));
    return mkcclSuccess;
  }

  mkcclResult_t createQp(int sqDepth, int maxInline, void** qp, uint32_t* qpn) override {
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = 0;
    a.cap.max_send_wr = (uint32_t)sqDepth;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = (uint32_t)maxInline;
    ibv_qp* q = gV->create_qp(pd_, &a);
    if (!q) return setError(mkcclSystemError, "ib: ibv_create_qp on %s failed: %s", name_.c_str(), strerror(errno));
    *qp = q;
    *qpn = q->qp_num;
    return mkcclSuccess;
  }

  void destroyQp(void* qp) override { gV->destroy_qp((ibv_qp*)qp); }

  mkcclResult_t toInit(void* qp) override {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)port_;
    a.qp_access_flags = kAccess;
    return modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
  }

  mkcclResult_t toRtr(void* qp, const QpRemote& r) override {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (ibv_mtu)r.mtu;
    a.dest_qp_num = r.qpn;
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)port_;
    a.ah_attr.dlid = r.lid;
    if (r.useGid) {
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
      a.ah_attr.grh.sgid_index = (uint8_t)gidIndex_;
      a.ah_attr.grh.hop_limit = 255;
    }
    return modify(qp, a,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                  "RTR");
  }

  mkcclResult_t toRts(void* qp, uint32_t psn) override {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn;
    a.timeout = 18;  // 4.096 us * 2^18 ~ 1 s per retry
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return modify(qp, a,
                  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_MAX_QP_RD_ATOMIC,
                  "RTS");
  }

  int postSend(void* qp, const SendWr* wrs, int n) override {
    wr_.resize(n);
    sge_.resize(n);
    for (int i = 0; i < n; ++i) {
      const SendWr& w = wrs[i];
      sge_[i] = ibv_sge{w.localAddr, w.length, w.lkey};
      ibv_send_wr& x = wr_[i];
      x = ibv_send_wr{};
      x.wr_id = w.wrId;
      x.sg_list = &sge_[i];
      x.num_sge = 1;
      x.opcode = IBV_WR_RDMA_WRITE;
      x.send_flags = (w.inlineData ? IBV_SEND_INLINE : 0) | (w.signaled ? IBV_SEND_SIGNALED : 0);
      x.wr.rdma.remote_addr = w.remoteAddr;
      x.wr.rdma.rkey = w.rkey;
      x.next = i + 1 < n ? &wr_[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    return ibv_post_send((ibv_qp*)qp, wr_.data(), &bad);
  }

  int pollCq(Wc* wc, int n) override {
    ibv_wc w[32];
    if (n > 32) n = 32;
    const int got = ibv_poll_cq(cq_, n, w);
    for (int i = 0; i < got; ++i) {
      wc[i].wrId = w[i].wr_id;
      wc[i].status = (int)w[i].status;
      wc[i].qpn = w[i].qp_num;
      wc[i].vendorErr = w[i].vendor_err;
    }
    return got;
  }

  const char* statusString(int status) override { return gV->wc_status_str((ibv_wc_status)status); }

 private:
  mkcclResult_t modify(void* qp, ibv_qp_attr& a, int mask, const char* state) {
    const int rc = gV->modify_qp((ibv_qp*)qp, &a, mask);
    if (rc != 0)
      return setError(mkcclSystemError, "ib: moving a QP on %s to %s failed: %s", name_.c_str(), state, strerror(rc));
    return mkcclSuccess;
  }

  DmabufExport exporter_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_port_attr portAttr_{};
  std::string name_;
  int port_ = 1, gidIndex_ = 0;
  std::vector<ibv_send_wr> wr_;
  std::vector<ibv_sge> sge_;
};

}  // namespace

std::unique_ptr<Verbs> makeRealVerbs(DmabufExport exporter) { return std::unique_ptr<Verbs>(new RealVerbs(exporter)); }

std::string firstRdmaDevice() {
  if (!verbsApi(nullptr)) return "";
  net::SignalHandlersKept keep("libibverbs");
  int n = 0;
  ibv_device** list = gV->get_device_list(&n);
  std::string name = (list && n > 0) ? gV->get_device_name(list[0]) : "";
  if (list) gV->free_device_list(list);
  return name;
}

}  // namespace ib

namespace net {
std::string ibUnavailableReason() {
  std::string why;
  if (!ib::verbsApi(&why)) return why;
  return ib::firstRdmaDevice().empty() ? "no RDMA device (ibv_get_device_list found none)" : "";
}
mkcclResult_t ibCreate(std::unique_ptr<Transport>* out, mkcclResult_t (*dmabuf)(void*, uint64_t, int*)) {
  *out = ib::makeIbTransport(ib::makeRealVerbs(dmabuf));
  return mkcclSuccess;
}
}  // namespace net
}  // namespace mkccl

#else  // !MKCCL_HAVE_IBVERBS

#include "base/log.h"
namespace mkccl {
namespace ib {
std::unique_ptr<Verbs> makeRealVerbs(DmabufExport) { return nullptr; }
std::string firstRdmaDevice() { return ""; }
}  // namespace ib
namespace net {
std::string ibUnavailableReason() { return "libmkccl was built without libibverbs"; }
mkcclResult_t ibCreate(std::unique_ptr<Transport>*, mkcclResult_t (*)(void*, uint64_t, int*)) {
  return setError(mkcclInvalidUsage,
                  "the ib transport is not available: libmkccl was built without libibverbs (install rdma-core's "
                  "libibverbs-dev and rebuild; or set MKCCL_NET=efa)");
}
}  // namespace net
}  // namespace mkccl

#endif
