// Authentication of the bootstrap's messages: SipHash-2-4 (a keyed 64-bit PRF) as a MAC, keys
// derived from the unique id's 128-bit secret, and per-direction channels that number their frames.
//
// Who holds what: every rank and the root hold the id's secret (it travels inside the id). The
// rendezvous (rank <-> root) is keyed by it; the root's table carries a fresh nonce from which every
// rank derives the session key that keys the rank <-> rank connections. A frame's MAC covers the
// channel (which connection, which direction), its sequence number and its content, so a stranger
// cannot forge, replay or splice a frame, and a frame of another communicator or of an earlier run
// of the same MKCCL_COMM_ID is never taken for one of ours.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace mkccl {

struct Key128 {
  uint64_t k0 = 0, k1 = 0;
};

// SipHash-2-4 of data under key, in steps (a frame's fields, then its payload).
class SipHash {
 public:
  explicit SipHash(const Key128& key);
  void update(const void* data, size_t n);
  void updateU64(uint64_t v);
  uint64_t final();

 private:
  void block(uint64_t m);
  uint64_t v0_, v1_, v2_, v3_;
  uint64_t tail_ = 0;  // bytes not yet in a block (little-endian)
  size_t total_ = 0;
};

uint64_t sipHash(const Key128& key, const void* data, size_t n);

// A key derived from `parent` for one purpose (label) and value (a nonce, a pair of ranks).
Key128 deriveKey(const Key128& parent, const char* label, uint64_t a, uint64_t b = 0);

// One direction of one connection: its key, its name in every MAC, and the next frame's number.
struct Channel {
  Key128 key;
  uint64_t id = 0;   // names the connection and direction (mixed into every MAC)
  uint64_t seq = 0;  // frames so far in this direction
};

}  // namespace mkccl
