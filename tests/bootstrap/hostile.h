// What a hostile or careless peer does to the bootstrap's sockets, for the hostile-peer tests
// (hostile_test.cc) and the wire fuzzer (tests/fuzz): raw connections, bytes of the wire format
// (hostile_wire.cc: the only part that knows the format), this process's listening ports, CPU time.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"
#include "runtime/socket.h"

namespace mkccl {
namespace test {

// ---- the wire (hostile_wire.cc) ----
// The hello a rank holding the id sends to the root.
std::vector<char> wireRootHello(const mkcclUniqueId& id, int rank, int nranks, const SocketAddress& listen);
// A hello from a holder of the id whose header announces `extra` more bytes than a hello has (and
// that carries them): a malformed hello from someone the root must believe.
std::vector<char> wireRootHelloWrongLength(const mkcclUniqueId& id, int rank, int nranks, int extra);
// What a stranger forges without the id: a frame of the wire with a root-error tag, a result code and
// text (26 bytes where the header is 16); and a frame header announcing `len` bytes.
std::vector<char> wireForgedRootError();
std::vector<char> wireHeaderAnnouncing(uint64_t len);
// A frame header with the connection-hello tag and the hello's length, without valid credentials.
std::vector<char> wireForgedConnHello();

// ---- sockets ----
SocketAddress idRootAddress(const mkcclUniqueId& id);
SocketAddress loopbackAddress(int port);
// A blocking connect (bounded by 2 s); the fd, or -1.
int rawConnect(const SocketAddress& a);
// Sends everything (blocking, MSG_NOSIGNAL); false when the peer closed.
bool rawSend(int fd, const void* data, size_t len);
bool rawSend(int fd, const std::vector<char>& v);
// The TCP addresses this process listens on (from /proc).
std::vector<SocketAddress> listeningAddresses();
bool SocketAddressIn(const SocketAddress& a, const std::vector<SocketAddress>& list);
// Waits up to timeoutMs for an address listening that is not in `known`; false if none appeared.
bool waitNewListeningAddress(const std::vector<SocketAddress>& known, int timeoutMs, SocketAddress* out);

// ---- measures ----
double cpuSeconds();  // user + system time of this process

}  // namespace test
}  // namespace mkccl
