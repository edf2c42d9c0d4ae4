// The unique id's layout and what is derived from it (the root's address, the token), and the
// bootstrap's settings (MKCCL_TIMEOUT_MS, MKCCL_COMM_ID).
#pragma once
#include <stdint.h>
#include "mkccl.h"
#include "runtime/bootstrap_auth.h"
#include "runtime/socket.h"

namespace mkccl {

// 128 bytes, checked by magic, version and checksum. Integers in host byte order (ids travel between
// hosts of one architecture); the port in network order.
struct UniqueIdContent {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;      // kIdFromCommId
  uint64_t token;      // random, or derived from MKCCL_COMM_ID: names per-comm OS objects
  uint16_t family;     // 4 or 6
  uint16_t portNet;
  uint32_t scopeId;    // IPv6 link-local
  uint8_t ip[16];      // 4 bytes used for IPv4
  uint64_t key[2];     // the secret that authenticates the bootstrap's messages (bootstrap_auth.h)
  uint8_t reserved[64];  // zero
  uint64_t checksum;   // of the 120 bytes before it
};
static_assert(sizeof(UniqueIdContent) == MKCCL_UNIQUE_ID_BYTES, "unique id layout");

constexpr uint32_t kIdMagic = 0x44494b4du;  // "MKID"
constexpr uint16_t kIdVersion = 2;
// The id was derived from MKCCL_COMM_ID: no root runs yet; rank 0 starts it in Bootstrap::create.
// Its secret is derived from the address too (every process must find the same id), so it keeps
// strangers' and other runs' traffic out, but is no secret from someone who knows the address.
constexpr uint16_t kIdFromCommId = 1;

uint64_t idChecksum(const UniqueIdContent& c);
void idEncode(const SocketAddress& root, uint64_t token, const Key128& key, uint16_t flags, mkcclUniqueId* id);
Key128 idKey(const mkcclUniqueId& id);
// 128 random bits (getrandom).
Key128 randomKey();
// bootstrapCheckId, then the root's address and the flags.
mkcclResult_t idDecode(const mkcclUniqueId& id, SocketAddress* root, uint16_t* flags);

// The id every process derives from the same MKCCL_COMM_ID value (so none has to be exchanged).
mkcclResult_t idFromCommId(const char* commId, mkcclUniqueId* id);

// The settings' MKCCL_TIMEOUT_MS (default 60000).
int bootstrapDefaultTimeoutMs();
uint64_t randomU64();
// Combines two 64-bit values into a well-spread one (tokens).
uint64_t mixToken(uint64_t a, uint64_t b);

}  // namespace mkccl
