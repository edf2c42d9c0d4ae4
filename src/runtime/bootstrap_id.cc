// The unique id: encoding, checks, the MKCCL_COMM_ID derivation.
#include "runtime/bootstrap_id.h"
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <chrono>
#include "runtime/bootstrap.h"
#include "base/log.h"
#include "base/settings.h"

namespace mkccl {
namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const uint8_t* p = (const uint8_t*)data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser: spreads a hash over all bits
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void fillAddress(const SocketAddress& a, UniqueIdContent* c) {
  if (a.sa.sa_family == AF_INET) {
    c->family = 4;
    c->portNet = a.sin.sin_port;
    memcpy(c->ip, &a.sin.sin_addr, 4);
  } else {
    c->family = 6;
    c->portNet = a.sin6.sin6_port;
    c->scopeId = a.sin6.sin6_scope_id;
    memcpy(c->ip, &a.sin6.sin6_addr, 16);
  }
}

}  // namespace

uint64_t idChecksum(const UniqueIdContent& c) {
  return mix64(fnv1a(&c, offsetof(UniqueIdContent, checksum)));
}

void idEncode(const SocketAddress& root, uint64_t token, const Key128& key, uint16_t flags, mkcclUniqueId* id) {
  UniqueIdContent c;
  memset(&c, 0, sizeof(c));
  c.magic = kIdMagic;
  c.version = kIdVersion;
  c.flags = flags;
  c.token = token;
  c.key[0] = key.k0, c.key[1] = key.k1;
  fillAddress(root, &c);
  c.checksum = idChecksum(c);
  memcpy(id->internal, &c, sizeof(c));
}

mkcclResult_t bootstrapCheckId(const mkcclUniqueId& id) {
  UniqueIdContent c;
  memcpy(&c, id.internal, sizeof(c));
  if (c.magic != kIdMagic)
    return setError(mkcclInvalidArgument,
                    "unique id: not an mkccl unique id (magic 0x%08x, expected 0x%08x): was it made by "
                    "mkcclGetUniqueId and passed unchanged?",
                    c.magic, kIdMagic);
  if (c.version != kIdVersion)
    return setError(mkcclInvalidArgument,
                    "unique id: version %u, this library understands version %u (mixed libmkccl versions?)",
                    c.version, kIdVersion);
  if (c.checksum != idChecksum(c))
    return setError(mkcclInvalidArgument, "unique id: checksum mismatch (the id was corrupted in transit)");
  bool reservedZero = true;
  for (uint8_t b : c.reserved) reservedZero &= b == 0;
  if ((c.family != 4 && c.family != 6) || (c.flags & ~kIdFromCommId) || !reservedZero || c.portNet == 0)
    return setError(mkcclInvalidArgument, "unique id: malformed content (family %u, flags 0x%x, port %u)", c.family,
                    c.flags, ntohs(c.portNet));
  return mkcclSuccess;
}

Key128 idKey(const mkcclUniqueId& id) {
  UniqueIdContent c;
  memcpy(&c, id.internal, sizeof(c));
  Key128 k;
  k.k0 = c.key[0], k.k1 = c.key[1];
  return k;
}

uint64_t bootstrapIdToken(const mkcclUniqueId& id) {
  UniqueIdContent c;
  memcpy(&c, id.internal, sizeof(c));
  return c.token;
}

mkcclResult_t idDecode(const mkcclUniqueId& id, SocketAddress* root, uint16_t* flags) {
  mkcclResult_t res = bootstrapCheckId(id);
  if (res != mkcclSuccess) return res;
  UniqueIdContent c;
  memcpy(&c, id.internal, sizeof(c));
  memset(root, 0, sizeof(*root));
  if (c.family == 4) {
    root->sin.sin_family = AF_INET;
    root->sin.sin_port = c.portNet;
    memcpy(&root->sin.sin_addr, c.ip, 4);
  } else {
    root->sin6.sin6_family = AF_INET6;
    root->sin6.sin6_port = c.portNet;
    root->sin6.sin6_scope_id = c.scopeId;
    memcpy(&root->sin6.sin6_addr, c.ip, 16);
  }
  *flags = c.flags;
  return mkcclSuccess;
}

mkcclResult_t idFromCommId(const char* commId, mkcclUniqueId* id) {
  SocketAddress root;
  mkcclResult_t r = socketParseHostPort(commId, "MKCCL_COMM_ID", &root);
  if (r != mkcclSuccess) return r;
  UniqueIdContent c;
  memset(&c, 0, sizeof(c));
  fillAddress(root, &c);
  // The token and the key depend only on the address: every process derives the same id.
  const size_t addrBytes = offsetof(UniqueIdContent, key) - offsetof(UniqueIdContent, family);
  uint64_t token = mix64(fnv1a(&c.family, addrBytes, fnv1a("mkccl-comm-id", 13)));
  Key128 key;
  key.k0 = mix64(fnv1a(&c.family, addrBytes, fnv1a("mkccl-comm-id key 0", 19)));
  key.k1 = mix64(fnv1a(&c.family, addrBytes, fnv1a("mkccl-comm-id key 1", 19)));
  idEncode(root, token, key, kIdFromCommId, id);
  return mkcclSuccess;
}

int bootstrapDefaultTimeoutMs() { return settings().timeoutMs; }

uint64_t mixToken(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ull)); }

Key128 randomKey() {
  Key128 k;
  uint64_t v[2] = {0, 0};
  if (getrandom(v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v)) {
    k.k0 = v[0], k.k1 = v[1];
    return k;
  }
  k.k0 = randomU64(), k.k1 = mix64(randomU64() ^ 0x5851f42d4c957f2dull);
  return k;
}

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v)) return v;
  // No entropy yet (early boot): time, pid and an address are still unique enough for a token.
  uint64_t t = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  return mix64(t ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&v ^ (uint64_t)time(nullptr));
}

}  // namespace mkccl
