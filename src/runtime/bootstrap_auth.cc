// SipHash-2-4 and the key derivation of the bootstrap (see bootstrap_auth.h).
#include "runtime/bootstrap_auth.h"
#include <string.h>

namespace mkccl {
namespace {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

inline void sipRound(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
  v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
  v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
  v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
}

}  // namespace

SipHash::SipHash(const Key128& key)
    : v0_(key.k0 ^ 0x736f6d6570736575ull),
      v1_(key.k1 ^ 0x646f72616e646f6dull),
      v2_(key.k0 ^ 0x6c7967656e657261ull),
      v3_(key.k1 ^ 0x7465646279746573ull) {}

void SipHash::block(uint64_t m) {
  v3_ ^= m;
  sipRound(v0_, v1_, v2_, v3_);
  sipRound(v0_, v1_, v2_, v3_);
  v0_ ^= m;
}

void SipHash::update(const void* data, size_t n) {
  const uint8_t* p = (const uint8_t*)data;
  // Complete a partial block first.
  while (n > 0 && (total_ & 7) != 0) {
    tail_ |= (uint64_t)*p++ << (8 * (total_ & 7));
    total_++, n--;
    if ((total_ & 7) == 0) block(tail_), tail_ = 0;
  }
  for (; n >= 8; p += 8, n -= 8, total_ += 8) {
    uint64_t m;
    memcpy(&m, p, 8);  // little-endian hosts (the ids already assume one architecture)
    block(m);
  }
  for (; n > 0; n--, total_++) tail_ |= (uint64_t)*p++ << (8 * (total_ & 7));
}

void SipHash::updateU64(uint64_t v) { update(&v, sizeof(v)); }

uint64_t SipHash::final() {
  block(tail_ | ((uint64_t)(total_ & 0xff) << 56));
  v2_ ^= 0xff;
  for (int i = 0; i < 4; i++) sipRound(v0_, v1_, v2_, v3_);
  return v0_ ^ v1_ ^ v2_ ^ v3_;
}

uint64_t sipHash(const Key128& key, const void* data, size_t n) {
  SipHash h(key);
  h.update(data, n);
  return h.final();
}

Key128 deriveKey(const Key128& parent, const char* label, uint64_t a, uint64_t b) {
  Key128 k;
  for (uint64_t half = 0; half < 2; half++) {
    SipHash h(parent);
    h.update(label, strlen(label) + 1);
    h.updateU64(a);
    h.updateU64(b);
    h.updateU64(half);
    (half ? k.k1 : k.k0) = h.final();
  }
  return k;
}

}  // namespace mkccl
