// What a kernel knows about its communicator: passed by value to every kernel of a call.
// Shared by host and device code.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace mkccl {

struct NetDevComm;  // inter-node FIFO, buffers and arrival flags (src/kernels/abi/net_dev.h)

// The most ranks in one NVLink domain (a node). Checked at init with a clear error.
constexpr int kMaxLocalRanks = 16;

// Host-mapped error record of a communicator (cudaHostAllocMapped). The first device-side error
// wins (atomicCAS on the error word in device memory, slot kErrorSlot); its details are then
// copied here with plain stores, the code last. The host turns it into the call's result / mkcclCommGetAsyncError.
struct DevError {
  int code;        // mkcclResult_t; 0 = none
  int rank;        // rank whose kernel recorded it
  int peer;        // local peer waited for, -1 if none
  int site;        // what waited (DevSite)
  uint64_t seq;    // sequence number of the call
  uint64_t seen;   // flag value last seen
  uint64_t want;   // flag value waited for
  int abort;       // set by the host (mkcclCommAbort): every device wait gives up at once
  int pad;
};

// Where a device wait happened, for the error message.
enum DevSite : int {
  kSiteBarrier = 1,
  kSiteGridSync = 2,
  kSiteAllGather = 3,
  kSiteReduceScatter = 4,
  kSiteAllReduce = 5,
  kSiteAllToAll = 6,
  kSiteGemmChunk = 7,
  kSiteFusedTile = 8,
  kSiteFifo = 9,
  kSiteNet = 10,
  kSiteTest = 11,
  kSiteMoeDispatch = 12,   // a wait of the MoE dispatch
  kSiteMoeCombine = 13,    // a wait of the MoE combine
  // Not waits: a dispatch found routing it cannot carry out (DevError: peer = local rank concerned,
  // seen = what was found, want = the limit). The message says so (runtime/comm.cc).
  kSiteMoeCapacity = 14,   // rank `peer` (global) would receive `seen` rows, more than its maxRecvRows `want`
  kSiteMoeExpertId = 15,   // topk_idx held `seen` (as int64), not in [-1, E = `want`)
  kSiteMoeNetWindow = 16,  // across nodes: rank `peer` (global) needs `seen` bytes of network window, more
                           // than the `want` bytes every rank has (MKCCL_NET_BUFFER_BYTES)
  kSiteUser = 32,  // ops may use kSiteUser + n
};

// Symmetric workspace layout (the same on every rank):
//   [0, flagsBytes)                       64-bit flags (zeroed once at init, never reset)
//     slots [0, kMaxLocalRanks)           barrier: slot q holds the last barrier value from local rank q
//     slots [32, 58)                      grid-sync counters / generations, local use only
//     slots 58, 59                        local: the direct AllGather's arrival counter (coll_direct.cuh)
//     slot  60                            local: the call sequence counter (kSeqSlot, signal.cuh)
//     slot  62                            local: an op's go word to its copy-engine streams (kCopyEngineSlot)
//     slot  63                            this rank's device error word (first error wins, local atomics)
//     slots [kOpFlagSlot, ...)            free for ops: per-chunk / per-tile flags
//   [flagsBytes, flagsBytes + dataBytes)  data: staging buffers of ops
constexpr int kBarrierSlot = 0;
constexpr int kGridSyncSlot = 32;  // pairs (counter, generation): slots 32+2i, 33+2i, i < 13
// This rank's call sequence counter, in device memory so that a CUDA graph's replays advance it as
// eager calls do: flagValue(s, arrivals) after call s (dev::takeCallSeq, signal.cuh).
constexpr int kSeqSlot = 60;
// Written only by this rank's kernels, read by this rank's copy-engine streams (cuStreamWaitValue64):
// AllGather+GEMM's ce plan posts flagValue(seq, 1) once the copies may start.
constexpr int kCopyEngineSlot = 62;
constexpr int kErrorSlot = 63;
constexpr int kOpFlagSlot = 64;

// Rules every kernel protocol follows (so that ops can follow each other on one communicator):
//  - write into a peer's workspace only after that peer has entered the call (its barrier slot, or
//    an op flag, holds this call's value): it may still be reading the previous call's data;
//  - flag values only grow (dev::flagValue(seq, sub)); a write that nobody waits for can land late,
//    after the peer moved on, so such writes go to slots whose meaning does not change between calls,
//    or use dev::storeMaxRelease, which can never lower a flag.
struct DevComm {
  int rank, nranks;            // in the communicator
  int localRank, localRanks;   // in this node (NVLink domain)
  int node, nNodes;
  uint64_t seq;                // the host's sequence number of the call, >= 1, +1 per call; kernels
                               // with a flag protocol use dev::takeCallSeq's (>= this; the same on
                               // every rank, also when a CUDA graph replays the launch)
  uint64_t timeoutNs;          // bound on every device wait
  char* peers[kMaxLocalRanks]; // each local rank's workspace, mapped here; peers[localRank] is ours
  size_t flagsBytes;
  size_t dataBytes;
  DevError* err;               // device pointer to the host-mapped record
  NetDevComm* net;             // device pointer; null when nNodes == 1
};

}  // namespace mkccl
