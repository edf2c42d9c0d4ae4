// The thin verbs interface the ib transport is written against: the few libibverbs calls an RC
// write path needs, in our own types. verbs_real.cc binds it to libibverbs; the unit tests bind it
// to an in-process fake NIC (tests/net/fake_verbs.h) that checks the QP state machine, queue
// depths and keys, and injects completion errors.
#pragma once
#include <stdint.h>
#include <memory>
#include <string>
#include "mkccl.h"

namespace mkccl {
namespace ib {

struct PortInfo {
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  int gidIndex = 0;
  bool ethernet = false;  // RoCE: addressed by GID
  int mtu = 0;            // ibv_mtu enum value (1: 256 ... 5: 4096)
};

struct Mr {
  void* handle = nullptr;
  uint32_t lkey = 0, rkey = 0;
};

struct QpRemote {
  uint32_t qpn = 0, psn = 0;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  bool useGid = false;
  int mtu = 0;
};

// RDMA WRITE work request, one scatter entry (or inline data).
struct SendWr {
  uint64_t wrId = 0;
  uint64_t localAddr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  bool inlineData = false;
  bool signaled = false;
};

struct Wc {
  uint64_t wrId = 0;
  int status = 0;  // 0: success (IBV_WC_SUCCESS); else an ibv_wc_status
  uint32_t qpn = 0;
  uint32_t vendorErr = 0;
};

// Dma-buf export of device memory (cuMemGetHandleForAddressRange); null or failing: no dma-buf.
using DmabufExport = mkcclResult_t (*)(void* addr, uint64_t bytes, int* fd);

class Verbs {
 public:
  virtual ~Verbs() = default;
  // Opens `device` ("" = the first with an active port) on `port`, allocates the PD.
  virtual mkcclResult_t open(const std::string& device, int port, PortInfo* out) = 0;
  virtual std::string deviceName() const = 0;
  // Registers memory for local write and remote write. Device memory: dma-buf first, then a plain
  // registration of the GPU pointer (nvidia-peermem). *how says which ("dmabuf", "peermem", "host").
  virtual mkcclResult_t regMr(void* addr, uint64_t bytes, bool device, Mr* out, const char** how) = 0;
  virtual void deregMr(Mr* mr) = 0;
  virtual mkcclResult_t createCq(int depth) = 0;
  // An RC QP on the CQ, in RESET.
  virtual mkcclResult_t createQp(int sqDepth, int maxInline, void** qp, uint32_t* qpn) = 0;
  virtual void destroyQp(void* qp) = 0;
  virtual mkcclResult_t toInit(void* qp) = 0;
  virtual mkcclResult_t toRtr(void* qp, const QpRemote& remote) = 0;
  virtual mkcclResult_t toRts(void* qp, uint32_t psn) = 0;
  // Posts a chain; 0 or an errno (ENOMEM: the send queue is full).
  virtual int postSend(void* qp, const SendWr* wrs, int n) = 0;
  // Up to n completions; < 0 on failure.
  virtual int pollCq(Wc* wc, int n) = 0;
  virtual const char* statusString(int status) = 0;
};

// libibverbs. Null when built without it.
std::unique_ptr<Verbs> makeRealVerbs(DmabufExport exporter);
// Names of the RDMA devices present ("" when none or no libibverbs).
std::string firstRdmaDevice();

}  // namespace ib
}  // namespace mkccl
