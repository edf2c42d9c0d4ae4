// The device->host command FIFO: memory layout and command encoding shared by the GPU producer
// (src/kernels/device/fifo.cuh), the host consumer (src/runtime/proxy_fifo.h) and the CPU stand-in
// producer of the tests. Host and device code.
//
// Protocol (DESIGN.md section 6):
//  - `head` (device memory) counts tickets handed out; a producer claims ticket t with an atomic
//    add. Slot t % size may be written once t < tail + size (`tail`, host-mapped, counts slots the
//    host has consumed and cleared).
//  - The producer writes words 1..3, then publishes word 0 (never 0 for a valid command) with a
//    system-scope release store. The host acquire-loads word 0 of slot tail % size; when it is not
//    0 it copies the command, clears word 0 and release-stores tail + 1 (batched: once per poll).
//  - `done` counts the tickets whose transfer has completed locally (the source may be reused); it
//    is a prefix: ticket t is done once done > t. `error` becomes a non-zero mkcclResult_t when the
//    proxy fails, so a producer waiting for room (or for done) gives up instead of spinning.
#pragma once
#include <stdint.h>

#include "kernels/abi/hd.h"

namespace mkccl {

enum FifoOp : uint32_t {
  kFifoPut = 1,  // write bytes from srcOff of my window to dstOff of the peer's, then raise its flag
  kFifoNop = 2,  // consumed and completed without traffic (tests, benchmarks)
};

// A command: 32 bytes, one slot. Offsets and sizes are full 64-bit fields.
//   hdr = op:4 | peer:16 | flag:12 | value:32   (op != 0 marks the slot as published)
//   value: the low 32 bits of the 64-bit flag value; the proxies extend it (extendValue in
//   src/transport/net.h), which needs successive values of one (sender, flag) to advance by less
//   than 2^31 and stay within 2^31 of the sender's other values (use netFlagValue).
struct alignas(32) FifoCmd {
  uint64_t hdr;
  uint64_t srcOff;
  uint64_t dstOff;
  uint64_t bytes;
};
static_assert(sizeof(FifoCmd) == 32, "a FIFO command is 32 bytes");

constexpr int kFifoPeerBits = 16;
constexpr int kFifoFlagBits = 12;
constexpr int kFifoMaxRanks = 1 << kFifoPeerBits;  // peers are ranks of the communicator
constexpr int kFifoMaxFlags = 1 << kFifoFlagBits;  // arrival flags per sender

MKCCL_HD uint64_t fifoHeader(uint32_t op, uint32_t peer, uint32_t flag, uint64_t value) {
  return ((uint64_t)(op & 0xf) << 60) | ((uint64_t)(peer & 0xffff) << 44) | ((uint64_t)(flag & 0xfff) << 32) |
         (value & 0xffffffffull);
}
MKCCL_HD uint32_t fifoOp(uint64_t hdr) { return (uint32_t)(hdr >> 60); }
MKCCL_HD uint32_t fifoPeer(uint64_t hdr) { return (uint32_t)(hdr >> 44) & 0xffff; }
MKCCL_HD uint32_t fifoFlag(uint64_t hdr) { return (uint32_t)(hdr >> 32) & 0xfff; }
MKCCL_HD uint32_t fifoValue(uint64_t hdr) { return (uint32_t)hdr; }

// Host-written control words, each on its own cache line (host-mapped pinned memory).
struct alignas(64) FifoCtl {
  uint64_t tail;
  uint64_t pad0[7];
  uint64_t done;
  uint64_t pad1[7];
  uint64_t error;  // mkcclResult_t of the proxy's failure, 0 while healthy
  uint64_t pad2[7];
};

// What a producer needs (device pointers on the GPU; plain pointers for the CPU stand-in).
struct FifoDev {
  FifoCmd* slots;       // host-mapped ring of `size` commands
  FifoCtl* ctl;         // host-mapped
  uint64_t* head;       // device memory: next ticket
  uint64_t* tailCache;  // device memory: a recent value of ctl->tail (saves PCIe reads)
  uint64_t size;        // power of two
};

}  // namespace mkccl
