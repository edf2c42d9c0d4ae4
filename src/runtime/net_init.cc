// netInitComm / netFreeComm (src/runtime/hooks.h): with several nodes, choose the transport, make
// the FIFO, the window and the flags, connect to every rank of the other nodes through the
// bootstrap, start the proxy, publish the device view (comm->netDev), then prove the whole path
// with one barrier across the nodes (a broken path fails init with the stage that stopped, instead
// of hanging the first collective).
//
// Transports that cannot reach GPU memory (libfabric tcp) get a window of pinned host memory
// mapped into the GPU: kernels read and write it over PCIe, the transport reads and writes it
// directly, and the proxy makes no CUDA call at all. (Staging copies issued by the proxy, as
// before, can stall behind GPU work that waits for that very proxy: CUDA's lazy kernel loading
// makes a first launch wait for the whole context to go idle.)
//
// Settings (base/settings.h, docs/INTERNODE.md):
//   MKCCL_NET               ib | efa | none. Default: ib where an RDMA device exists, else efa.
//   MKCCL_NET_PROVIDER      libfabric provider for efa (default: efa, else tcp).
//   MKCCL_NET_BUFFER_BYTES  size of each rank's network window (default 64 MiB).
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/cudriver.h"
#include "runtime/hooks.h"
#include "runtime/net_coll_info.h"
#include "base/log.h"
#include "runtime/ops.h"
#include "runtime/proxy.h"
#include "runtime/proxy_stage.h"
#include "base/settings.h"
#include "topo/topo.h"
#include "transport/ib/ib_transport.h"
#include "transport/net.h"
#include "kernels/abi/net_dev.h"

namespace mkccl {

struct NetState {
  std::unique_ptr<net::Transport> transport;
  std::unique_ptr<Proxy> proxy;
  FifoReader reader;
  FifoCmd* slots = nullptr;  // host-mapped
  FifoCtl* ctl = nullptr;    // host-mapped
  uint64_t* counters = nullptr;  // device: head, tailCache
  char* window = nullptr;        // device memory, or pinned host memory mapped into the GPU (windowOnHost)
  bool windowOnHost = false;
  uint64_t* flags = nullptr;     // device (ib) or host-mapped (efa)
  bool flagsOnHost = false;
  int* rankNode = nullptr;       // device
  int* nodePeer = nullptr;       // device
  NetDevComm* dev = nullptr;     // device copy of the view
  NetCollInfo coll;              // host view for the collectives
  int cudaDev = -1;
};

namespace {

constexpr uint64_t kFifoSlots = 4096;
constexpr int kFlagsPerPeer = kFifoMaxFlags;
constexpr uint64_t kWindowAlign = 2ull << 20;
constexpr uint32_t kConnTag = 0x4e455400;  // "NET"

mkcclResult_t exportDmabuf(void* addr, uint64_t bytes, int* fd) {
  if (cuDriverLoad() != mkcclSuccess || cu().memGetHandleForAddressRange == nullptr) return mkcclInvalidUsage;
  CUresult r = cu().memGetHandleForAddressRange(fd, (CUdeviceptr)addr, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  return r == CUDA_SUCCESS ? mkcclSuccess : mkcclUnhandledCudaError;
}

// The transport MKCCL_NET asks for (or the default), created but not set up. *hostWindow: it cannot
// reach GPU memory, so the window must be host memory.
mkcclResult_t chooseTransport(mkcclComm* comm, std::unique_ptr<net::Transport>* out, bool* hostWindow) {
  const Settings& set = settings();
  if (set.net == NetChoice::None)
    return setError(mkcclInvalidUsage, "MKCCL_NET=none, but the communicator spans %d nodes: an inter-node transport "
                    "is needed (MKCCL_NET=ib or efa)", comm->nNodes);
  const std::string ibWhy = net::ibUnavailableReason();
  if (set.net == NetChoice::Ib || (set.net == NetChoice::Auto && ibWhy.empty())) {
    if (!ibWhy.empty()) return setError(mkcclInvalidUsage, "MKCCL_NET=ib: %s", ibWhy.c_str());
    ib::IbOptions o;
    if (comm->topo)
      for (const TopoNic& n : comm->topo->nics)
        if (n.type == "ib") {
          o.port = n.port;
          break;
        }
    std::unique_ptr<ib::Verbs> v = ib::makeRealVerbs(exportDmabuf);
    if (!v) return net::ibCreate(out);  // the "built without libibverbs" error
    *out = ib::makeIbTransport(std::move(v), o);
    *hostWindow = false;
    return mkcclSuccess;
  }
  const std::string& prov = set.netProvider;
  std::vector<std::string> tries = !prov.empty() ? std::vector<std::string>{prov} : std::vector<std::string>{"efa", "tcp"};
  std::string why;
  for (const std::string& p : tries) {
    const std::string r = net::fabricUnavailableReason(p);
    if (r.empty()) {
      MKCCL_CHECK(net::fabricCreate(p, out));
      // The efa provider reads and writes GPU memory (FI_HMEM); the others get a host window.
      *hostWindow = p != "efa";
      return mkcclSuccess;
    }
    why += (why.empty() ? "" : "; ") + r;
  }
  return setError(mkcclInvalidUsage,
                  "the communicator spans %d nodes but no inter-node transport is usable: %s%s%s", comm->nNodes,
                  ibWhy.empty() ? "" : ibWhy.c_str(), ibWhy.empty() ? "" : "; ", why.c_str());
}

// Sends our connection data to every rank of the other nodes, then connects with theirs.
mkcclResult_t exchange(mkcclComm* comm, net::Transport* t) {
  for (int r = 0; r < comm->nranks; ++r) {
    if (comm->rankNode[r] == comm->node) continue;
    std::vector<uint8_t> blob;
    MKCCL_CHECK(t->connData(r, &blob));
    const uint64_t len = blob.size();
    MKCCL_CHECK(comm->bootstrap->send(r, kConnTag, &len, sizeof(len)));
    MKCCL_CHECK(comm->bootstrap->send(r, kConnTag + 1, blob.data(), blob.size()));
  }
  for (int r = 0; r < comm->nranks; ++r) {
    if (comm->rankNode[r] == comm->node) continue;
    uint64_t len = 0;
    MKCCL_CHECK(comm->bootstrap->recv(r, kConnTag, &len, sizeof(len)));
    if (len == 0 || len > 4096)
      return setError(mkcclRemoteError, "rank %d announced %llu bytes of connection data", r, (unsigned long long)len);
    std::vector<uint8_t> blob(len);
    MKCCL_CHECK(comm->bootstrap->recv(r, kConnTag + 1, blob.data(), blob.size()));
    MKCCL_CHECK(t->connect(r, blob.data(), blob.size()));
  }
  return mkcclSuccess;
}

// Who is where, for the collectives: node sizes, and the rank of (node, local rank) when every
// node has the same number of ranks.
void nodeTables(const mkcclComm* comm, NetCollInfo* info, std::vector<int>* nodePeer) {
  info->nNodes = comm->nNodes;
  info->node = comm->node;
  info->localRanks = comm->localRanks;
  std::vector<std::vector<int>> members(comm->nNodes);
  for (int r = 0; r < comm->nranks; ++r) members[comm->rankNode[r]].push_back(r);  // ascending: local order
  info->uniform = true;
  for (int m = 0; m < comm->nNodes; ++m) {
    info->uniform &= (int)members[m].size() == comm->localRanks;
    info->nodeSizes += (m ? ", node " : "node ") + std::to_string(m) + ": " + std::to_string(members[m].size()) +
                       (members[m].size() == 1 ? " rank" : " ranks");
  }
  nodePeer->assign(comm->nNodes, -1);
  for (int m = 0; m < comm->nNodes; ++m)
    if (comm->localRank < (int)members[m].size()) (*nodePeer)[m] = members[m][comm->localRank];
  if (info->uniform)
    for (int m = 0; m < comm->nNodes; ++m)
      for (int r : members[m]) info->rankAt.push_back(r);
}

// One barrier across the nodes through the real path (kernel -> FIFO -> proxy -> wire -> proxy ->
// flag -> kernel), before the communicator is handed out. On failure the message names how far the
// path got (the proxy's counters).
mkcclResult_t firstBarrier(mkcclComm* comm, NetState* st) {
  // Peers' workspaces are mapped and zeroed once every rank is here (the node barrier uses them).
  MKCCL_CHECK(comm->bootstrap->barrier());
  OpCtx ctx;
  ctx.comm = comm;
  fillDevComm(comm, ++comm->seq, &ctx.dev);
  ctx.dev.net = st->dev;  // comm->netDev is set once init has succeeded
  CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  mkcclResult_t res = barrierOp(ctx);
  if (res == mkcclSuccess && cudaGetLastError() != cudaSuccess)
    res = setError(mkcclUnhandledCudaError, "rank %d: launching the first inter-node barrier failed", comm->rank);
  // Device waits give up after the timeout, so this ends; the margin covers a slow start.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(comm->cfg.timeoutMs + 5000);
  cudaError_t e = cudaSuccess;
  while (res == mkcclSuccess && (e = cudaStreamQuery(ctx.stream)) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < limit)
    usleep(200);
  const volatile DevError* de = comm->errHost;
  if (res == mkcclSuccess && (e != cudaSuccess || de->code != 0 || comm->asyncError.load() != mkcclSuccess)) {
    if (comm->errHost) ((volatile DevError*)comm->errHost)->abort = 1;  // a kernel still waiting gives up
    std::string why;
    if (e == cudaErrorNotReady) why = "the barrier kernel did not finish";
    else if (e != cudaSuccess) why = std::string("the barrier kernel failed: ") + cudaGetErrorString(e);
    else if (de->code != 0)
      why = "a wait of the barrier kernel gave up (device error " + std::to_string(de->code) + ", flag " +
            std::to_string(de->seen) + ", wanted " + std::to_string(de->want) + ")";
    else why = "the proxy failed";
    const int code = de->code != 0 ? de->code : comm->asyncError.load();
    std::string proxyErr;
    {
      std::lock_guard<std::mutex> lock(comm->errMutex);
      proxyErr = comm->lastError;
    }
    res = setError(code != 0 ? (mkcclResult_t)code : mkcclUnhandledCudaError,
                   "rank %d: the first barrier across the %d nodes failed: %s%s%s; the network path so far: %s "
                   "(MKCCL_DEBUG=TRACE logs every stage)",
                   comm->rank, comm->nNodes, why.c_str(), proxyErr.empty() ? "" : "; ", proxyErr.c_str(),
                   st->proxy ? st->proxy->describe().c_str() : "no proxy");
  }
  cudaStreamDestroy(ctx.stream);  // released once the kernel is done, if it is not yet
  if (res == mkcclSuccess) MKCCL_INFO("rank %d: first barrier across %d nodes passed", comm->rank, comm->nNodes);
  return res;
}

}  // namespace

NetCollInfo* netCollInfo(mkcclComm* comm) { return comm->net ? &comm->net->coll : nullptr; }

mkcclResult_t netNotUniform(const NetCollInfo& info, const char* op) {
  return setError(mkcclInvalidUsage,
                  "%s across nodes needs the same number of ranks on every node (%s); with MKCCL_RANKS_PER_NODE, "
                  "make the number of ranks a multiple of it",
                  op, info.nodeSizes.c_str());
}

mkcclResult_t netUniformCollInfo(mkcclComm* comm, const char* op, NetCollInfo** out) {
  NetCollInfo* info = netCollInfo(comm);
  if (info == nullptr)
    return setError(mkcclInternalError, "%s: the communicator spans %d nodes but has no network state", op,
                    comm->nNodes);
  if (!info->uniform) return netNotUniform(*info, op);
  *out = info;
  return mkcclSuccess;
}

std::string netDescribe(const mkcclComm* comm) {
  return comm->net && comm->net->proxy ? comm->net->proxy->describe() : std::string();
}

mkcclResult_t netInitComm(mkcclComm* comm) {
  if (comm->nNodes <= 1) return mkcclSuccess;
  if (comm->nranks > kFifoMaxRanks)
    return setError(mkcclInvalidUsage, "%d ranks across nodes: the network path supports at most %d", comm->nranks,
                    kFifoMaxRanks);
  long long windowBytes = settings().netBufferBytes;
  windowBytes = (long long)(((uint64_t)windowBytes + kWindowAlign - 1) / kWindowAlign * kWindowAlign);

  auto* st = new NetState();
  comm->net = st;  // netFreeComm cleans up whatever exists if a step below fails
  st->cudaDev = comm->cudaDev;
  bool hostWindow = false;
  MKCCL_CHECK(chooseTransport(comm, &st->transport, &hostWindow));
  const bool ib = st->transport->caps().writesFlags;

  CUDA_CHECK(cudaSetDevice(comm->cudaDev));
  CUDA_CHECK(cudaHostAlloc((void**)&st->slots, kFifoSlots * sizeof(FifoCmd), cudaHostAllocMapped));
  memset(st->slots, 0, kFifoSlots * sizeof(FifoCmd));
  CUDA_CHECK(cudaHostAlloc((void**)&st->ctl, sizeof(FifoCtl), cudaHostAllocMapped));
  memset(st->ctl, 0, sizeof(FifoCtl));
  CUDA_CHECK(cudaMalloc((void**)&st->counters, 2 * sizeof(uint64_t)));
  CUDA_CHECK(cudaMemset(st->counters, 0, 2 * sizeof(uint64_t)));
  st->windowOnHost = hostWindow;
  if (hostWindow) {
    // Reached by the GPU over PCIe through its mapping (the same address with unified addressing).
    CUDA_CHECK(cudaHostAlloc((void**)&st->window, (size_t)windowBytes, cudaHostAllocMapped));
  } else {
    CUDA_CHECK(cudaMalloc((void**)&st->window, (size_t)windowBytes));
  }
  char* windowDev = st->window;
  if (hostWindow) CUDA_CHECK(cudaHostGetDevicePointer((void**)&windowDev, st->window, 0));
  // Whole 2 MiB pages: registrable by dma-buf.
  const size_t flagsBytes =
      ((size_t)comm->nranks * kFlagsPerPeer * sizeof(uint64_t) + kWindowAlign - 1) / kWindowAlign * kWindowAlign;
  st->flagsOnHost = !ib;  // the receiver's proxy writes them (efa); the NIC writes them into GPU memory (ib)
  if (st->flagsOnHost) {
    CUDA_CHECK(cudaHostAlloc((void**)&st->flags, flagsBytes, cudaHostAllocMapped));
    memset(st->flags, 0, flagsBytes);
  } else {
    CUDA_CHECK(cudaMalloc((void**)&st->flags, flagsBytes));
    CUDA_CHECK(cudaMemset(st->flags, 0, flagsBytes));
  }

  net::Setup s;
  s.rank = comm->rank;
  s.nranks = comm->nranks;
  s.timeoutMs = comm->cfg.timeoutMs;
  s.window = net::Memory{st->window, (uint64_t)windowBytes, !hostWindow, comm->cudaDev};
  s.flags = net::Memory{st->flags, flagsBytes, !st->flagsOnHost, comm->cudaDev};
  s.flagsPerPeer = kFlagsPerPeer;
  s.wantRanges = false;  // nothing to stage: the flag alone says the data is there
  s.loopbackOnly = true;
  for (const PeerInfo& p : comm->peers) s.loopbackOnly &= p.hostHash == comm->peers[comm->rank].hostHash;
  if (comm->topo)
    for (const TopoNic& n : comm->topo->nics)
      if (n.type == (ib ? "ib" : "efa")) {
        s.device = n.name;
        break;
      }
  if (!ib) s.device.clear();  // libfabric picks its domain itself
  MKCCL_CHECK(st->transport->setup(s));
  MKCCL_CHECK(exchange(comm, st->transport.get()));

  std::vector<int> rankNode(comm->rankNode.begin(), comm->rankNode.end());
  CUDA_CHECK(cudaMalloc((void**)&st->rankNode, rankNode.size() * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(st->rankNode, rankNode.data(), rankNode.size() * sizeof(int), cudaMemcpyHostToDevice));
  std::vector<int> nodePeer;
  nodeTables(comm, &st->coll, &nodePeer);
  st->coll.window = windowDev;
  st->coll.windowBytes = (uint64_t)windowBytes;
  st->coll.windowOnHost = hostWindow;
  CUDA_CHECK(cudaMalloc((void**)&st->nodePeer, nodePeer.size() * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(st->nodePeer, nodePeer.data(), nodePeer.size() * sizeof(int), cudaMemcpyHostToDevice));
  NetDevComm d{};
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&d.fifo.slots, st->slots, 0));
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&d.fifo.ctl, st->ctl, 0));
  d.fifo.head = st->counters;
  d.fifo.tailCache = st->counters + 1;
  d.fifo.size = kFifoSlots;
  d.window = windowDev;
  d.windowBytes = (uint64_t)windowBytes;
  if (st->flagsOnHost) CUDA_CHECK(cudaHostGetDevicePointer((void**)&d.flags, st->flags, 0));
  else d.flags = st->flags;
  d.flagsPerPeer = kFlagsPerPeer;
  d.nranks = comm->nranks;
  d.rankNode = st->rankNode;
  d.nNodes = comm->nNodes;
  d.nodePeer = st->nodePeer;
  CUDA_CHECK(cudaMalloc((void**)&st->dev, sizeof(NetDevComm)));
  CUDA_CHECK(cudaMemcpy(st->dev, &d, sizeof(d), cudaMemcpyHostToDevice));

  st->reader.init(st->slots, st->ctl, kFifoSlots);
  ProxyOptions po;
  po.rank = comm->rank;
  po.nranks = comm->nranks;
  po.flagsPerPeer = kFlagsPerPeer;
  po.timeoutMs = comm->cfg.timeoutMs;
  po.windowBytes = (uint64_t)windowBytes;
  po.flags = st->flagsOnHost ? st->flags : nullptr;
  po.deviceError = comm->errHost ? &comm->errHost->code : nullptr;
  if (!hostWindow && !ib) {
    const int dev = comm->cudaDev;
    po.flushRemoteWrites = [dev] { return flushGpuDirectWrites(dev); };
  }
  if (comm->topo) po.cpus = comm->topo->proxyCpus;
  st->proxy.reset(new Proxy(po, &st->reader, st->transport.get(), [comm](mkcclResult_t r, const std::string& msg) {
    commSetAsyncError(comm, r, msg);
    // Release the GPU: every device wait of this communicator gives up.
    if (comm->errHost) {
      ((volatile DevError*)comm->errHost)->abort = 1;
      __sync_synchronize();
    }
  }));
  MKCCL_CHECK(st->proxy->start());
  comm->netDev = st->dev;
  MKCCL_INFO("rank %d: network %s, window %lld MiB in %s memory, %d flags per peer, FIFO of %llu commands, %d nodes%s",
             comm->rank, st->transport->name(), windowBytes >> 20, hostWindow ? "host" : "GPU", kFlagsPerPeer,
             (unsigned long long)kFifoSlots, comm->nNodes,
             st->coll.uniform ? "" : " (of different sizes: no inter-node collectives)");
  MKCCL_CHECK(netCollPreload());
  return firstBarrier(comm, st);
}

void netFreeComm(mkcclComm* comm) {
  NetState* st = comm->net;
  if (!st) return;
  comm->netDev = nullptr;
  if (st->proxy && !st->proxy->stop(comm->cfg.timeoutMs)) {
    // The thread is stuck in the transport: what it may touch must stay alive.
    st->proxy.release();
    comm->net = nullptr;
    return;
  }
  st->proxy.reset();
  st->transport.reset();
  cudaSetDevice(st->cudaDev);
  if (st->dev) cudaFree(st->dev);
  if (st->rankNode) cudaFree(st->rankNode);
  if (st->nodePeer) cudaFree(st->nodePeer);
  if (st->flags) st->flagsOnHost ? cudaFreeHost(st->flags) : cudaFree(st->flags);
  if (st->window) st->windowOnHost ? cudaFreeHost(st->window) : cudaFree(st->window);
  if (st->counters) cudaFree(st->counters);
  if (st->ctl) cudaFreeHost(st->ctl);
  if (st->slots) cudaFreeHost(st->slots);
  delete st;
  comm->net = nullptr;
}

}  // namespace mkccl
