// The inter-node transport interface: what the proxy thread (src/runtime/proxy.cc) needs from a
// NIC. Implementations: libfabric RDM (src/transport/efa, provider efa or tcp) and libibverbs RC
// (src/transport/ib). Host code only; one thread (the proxy) drives a transport after setup.
//
// Model: every rank registers one window (the same size on every rank) and, for transports that
// write arrival flags themselves (ib: an inline RDMA write after the data, RC orders them), its flag
// array. A put moves [srcOff, srcOff+bytes) of the local window to [dstOff, ...) of a peer's and
// then makes flag (sender, flag) at the peer reach `value`:
//  - writesFlags: the transport writes the flag remotely; the receiver sees no event.
//  - otherwise the receiver's transport reports an Arrival event after the data is in its window
//    (libfabric: remote CQ data of fi_writedata, or a notice message when the receiver asked for
//    ranges because it stages the data through host memory); its proxy then writes the flag.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <memory>
#include <string>
#include <vector>
#include "mkccl.h"

namespace mkccl {
namespace net {

// Connection data (exchanged through the bootstrap) starts with this header; every field checked.
constexpr uint32_t kConnMagic = 0x6e636b6d;  // "mkcn"
constexpr uint32_t kConnVersion = 1;
struct ConnHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t kind;   // kConnKindFabric / kConnKindIb
  uint32_t bytes;  // total bytes of the connection data, header included
  int32_t rank;    // who made it
  int32_t peer;    // for whom (-1: anyone)
  uint64_t windowBytes;
};
constexpr uint32_t kConnKindFabric = 1;
constexpr uint32_t kConnKindIb = 2;
// Checks a received blob: size, magic, version, kind, sender, addressee and window size. The
// message names the peer and what is wrong (mkcclRemoteError: the peer sent something we cannot use).
mkcclResult_t connCheck(const void* data, size_t bytes, uint32_t kind, size_t minBytes, int expectRank, int me,
                        uint64_t windowBytes, const char* transport);

struct Memory {
  void* base = nullptr;
  uint64_t bytes = 0;
  bool device = false;  // CUDA device memory (needs FI_HMEM / dma-buf / peermem)
  int cudaDev = -1;
};

struct Setup {
  int rank = 0, nranks = 1;
  int timeoutMs = 60000;
  Memory window;           // sources and destinations of puts
  Memory flags;            // uint64_t[nranks * flagsPerPeer]: used when caps().writesFlags
  int flagsPerPeer = 0;
  bool wantRanges = false; // arrivals must carry (dstOff, bytes): the receiver stages them
  bool loopbackOnly = false;  // every peer is on this host (emulated nodes): bind to 127.0.0.1
  std::string device;      // NIC to use ("" = the transport's choice)
};

struct Caps {
  bool writesFlags = false;     // flags written by the transport (no Arrival events)
  bool deviceMemory = false;    // the window may be device memory
  int arrivalValueBits = 64;    // bits of an Arrival's value (the proxy extends the rest)
};

struct PutOp {
  int peer = -1;
  uint64_t srcOff = 0, dstOff = 0, bytes = 0;
  uint32_t flag = 0;    // in the sender's flag range at the receiver
  uint64_t value = 0;   // full 64-bit flag value
  uint64_t cookie = 0;  // returned by the SendDone event
};

struct Event {
  enum Type { kSendDone, kArrival, kError } type = kSendDone;
  uint64_t cookie = 0;  // kSendDone
  int peer = -1;        // kArrival: sender; kError: the peer involved, -1 if unknown
  uint32_t flag = 0;    // kArrival
  uint64_t value = 0;   // kArrival: low `valueBits` bits of the value
  int valueBits = 64;
  bool hasRange = false;  // kArrival: the data landed in [dstOff, dstOff+bytes)
  uint64_t dstOff = 0, bytes = 0;
  mkcclResult_t error = mkcclSuccess;  // kError
  std::string message;                 // kError
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual Caps caps() const = 0;
  // Opens the NIC and registers the memory of `s`. Called once, before connData.
  virtual mkcclResult_t setup(const Setup& s) = 0;
  // The bytes `peer` needs to reach us (and write into our window).
  virtual mkcclResult_t connData(int peer, std::vector<uint8_t>* out) = 0;
  // Uses what `peer` sent. A malformed blob is a clear error, never a crash.
  virtual mkcclResult_t connect(int peer, const void* data, size_t bytes) = 0;
  // Posts puts to one connected peer, in order. *taken < n when the send queue is full (poll, then
  // retry the rest). Out-of-range offsets are mkcclInvalidUsage.
  virtual mkcclResult_t post(int peer, const PutOp* ops, int n, int* taken) = 0;
  // Reaps completions into events. A failure of one operation is an kError event; a failure of the
  // transport itself is a non-success result.
  virtual mkcclResult_t poll(std::vector<Event>* events) = 0;
};

// Which transports exist on this machine. "" when usable; else why not.
std::string fabricUnavailableReason(const std::string& provider);
std::string ibUnavailableReason();
// Real transports (the ib one over libibverbs). mkcclInvalidUsage with the reason when the library
// was built without it.
mkcclResult_t fabricCreate(const std::string& provider, std::unique_ptr<Transport>* out);
// dmabuf: exports device memory as a dma-buf fd (null: register GPU memory through nvidia-peermem).
mkcclResult_t ibCreate(std::unique_ptr<Transport>* out, mkcclResult_t (*dmabuf)(void*, uint64_t, int*) = nullptr);

// The 64-bit value nearest to `base` whose low `bits` bits are `lo` (bits in [1, 64]).
inline uint64_t extendValue(uint64_t base, uint64_t lo, int bits) {
  if (bits >= 64) return lo;
  const uint64_t span = 1ull << bits, mask = span - 1;
  const uint64_t fwd = (lo - base) & mask;
  if (fwd < span / 2) return base + fwd;
  const uint64_t back = span - fwd;
  return base >= back ? base - back : base + fwd;
}

}  // namespace net
}  // namespace mkccl
