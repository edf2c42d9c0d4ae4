// Checks connection data received from a peer before any of it is used.
#include <string.h>
#include "base/log.h"
#include "transport/net.h"

namespace mkccl {
namespace net {

mkcclResult_t connCheck(const void* data, size_t bytes, uint32_t kind, size_t minBytes, int expectRank, int me,
                        uint64_t windowBytes, const char* transport) {
  if (data == nullptr || bytes < sizeof(ConnHeader))
    return setError(mkcclRemoteError, "%s: connection data from rank %d is truncated: %zu bytes, expected %zu",
                    transport, expectRank, bytes, minBytes);
  ConnHeader h;
  memcpy(&h, data, sizeof(h));
  if (h.magic != kConnMagic)
    return setError(mkcclRemoteError, "%s: connection data from rank %d is malformed (magic 0x%08x, expected 0x%08x)",
                    transport, expectRank, h.magic, kConnMagic);
  if (h.version != kConnVersion)
    return setError(mkcclRemoteError,
                    "%s: rank %d runs connection protocol version %u, this rank %u: mixed libmkccl versions?", transport,
                    expectRank, h.version, kConnVersion);
  if (h.kind != kind)
    return setError(mkcclRemoteError, "%s: rank %d uses another transport (kind %u, expected %u): set MKCCL_NET the same "
                    "on every rank", transport, expectRank, h.kind, kind);
  if (bytes < minBytes || h.bytes != bytes)
    return setError(mkcclRemoteError,
                    "%s: connection data from rank %d is truncated or has trailing bytes: got %zu, header says %u, "
                    "expected at least %zu",
                    transport, expectRank, bytes, h.bytes, minBytes);
  if (h.rank != expectRank || (h.peer != -1 && h.peer != me))
    return setError(mkcclRemoteError, "%s: connection data expected from rank %d for rank %d came from rank %d for rank %d",
                    transport, expectRank, me, h.rank, h.peer);
  if (h.windowBytes != windowBytes)
    return setError(mkcclRemoteError, "%s: rank %d's network window is %llu bytes, this rank's %llu: they must match",
                    transport, expectRank, (unsigned long long)h.windowBytes, (unsigned long long)windowBytes);
  return mkcclSuccess;
}

}  // namespace net
}  // namespace mkccl
