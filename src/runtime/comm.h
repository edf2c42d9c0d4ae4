// The communicator (host side).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
#include "mkccl.h"
#include "runtime/bootstrap.h"
#include "runtime/copy_engines.h"
#include "kernels/abi/devcomm.h"
#include "runtime/regmem.h"
#include "runtime/symmem.h"

namespace mkccl {

struct NetState;      // inter-node transport + proxy (src/transport, src/runtime/proxy)
struct OpState;       // the ops' tuning overrides and plans (src/ops/tuner/op_state.h)
struct TopoMapping;   // GPU -> NIC choice (src/topo)

// Exchanged by the bootstrap at init: who is where.
struct PeerInfo {
  int rank;
  int cudaDev;
  int pid;
  int pad;
  uint64_t hostHash;
  char busId[32];  // PCI bus id of the GPU, "0000:19:00.0"
};

struct ResolvedConfig {
  bool blocking = true;
  int timeoutMs = 60000;
  int commCtas = -1;   // -1: heuristic
  int maxCtas = -1;    // -1: all SMs
  size_t workspaceBytes = 256ull << 20;
};

struct mkcclCommImpl;

}  // namespace mkccl

struct mkcclComm {
  uint64_t magic;  // kCommMagic while alive
  int rank = -1, nranks = 0, cudaDev = -1;
  int node = 0, nNodes = 1, localRank = 0, localRanks = 1;
  std::vector<int> rankNode;       // node of each rank
  std::vector<int> rankLocal;      // local rank of each rank
  std::vector<int> localToRank;    // ranks of this node, by local rank
  std::vector<int> nodeFirstRank;  // ...
  std::vector<mkccl::PeerInfo> peers;
  mkccl::ResolvedConfig cfg;
  int smCount = 0;
  int ccMajor = 0, ccMinor = 0;

  std::unique_ptr<mkccl::Bootstrap> bootstrap;
  mkccl::SymWorkspace ws;               // symmetric workspace, mapped from every local peer
  mkccl::SymRegion scratch[mkccl::kSymScratchSlots];  // grown on demand by ops (symScratchGet)
  std::vector<mkccl::SymRegion> retiredScratch;  // outgrown after a capture: graphs may still use them
  std::vector<std::unique_ptr<mkccl::Registration>> regs;  // mkcclCommRegister (regmem.h)
  mkccl::DevError* errHost = nullptr;   // host-mapped error record
  mkccl::DevError* errDev = nullptr;
  uint64_t seq = 0;                     // last call's sequence number (the host's; the device's
                                        // counter, kSeqSlot, is ahead of it after graph replays)
  bool capturing = false;               // the call being enqueued is captured into a CUDA graph
  bool graphCaptured = false;           // some call of this comm was captured: graphs may replay it
  cudaEvent_t lastWork = nullptr;       // recorded after every call: destroy waits on it
  cudaStream_t lastStream = nullptr;    // stream of the last call: a call on another one waits for it
  mkccl::CopyEngines ce;                // copy-engine streams (made on first use; copy_engines.h)

  std::atomic<int> initResult{mkcclInProgress};  // mkcclSuccess once ready
  std::thread initThread;                        // non-blocking init
  std::atomic<int> asyncError{mkcclSuccess};     // host-side errors (proxy thread, ...)
  std::mutex errMutex;
  std::string lastError;                         // message of the first error

  mkccl::NetState* net = nullptr;        // set by netInitComm when nNodes > 1
  mkccl::NetDevComm* netDev = nullptr;   // device view of it (DevComm::net)
  mkccl::TopoMapping* topo = nullptr;
  std::shared_ptr<mkccl::OpState> ops;   // made at init (opStateCreate)
};

namespace mkccl {

constexpr uint64_t kCommMagic = 0x6d6b63636c436f6dull;  // "mkcclCom"

// Validates a handle from the user: known to the library, alive, init finished and no error.
// For calls that also accept a communicator still initialising, see commLookup().
mkcclResult_t commCheckUsable(mkcclComm_t comm, const char* caller);
// Validates a handle (alive) without looking at its state.
mkcclResult_t commLookup(const mkcclComm* comm, const char* caller);

// The comm's pending error: a device error recorded by a kernel or an error of a host thread.
mkcclResult_t commPollError(mkcclComm_t comm);
// Waits, bounded by the communicator's timeout, for its last eager call to finish on the device
// (before memory that call may still use is freed, unmapped or remapped). `what` names the caller
// in the error: mkcclTimeout, or mkcclUnhandledCudaError if that work failed. `slackMs` adds to the
// timeout (destroy waits a little longer than the kernels' own bounded waits).
mkcclResult_t commWaitLastWork(mkcclComm* comm, const char* what, int64_t slackMs = 0);
// Records a host-side async error (e.g. from the proxy thread): the first one wins.
void commSetAsyncError(mkcclComm_t comm, mkcclResult_t res, const std::string& msg);

// The registry of live communicators (what commLookup checks).
void commRegister(mkcclComm* comm);
void commUnregister(mkcclComm* comm);

// Human-readable name of a DevSite (devcomm.h) for error messages.
const char* devSiteName(int site);

}  // namespace mkccl
