// What the bootstrap's sockets carry: every message is a header (magic, tag, length) and a payload;
// the receiver checks all three. Shared by the root service and the ranks.
#pragma once
#include <stdint.h>
#include "mkccl.h"
#include "runtime/socket.h"

namespace mkccl {

constexpr uint32_t kMsgMagic = 0x53424b4du;  // "MKBS"

struct MsgHeader {
  uint32_t magic;
  uint32_t tag;
  uint64_t len;
};

// Tags of the bootstrap's own messages. User send/recv tags travel on their own sockets, so they
// may take any value.
enum : uint32_t {
  kTagRootHello = 0x7f000001u,  // rank -> root: RootHello
  kTagRootTable = 0x7f000002u,  // root -> rank: RootTable + nranks addresses
  kTagRootError = 0x7f000003u,  // root -> rank: RootError + message text
  kTagConnHello = 0x7f000004u,  // rank -> rank, first message of a connection: ConnHello
  kTagRootGiveUp = 0x7f000005u, // rank -> root, no payload: its own timeout passed, it leaves
  kTagAllGather = 0x7f000010u,
  kTagBarrier = 0x7f000011u,
  kTagBye = 0x7f000020u,        // rank -> ring neighbours at destroy: a clean departure, not a crash
  kTagBroadcast = 0x7e000000u,  // + the root rank, so ranks that disagree on it are caught
};

struct RootHello {
  uint64_t token;  // the id's: a connection for another id is turned away
  int32_t rank, nranks;
  SocketAddress listenAddr;
};
struct RootTable {
  uint64_t nonce;  // fresh per rendezvous (tokens of MKCCL_COMM_ID comms differ between runs)
  // followed by nranks SocketAddress
};
struct RootError {
  int32_t result;  // mkcclResult_t every rank returns
  // followed by the message text (not terminated)
};

enum ConnKind : uint32_t { kConnRing = 1, kConnP2p = 2 };
struct ConnHello {
  uint64_t token;
  int32_t rank;
  uint32_t kind;
};

// Sends header + payload.
mkcclResult_t msgSend(int fd, uint32_t tag, const void* data, uint64_t len, const Deadline& dl, const char* what,
                      const char* peer);
// Receives a header and checks it. A root's error message becomes its result code and text; a wrong
// magic is mkcclRemoteError (not our peer, or a corrupted stream); another tag or length is
// mkcclInternalError (the ranks called different operations).
mkcclResult_t msgRecvHeader(int fd, uint32_t tag, uint64_t len, const Deadline& dl, const char* what,
                            const char* peer);
mkcclResult_t msgRecv(int fd, uint32_t tag, void* data, uint64_t len, const Deadline& dl, const char* what,
                      const char* peer);
// Checks a header received by other means (see msgRecvHeader).
mkcclResult_t msgCheckHeader(int fd, const MsgHeader& h, uint32_t tag, uint64_t len, const Deadline& dl,
                             const char* what, const char* peer);

}  // namespace mkccl
