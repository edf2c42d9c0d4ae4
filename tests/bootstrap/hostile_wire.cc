// The wire format as the hostile tests see it (see hostile.h): frames of bootstrap_wire.h.
#include <string.h>
#include "hostile.h"
#include "runtime/bootstrap.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_wire.h"

namespace mkccl {
namespace test {
namespace {

// A frame as a stranger makes it: the right magic and layout, a MAC under a key of its own.
std::vector<char> strangerFrame(FrameKind kind, uint64_t len, const void* payload, size_t bytes) {
  Channel ch = {randomKey(), 0, 0};
  MsgHeader h = frameHeader(ch, kind, 0, len);
  std::vector<char> v(sizeof(h) + bytes);
  memcpy(v.data(), &h, sizeof(h));
  if (bytes) memcpy(v.data() + sizeof(h), payload, bytes);
  return v;
}

}  // namespace

std::vector<char> wireRootHello(const mkcclUniqueId& id, int rank, int nranks, const SocketAddress& listen) {
  RootHello h;
  memset(&h, 0, sizeof(h));
  h.version = kHelloVersion, h.rank = rank, h.nranks = nranks, h.nonce = randomU64(), h.listenAddr = listen;
  Channel hc = helloChannel(idKey(id));
  return frameBuild(hc, kFrameRootHello, 0, &h, sizeof(h));
}

std::vector<char> wireRootHelloWrongLength(const mkcclUniqueId& id, int rank, int nranks, int extra) {
  RootHello h;
  memset(&h, 0, sizeof(h));
  h.version = kHelloVersion, h.rank = rank, h.nranks = nranks, h.nonce = randomU64();
  std::vector<char> payload(sizeof(h) + extra, 0);
  memcpy(payload.data(), &h, sizeof(h));
  Channel hc = helloChannel(idKey(id));
  return frameBuild(hc, kFrameRootHello, 0, payload.data(), payload.size());
}

std::vector<char> wireForgedRootError() {
  char payload[sizeof(FailNote) + 6];
  FailNote n = {mkcclInvalidUsage, -1};
  memcpy(payload, &n, sizeof(n));
  memcpy(payload + sizeof(n), "pwned!", 6);
  return strangerFrame(kFrameRootError, sizeof(payload), payload, sizeof(payload));
}

std::vector<char> wireHeaderAnnouncing(uint64_t len) { return strangerFrame(kFrameRootError, len, nullptr, 0); }

std::vector<char> wireForgedConnHello() {
  ConnHello h = {1, 0, kConnRing, 0, 0x1234};
  std::vector<char> v = strangerFrame(kFrameConnHello, sizeof(h), &h, sizeof(h));
  v.resize(v.size() + 8, 0);  // a MAC that cannot be right
  return v;
}

}  // namespace test
}  // namespace mkccl
