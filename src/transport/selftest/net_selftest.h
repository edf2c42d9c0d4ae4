// Device-side harness of the network path outside a communicator, for the GPU test (tests/net)
// and mkccl-perf's fifo/netbw ops: a DevComm with just what net kernels use (error record, FIFO,
// window, flags), and the kernels that drive it. Built into mkccl_net_core only (not libmkccl).
//
// Callers whose proxy makes CUDA calls (a CudaStager) must call preloadKernels() first: with lazy
// module loading (CUDA's default) the first launch of a kernel may wait for the whole context to
// go idle, i.e. for a running exchange kernel that waits for that very proxy.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "mkccl.h"
#include "kernels/abi/devcomm.h"
#include "kernels/abi/fifo.h"
#include "kernels/abi/net_dev.h"

namespace mkccl {
namespace netselftest {

struct Harness {
  DevComm dc{};                  // by value to kernels
  DevError* errHost = nullptr;   // host-mapped error record
  char* errWords = nullptr;      // device: stands in for the workspace flags (error word)
  FifoCmd* slots = nullptr;      // host-mapped
  FifoCtl* ctl = nullptr;        // host-mapped
  uint64_t* counters = nullptr;  // device: head, tailCache
  char* window = nullptr;        // device memory, or host-mapped (hostWindow): usable by kernels and the host
  bool hostWindow = false;
  uint64_t windowBytes = 0;
  uint64_t* flags = nullptr;     // host-mapped [nranks][flagsPerPeer]
  int flagsPerPeer = 0;
  int* rankNode = nullptr;       // device: node = rank
  NetDevComm* net = nullptr;     // device
  uint64_t fifoSlots = 0;
};

// Every rank is its own node. Zeroes everything. hostWindow: the window is pinned host memory mapped
// into the GPU (what netInitComm uses for transports that cannot reach GPU memory: the transport
// reads and writes it directly and the proxy copies nothing).
mkcclResult_t harnessCreate(int rank, int nranks, uint64_t windowBytes, int flagsPerPeer, uint64_t fifoSlots,
                            int timeoutMs, Harness* h, bool hostWindow = false);
void harnessDestroy(Harness* h);

// Loads every kernel below on the current device now (cudaFuncGetAttributes), so that no later
// launch has to load one while another kernel runs.
mkcclResult_t preloadKernels();

// ctas x warps pushers (one thread per warp), each pushing `perPusher` no-op commands; each pusher
// then waits until its last command is done. For FIFO + proxy throughput.
mkcclResult_t launchFifoNops(const Harness& h, uint64_t seq, int ctas, int warps, int perPusher, cudaStream_t s);

// Fills [0, bytes) of the window with the pattern of (seed, rank).
mkcclResult_t launchFill(const Harness& h, uint64_t bytes, uint32_t seed, cudaStream_t s);
// Puts [0, bytes) to peer's [dstBase, ...) in chunks (flag 1+c, value netFlagValue(seq)), then waits
// for the peer's chunks to arrive in my [dstBase, ...).
mkcclResult_t launchExchange(const Harness& h, int peer, uint64_t bytes, uint64_t chunk, uint64_t dstBase, uint64_t seq,
                             cudaStream_t s);
// Counts bytes of [dstBase, dstBase+bytes) that differ from peer's pattern into *bad (device).
mkcclResult_t launchVerify(const Harness& h, int peer, uint64_t bytes, uint64_t dstBase, uint32_t seed,
                           unsigned long long* bad, cudaStream_t s);

}  // namespace netselftest
}  // namespace mkccl
