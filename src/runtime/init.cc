// Communicator lifecycle: init (blocking or not), InitAll, destroy, abort, queries.
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <map>

#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/cudriver.h"
#include "runtime/enqueue.h"
#include "runtime/hooks.h"
#include "runtime/ops.h"
#include "base/settings.h"
#include "runtime/symmem.h"

using namespace mkccl;

namespace mkccl {
namespace {

// Flags region of the symmetric workspace: 1 MiB = 131072 flags (per-chunk / per-tile flags).
constexpr size_t kFlagsBytes = 1 << 20;

uint64_t fnv1a(const char* s, uint64_t h = 0xcbf29ce484222325ull) {
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

// Same value for every process of one OS instance: host name and boot id.
uint64_t hostHash() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  uint64_t h = fnv1a(host);
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {0};
    if (fgets(boot, sizeof(boot), f)) h = fnv1a(boot, h);
    fclose(f);
  }
  return h;
}

// Node map from host identity, or from MKCCL_RANKS_PER_NODE (emulated nodes on one host).
mkcclResult_t buildNodeMap(mkcclComm* comm) {
  const int rpn = settings().ranksPerNode;
  const int n = comm->nranks;
  comm->rankNode.assign(n, -1);
  std::map<uint64_t, int> hostNode;
  for (int r = 0; r < n; ++r) {
    if (rpn > 0) {
      comm->rankNode[r] = r / rpn;
      const int first = (r / rpn) * rpn;
      if (comm->peers[r].hostHash != comm->peers[first].hostHash)
        return setError(mkcclInvalidUsage,
                        "MKCCL_RANKS_PER_NODE=%d: ranks %d and %d are in one emulated node but on different hosts", rpn,
                        first, r);
    } else {
      auto it = hostNode.find(comm->peers[r].hostHash);
      if (it == hostNode.end()) it = hostNode.emplace(comm->peers[r].hostHash, (int)hostNode.size()).first;
      comm->rankNode[r] = it->second;
    }
  }
  comm->nNodes = *std::max_element(comm->rankNode.begin(), comm->rankNode.end()) + 1;
  comm->node = comm->rankNode[comm->rank];
  comm->rankLocal.assign(n, 0);
  comm->nodeFirstRank.assign(comm->nNodes, -1);
  std::vector<int> count(comm->nNodes, 0);
  comm->localToRank.clear();
  for (int r = 0; r < n; ++r) {
    const int nd = comm->rankNode[r];
    if (comm->nodeFirstRank[nd] < 0) comm->nodeFirstRank[nd] = r;
    comm->rankLocal[r] = count[nd]++;
    if (nd == comm->node) comm->localToRank.push_back(r);
  }
  comm->localRank = comm->rankLocal[comm->rank];
  comm->localRanks = count[comm->node];
  if (comm->localRanks > kMaxLocalRanks)
    return setError(mkcclInvalidUsage, "%d ranks in one node: at most %d are supported", comm->localRanks,
                    kMaxLocalRanks);
  // MKCCL_SHARE_GPUS=1 (a testing aid: world sizes beyond the GPUs at hand, for correctness only)
  // lets ranks share a GPU. Their persistent kernels then wait for each other, so they must fit on
  // it together (MKCCL_MAX_CTAS somewhat below its SMs / ranks on it: clusters of 2 may not use
  // every SM; and one stream per rank), else their waits end in mkcclTimeout.
  const bool share = settings().shareGpus;
  for (int a = 0; a < comm->localRanks; ++a)
    for (int b = a + 1; b < comm->localRanks; ++b) {
      const PeerInfo& pa = comm->peers[comm->localToRank[a]];
      const PeerInfo& pb = comm->peers[comm->localToRank[b]];
      if (pa.hostHash != pb.hostHash || strcmp(pa.busId, pb.busId) != 0) continue;
      if (!share)
        return setError(mkcclInvalidUsage, "ranks %d and %d use the same GPU (%s): one GPU per rank", pa.rank, pb.rank,
                        pa.busId);
      if (pa.rank == comm->rank || pb.rank == comm->rank)
        MKCCL_WARN("ranks %d and %d share GPU %s (MKCCL_SHARE_GPUS=1, for tests: timings mean nothing; their kernels "
                   "must fit on it together, MKCCL_MAX_CTAS)",
                   pa.rank, pb.rank, pa.busId);
    }
  MKCCL_INFO("rank %d/%d: node %d of %d, local rank %d of %d, GPU %d (%s)%s", comm->rank, n, comm->node, comm->nNodes,
             comm->localRank, comm->localRanks, comm->cudaDev, comm->peers[comm->rank].busId,
             rpn > 0 ? " (emulated nodes: MKCCL_RANKS_PER_NODE)" : "");
  return mkcclSuccess;
}

mkcclResult_t initDevice(mkcclComm* comm) {
  CUDA_CHECK(cudaSetDevice(comm->cudaDev));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, comm->cudaDev));
  comm->smCount = prop.multiProcessorCount;
  comm->ccMajor = prop.major;
  comm->ccMinor = prop.minor;
  if (prop.major != 9)
    return setError(mkcclInvalidUsage, "device %d (%s) is sm_%d%d: libmkccl's kernels need a Hopper GPU (sm_90)",
                    comm->cudaDev, prop.name, prop.major, prop.minor);
  MKCCL_CHECK(cuDriverLoad());
  // Before any rank of this process can run a kernel that waits for peers (preload.cu says why).
  return preloadKernels(comm->cudaDev, comm->smCount);
}

mkcclResult_t initTask(mkcclComm* comm, const mkcclUniqueId& id) {
  setLogRank(comm->rank);
  MKCCL_CHECK(initDevice(comm));
  MKCCL_CHECK(Bootstrap::create(id, comm->rank, comm->nranks, comm->cfg.timeoutMs, &comm->bootstrap));

  PeerInfo me{};
  me.rank = comm->rank;
  me.cudaDev = comm->cudaDev;
  me.pid = (int)getpid();
  me.hostHash = hostHash();
  CUDA_CHECK(cudaDeviceGetPCIBusId(me.busId, sizeof(me.busId), comm->cudaDev));
  for (char* c = me.busId; *c; ++c) *c = (char)tolower(*c);
  comm->peers.assign(comm->nranks, PeerInfo{});
  comm->peers[comm->rank] = me;
  MKCCL_CHECK(comm->bootstrap->allGather(comm->peers.data(), sizeof(PeerInfo)));
  for (int r = 0; r < comm->nranks; ++r)
    if (comm->peers[r].rank != r)
      return setError(mkcclInternalError, "bootstrap: rank %d's info claims rank %d", r, comm->peers[r].rank);
  MKCCL_CHECK(buildNodeMap(comm));

  CUDA_CHECK(cudaHostAlloc((void**)&comm->errHost, sizeof(DevError), cudaHostAllocMapped));
  memset((void*)comm->errHost, 0, sizeof(DevError));
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&comm->errDev, comm->errHost, 0));
  MKCCL_CHECK(symWorkspaceCreate(comm, comm->cfg.workspaceBytes, kFlagsBytes));
  MKCCL_CHECK(topoInitComm(comm));
  MKCCL_CHECK(netInitComm(comm));
  CUDA_CHECK(cudaEventCreateWithFlags(&comm->lastWork, cudaEventDisableTiming));
  // Nobody touches a peer's workspace before every rank has mapped and zeroed its own.
  MKCCL_CHECK(comm->bootstrap->barrier());
  MKCCL_INFO("rank %d: communicator ready (%d ranks, %d nodes, %d SMs, workspace %zu MiB, timeout %d ms)", comm->rank,
             comm->nranks, comm->nNodes, comm->smCount, comm->ws.bytes >> 20, comm->cfg.timeoutMs);
  return mkcclSuccess;
}

// Frees what init made (any subset). Waits for outstanding work unless `abort`.
mkcclResult_t freeComm(mkcclComm* comm, bool abort) {
  mkcclResult_t res = mkcclSuccess;
  if (comm->initThread.joinable()) comm->initThread.join();  // init is bounded by the timeout
  DeviceGuard guard(comm->cudaDev >= 0 ? comm->cudaDev : 0);
  if (abort && comm->errHost) {
    ((volatile DevError*)comm->errHost)->abort = 1;
    __sync_synchronize();
  }
  if (abort && comm->bootstrap) comm->bootstrap->abort();
  if (comm->lastWork) {
    // Device waits give up after the timeout (or at once after an abort), so this ends; the slack
    // lets kernels that time out themselves report first.
    res = commWaitLastWork(comm, "destroy", 5000);
    if (res == mkcclTimeout && comm->errHost) ((volatile DevError*)comm->errHost)->abort = 1;
    if (res == mkcclUnhandledCudaError) cudaGetLastError();
    cudaEventDestroy(comm->lastWork);
    comm->lastWork = nullptr;
  }
  copyEnginesFree(comm);
  netFreeComm(comm);
  topoFreeComm(comm);
  regDestroyAll(comm);
  symWorkspaceDestroy(comm);
  if (comm->errHost) cudaFreeHost(comm->errHost);
  comm->errHost = nullptr;
  comm->errDev = nullptr;
  comm->bootstrap.reset();
  return res;
}

mkcclResult_t initRank(mkcclComm_t* out, int nranks, const mkcclUniqueId& id, int rank, const mkcclConfig_t* config,
                       const char* caller) {
  ARG_CHECK(out != nullptr, "%s: comm is NULL", caller);
  *out = nullptr;
  ARG_CHECK(nranks >= 1, "%s: nranks=%d: expected >= 1", caller, nranks);
  ARG_CHECK(rank >= 0 && rank < nranks, "%s: rank=%d is out of range [0, %d)", caller, rank, nranks);
  MKCCL_CHECK(bootstrapCheckId(id));
  MKCCL_CHECK(settingsRefresh());
  settingsLogOnce();
  ResolvedConfig cfg;
  MKCCL_CHECK(resolveConfig(config, &cfg));
  std::shared_ptr<OpState> ops;
  MKCCL_CHECK(opStateCreate(config, &ops));
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));

  auto* comm = new mkcclComm();
  comm->magic = kCommMagic;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->cudaDev = dev;
  comm->cfg = cfg;
  comm->ops = std::move(ops);
  commRegister(comm);
  if (cfg.blocking) {
    mkcclResult_t res = initTask(comm, id);
    if (res != mkcclSuccess) {
      std::string msg = lastError();
      freeComm(comm, /*abort=*/true);
      commUnregister(comm);
      comm->magic = 0;
      delete comm;
      setError(res, "%s", msg.c_str());  // keep the cause as the thread's last error
      return res;
    }
    comm->initResult.store(mkcclSuccess);
    *out = comm;
    return mkcclSuccess;
  }
  // Non-blocking: the user polls mkcclCommGetAsyncError; a failure stays recorded in the comm.
  comm->initThread = std::thread([comm, id] {
    mkcclResult_t res = initTask(comm, id);
    if (res != mkcclSuccess) {
      std::lock_guard<std::mutex> lock(comm->errMutex);
      comm->lastError = lastError();
    }
    comm->initResult.store(res);
  });
  *out = comm;
  return mkcclInProgress;
}

}  // namespace
}  // namespace mkccl

mkcclResult_t mkcclGetUniqueId(mkcclUniqueId* uniqueId) {
  ARG_CHECK(uniqueId != nullptr, "mkcclGetUniqueId: uniqueId is NULL");
  return bootstrapCreateRoot(uniqueId);
}

mkcclResult_t mkcclCommInitRank(mkcclComm_t* comm, int nranks, mkcclUniqueId commId, int rank) {
  return initRank(comm, nranks, commId, rank, nullptr, "mkcclCommInitRank");
}

mkcclResult_t mkcclCommInitRankConfig(mkcclComm_t* comm, int nranks, mkcclUniqueId commId, int rank,
                                      mkcclConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config, "mkcclCommInitRankConfig");
}

mkcclResult_t mkcclCommInitAll(mkcclComm_t* comms, int ndev, const int* devlist) {
  ARG_CHECK(comms != nullptr, "mkcclCommInitAll: comms is NULL");
  ARG_CHECK(ndev >= 1, "mkcclCommInitAll: ndev=%d: expected >= 1", ndev);
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  std::vector<int> devs(ndev);
  MKCCL_CHECK(settingsRefresh());
  const bool share = settings().shareGpus;  // a device listed twice: ranks sharing a GPU (tests)
  for (int i = 0; i < ndev; ++i) {
    devs[i] = devlist ? devlist[i] : i;
    ARG_CHECK(devs[i] >= 0 && devs[i] < count, "mkcclCommInitAll: device %d is out of range (%d devices)", devs[i],
              count);
    for (int j = 0; j < i && !share; ++j)
      ARG_CHECK(devs[j] != devs[i], "mkcclCommInitAll: device %d is listed twice", devs[i]);
  }
  for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
  mkcclUniqueId id;
  MKCCL_CHECK(bootstrapCreateRoot(&id));
  std::vector<mkcclResult_t> res(ndev, mkcclSuccess);
  std::vector<std::string> msg(ndev);
  std::vector<std::thread> threads;
  int prev = 0;
  cudaGetDevice(&prev);
  for (int i = 0; i < ndev; ++i)
    threads.emplace_back([&, i] {
      cudaSetDevice(devs[i]);
      res[i] = initRank(&comms[i], ndev, id, i, nullptr, "mkcclCommInitAll");
      if (res[i] != mkcclSuccess) msg[i] = lastError();
    });
  for (auto& t : threads) t.join();
  cudaSetDevice(prev);
  for (int i = 0; i < ndev; ++i)
    if (res[i] != mkcclSuccess) {
      for (int j = 0; j < ndev; ++j)
        if (comms[j]) mkcclCommAbort(comms[j]), comms[j] = nullptr;
      return setError(res[i], "mkcclCommInitAll: rank %d (device %d): %s", i, devs[i], msg[i].c_str());
    }
  return mkcclSuccess;
}

static mkcclResult_t destroyImpl(mkcclComm_t comm, bool abort, const char* caller) {
  MKCCL_CHECK(commLookup(comm, caller));
  commUnregister(comm);  // a second destroy now fails cleanly
  const bool hasError = comm->asyncError.load() != mkcclSuccess ||
                        (comm->errHost && ((volatile DevError*)comm->errHost)->code != 0) ||
                        comm->initResult.load() != mkcclSuccess;
  mkcclResult_t res = freeComm(comm, abort || hasError);
  comm->magic = 0;
  delete comm;
  return abort ? mkcclSuccess : res;
}

mkcclResult_t mkcclCommDestroy(mkcclComm_t comm) { return destroyImpl(comm, false, "mkcclCommDestroy"); }
mkcclResult_t mkcclCommAbort(mkcclComm_t comm) { return destroyImpl(comm, true, "mkcclCommAbort"); }

mkcclResult_t mkcclCommGetAsyncError(mkcclComm_t comm, mkcclResult_t* asyncError) {
  MKCCL_CHECK(commLookup(comm, "mkcclCommGetAsyncError"));
  ARG_CHECK(asyncError != nullptr, "mkcclCommGetAsyncError: asyncError is NULL");
  int init = comm->initResult.load();
  if (init != mkcclSuccess) {
    *asyncError = (mkcclResult_t)init;
    return mkcclSuccess;
  }
  *asyncError = commPollError(comm);
  return mkcclSuccess;
}

static mkcclResult_t queryCheck(const mkcclComm* comm, const void* out, const char* caller) {
  MKCCL_CHECK(commLookup(comm, caller));
  ARG_CHECK(out != nullptr, "%s: output pointer is NULL", caller);
  if (comm->initResult.load() == mkcclInProgress)
    return setError(mkcclInvalidUsage, "%s: the communicator is still initializing", caller);
  return mkcclSuccess;
}

mkcclResult_t mkcclCommCount(const mkcclComm_t comm, int* count) {
  MKCCL_CHECK(queryCheck(comm, count, "mkcclCommCount"));
  *count = comm->nranks;
  return mkcclSuccess;
}

mkcclResult_t mkcclCommUserRank(const mkcclComm_t comm, int* rank) {
  MKCCL_CHECK(queryCheck(comm, rank, "mkcclCommUserRank"));
  *rank = comm->rank;
  return mkcclSuccess;
}

mkcclResult_t mkcclCommCuDevice(const mkcclComm_t comm, int* device) {
  MKCCL_CHECK(queryCheck(comm, device, "mkcclCommCuDevice"));
  *device = comm->cudaDev;
  return mkcclSuccess;
}
