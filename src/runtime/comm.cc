// Communicator handles: the registry of live ones, and turning errors (device or host) into results.
#include "runtime/comm.h"
#include <unistd.h>
#include <chrono>
#include <unordered_set>
#include "base/check.h"
#include "kernels/abi/direct_site.h"

namespace mkccl {
namespace {
std::mutex registryMutex;
std::unordered_set<const mkcclComm*>& registry() {
  static auto* r = new std::unordered_set<const mkcclComm*>();  // never destroyed: used at exit too
  return *r;
}
}  // namespace

void commRegister(mkcclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry().insert(comm);
}

void commUnregister(mkcclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry().erase(comm);
}

mkcclResult_t commLookup(const mkcclComm* comm, const char* caller) {
  if (comm == nullptr) {
    if (!caller) return mkcclInvalidArgument;
    return setError(mkcclInvalidArgument, "%s: comm is NULL", caller);
  }
  bool live;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    live = registry().count(comm) != 0;
  }
  if (!live || comm->magic != kCommMagic) {
    if (!caller) return mkcclInvalidArgument;
    return setError(mkcclInvalidArgument, "%s: comm %p is not a live communicator (destroyed, or never created)",
                    caller, (const void*)comm);
  }
  return mkcclSuccess;
}

const char* devSiteName(int site) {
  switch (site) {
    case kSiteBarrier: return "barrier";
    case kSiteGridSync: return "grid sync";
    case kSiteAllGather: return "AllGather";
    case kSiteReduceScatter: return "ReduceScatter";
    case kSiteAllReduce: return "AllReduce";
    case kSiteAllToAll: return "AllToAll";
    case kSiteGemmChunk: return "GEMM chunk wait";
    case kSiteFusedTile: return "fused tile wait";
    case kSiteFifo: return "network FIFO";
    case kSiteNet: return "network arrival";
    case kSiteTest: return "test";
    case kSiteMoeDispatch: return "MoE dispatch";
    case kSiteMoeCombine: return "MoE combine";
    default: return site >= kSiteUser ? "operation" : "unknown";
  }
}

void commSetAsyncError(mkcclComm_t comm, mkcclResult_t res, const std::string& msg) {
  std::lock_guard<std::mutex> lock(comm->errMutex);
  if (comm->asyncError.load() != mkcclSuccess) return;
  comm->lastError = msg;
  comm->asyncError.store(res);
  MKCCL_WARN("%s", msg.c_str());
}

mkcclResult_t commPollError(mkcclComm_t comm) {
  int host = comm->asyncError.load();
  if (host == mkcclSuccess && comm->errHost != nullptr) {
    const volatile DevError* e = comm->errHost;
    int code = e->code;
    if (code != 0) {
      __sync_synchronize();  // the details were written before the code
      char msg[512];
      if (e->site == kSiteMoeCapacity)
        snprintf(msg, sizeof(msg),
                 "rank %d: MoE dispatch of call #%llu: rank %d would receive %llu rows (padding included), more "
                 "than the handle's maxRecvRows %llu; nothing was sent (%s)",
                 e->rank, (unsigned long long)e->seq, e->peer, (unsigned long long)e->seen,
                 (unsigned long long)e->want, mkcclGetErrorString((mkcclResult_t)code));
      else if (e->site == kSiteMoeNetWindow)
        snprintf(msg, sizeof(msg),
                 "rank %d: MoE dispatch of call #%llu across nodes: rank %d would need %llu bytes of its network "
                 "window for this routing (dispatch or combine), more than the %llu every rank has; raise "
                 "MKCCL_NET_BUFFER_BYTES; nothing was sent (%s)",
                 e->rank, (unsigned long long)e->seq, e->peer, (unsigned long long)e->seen,
                 (unsigned long long)e->want, mkcclGetErrorString((mkcclResult_t)code));
      else if (e->site == kSiteMoeExpertId)
        snprintf(msg, sizeof(msg),
                 "rank %d: MoE dispatch of call #%llu: topk_idx holds %lld, not an expert id in [-1, %llu); the "
                 "slot was dropped (%s)",
                 e->rank, (unsigned long long)e->seq, (long long)e->seen, (unsigned long long)e->want,
                 mkcclGetErrorString((mkcclResult_t)code));
      else if (e->site == kSiteDirectMismatch)
        snprintf(msg, sizeof(msg),
                 "rank %d: call #%llu (a collective, or AllGather+GEMM's gatheredA / GEMM+AllReduce's C) used "
                 "registered buffers in place, or unregistered ones, and local peer %d (rank %d) did not do the "
                 "same (posted %llu, expected %llu): every rank must pass buffers of the same registration at the "
                 "same sizes, or every rank unregistered ones (docs/GRAPHS.md) (%s)",
                 e->rank, (unsigned long long)e->seq, e->peer,
                 e->peer >= 0 && e->peer < (int)comm->localToRank.size() ? comm->localToRank[e->peer] : -1,
                 (unsigned long long)e->seen, (unsigned long long)e->want, mkcclGetErrorString((mkcclResult_t)code));
      else if (e->site == kSiteGemmChunk)  // peer: the rank (not local) whose gathered rows it waited for
        snprintf(msg, sizeof(msg),
                 "rank %d: a device wait (%s) of call #%llu gave up waiting for the rows of rank %d: flag %llu, "
                 "wanted %llu (%s)",
                 e->rank, devSiteName(e->site), (unsigned long long)e->seq, e->peer, (unsigned long long)e->seen,
                 (unsigned long long)e->want, mkcclGetErrorString((mkcclResult_t)code));
      else if (e->peer >= 0)
        snprintf(msg, sizeof(msg),
                 "rank %d: a device wait (%s) of call #%llu gave up waiting for local peer %d (rank %d): "
                 "flag %llu, wanted %llu (%s)",
                 e->rank, devSiteName(e->site), (unsigned long long)e->seq, e->peer,
                 e->peer < (int)comm->localToRank.size() ? comm->localToRank[e->peer] : -1,
                 (unsigned long long)e->seen, (unsigned long long)e->want, mkcclGetErrorString((mkcclResult_t)code));
      else
        snprintf(msg, sizeof(msg), "rank %d: a device wait (%s) of call #%llu gave up: flag %llu, wanted %llu (%s)",
                 e->rank, devSiteName(e->site), (unsigned long long)e->seq, (unsigned long long)e->seen,
                 (unsigned long long)e->want, mkcclGetErrorString((mkcclResult_t)code));
      commSetAsyncError(comm, (mkcclResult_t)code, msg);
      host = comm->asyncError.load();
    }
  }
  if (host == mkcclSuccess) return mkcclSuccess;
  std::lock_guard<std::mutex> lock(comm->errMutex);
  return setError((mkcclResult_t)host, "communicator has an error: %s", comm->lastError.c_str());
}

mkcclResult_t commWaitLastWork(mkcclComm* comm, const char* what, int64_t slackMs) {
  if (!comm->lastWork) return mkcclSuccess;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(comm->cfg.timeoutMs + slackMs);
  cudaError_t e;
  while ((e = cudaEventQuery(comm->lastWork)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > limit)
      return setError(mkcclTimeout, "rank %d, %s: the communicator's earlier work did not finish in time", comm->rank, what);
    usleep(100);
  }
  if (e != cudaSuccess) return setError(mkcclUnhandledCudaError, "rank %d, %s: earlier work failed: %s", comm->rank, what, cudaGetErrorString(e));
  return mkcclSuccess;
}

mkcclResult_t commCheckUsable(mkcclComm_t comm, const char* caller) {
  MKCCL_CHECK(commLookup(comm, caller));
  int init = comm->initResult.load();
  if (init == mkcclInProgress)
    return setError(mkcclInvalidUsage,
                    "%s: the communicator is still initializing (non-blocking init): poll mkcclCommGetAsyncError "
                    "until it returns mkcclSuccess",
                    caller);
  if (init != mkcclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errMutex);
    return setError((mkcclResult_t)init, "%s: the communicator's initialization failed: %s", caller,
                    comm->lastError.c_str());
  }
  return commPollError(comm);
}

}  // namespace mkccl
