// What the bootstrap's sockets carry. Every message, on every socket, is a frame:
//
//   MsgHeader (32 bytes: magic, kind, tag, length, and a MAC of these under the channel)
//   payload   (length bytes)
//   uint64_t  MAC of the payload under the channel (when length > 0)
//
// The channel (bootstrap_auth.h) names the connection and direction and numbers the frames, so a
// frame is taken only from the peer that holds the right key, in order, once. A receiver checks the
// header's MAC before it believes anything in it (so a stranger can make it act on no length, no
// tag, no error text), and the payload's MAC before it uses the payload.
//
// Keys: the rendezvous hello is keyed by the id's secret; the rest of a root connection by a key
// derived from it and the rank's fresh nonce; a rank <-> rank connection's hello by the session key
// (the id's secret and the root's table nonce), the rest of it by a key derived from that and the
// connector's fresh nonce. Shared by the root service and the ranks.
#pragma once
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"
#include "runtime/bootstrap_auth.h"
#include "runtime/socket.h"

namespace mkccl {

constexpr uint32_t kMsgMagic = 0x3253424du;  // "MBS2"

enum FrameKind : uint16_t {
  kFrameData = 1,       // an operation's message; tag: the operation (or a send/recv tag)
  kFrameRootHello = 2,  // rank -> root: RootHello
  kFrameRootTable = 3,  // root -> rank: RootTable + nranks addresses
  kFrameRootError = 4,  // root -> rank: FailNote + text: the rendezvous failed, why
  kFrameRootAbort = 5,  // rank -> root: FailNote + text: this rank gives up (its timeout) or failed
  kFrameConnHello = 6,  // rank -> rank, first frame of a connection: ConnHello
  kFrameBye = 7,        // rank -> ring neighbours at destroy: a clean departure, not a crash
  kFrameAbort = 8,      // rank -> rank: FailNote + text: this rank failed, why
};

struct MsgHeader {
  uint32_t magic;
  uint16_t kind;
  uint16_t reserved;  // 0
  uint32_t tag;
  uint32_t reserved2;  // 0
  uint64_t len;
  uint64_t mac;
};
static_assert(sizeof(MsgHeader) == 32, "frame header layout");

// Operation tags of the ring collectives (send/recv tags are the caller's: they travel on their
// own connections, and kind tells them from control frames).
enum : uint32_t {
  kTagAllGather = 0x7f000010u,
  kTagBarrier = 0x7f000011u,
  kTagBroadcast = 0x7e000000u,  // + the root rank, so ranks that disagree on it are caught
};

constexpr uint32_t kHelloVersion = 1;
struct RootHello {
  uint32_t version;  // kHelloVersion
  int32_t rank, nranks;
  uint32_t reserved;
  uint64_t nonce;  // fresh per connection: keys the rest of it
  SocketAddress listenAddr;
};
struct RootTable {
  uint64_t nonce;  // fresh per rendezvous: keys the session (and tells runs of one MKCCL_COMM_ID apart)
  // followed by nranks SocketAddress
};
struct FailNote {
  int32_t result;  // mkcclResult_t
  int32_t rank;    // who failed (-1: the root)
  // followed by the message text (not terminated)
};
constexpr size_t kMaxFailText = 4096;

enum ConnKind : uint32_t { kConnRing = 1, kConnP2p = 2 };
struct ConnHello {
  int32_t from, to;
  uint32_t kind;
  uint32_t reserved;
  uint64_t nonce;  // fresh per connection: keys the rest of it
};

// Frame size around a payload of len bytes.
constexpr size_t frameBytes(uint64_t len) { return sizeof(MsgHeader) + len + (len ? sizeof(uint64_t) : 0); }

// ---- channels ----
Channel helloChannel(const Key128& idKey);                     // rank -> root, the hello
void rootConnChannels(const Key128& idKey, uint64_t nonce, Channel* rankToRoot, Channel* rootToRank);
Key128 sessionKey(const Key128& idKey, uint64_t tableNonce);
Channel connHelloChannel(const Key128& session);               // rank -> rank, the hello
void connChannels(const Key128& session, const ConnHello& h, Channel* connectorToAcceptor, Channel* acceptorToConnector);

// ---- frames ----
// The header of the channel's next frame (its MAC filled in); the channel moves on with frameDone.
MsgHeader frameHeader(const Channel& ch, FrameKind kind, uint32_t tag, uint64_t len);
// Magic, reserved fields and MAC: true when this is the channel's next frame header.
bool frameHeaderValid(const Channel& ch, const MsgHeader& h);
uint64_t framePayloadMac(const Channel& ch, const void* payload, uint64_t len);
inline void frameDone(Channel& ch) { ch.seq++; }
// A whole frame in one buffer (header, payload, MAC); moves the channel on.
std::vector<char> frameBuild(Channel& ch, FrameKind kind, uint32_t tag, const void* payload, uint64_t len);
// A failure note's payload: FailNote + text (truncated to kMaxFailText).
std::vector<char> failNote(mkcclResult_t res, int rank, const std::string& text);
// Reads a failure note's payload: the result (a valid error code, else mkcclRemoteError) and text.
mkcclResult_t failNoteParse(const std::vector<char>& payload, int* rank, std::string* text);

// ---- blocking frame I/O over one socket, bounded by a deadline ----
// Sends a frame (header, payload, MAC) and moves the channel on.
mkcclResult_t frameSend(int fd, Channel& ch, FrameKind kind, uint32_t tag, const void* data, uint64_t len,
                        const Deadline& dl, const char* what, const char* peer);
// Receives a header and checks it: not the channel's next frame -> mkcclRemoteError (not our peer, or
// a corrupted stream); a failure note (kind abort or root error, payload up to kMaxFailText) -> its
// result with its text; another kind, tag or length -> mkcclInternalError (the ranks made different
// calls). On success the payload follows (frameRecvPayload).
mkcclResult_t frameRecvHeader(int fd, Channel& ch, FrameKind kind, uint32_t tag, uint64_t len, const Deadline& dl,
                              const char* what, const char* peer);
// Checks a header received by other means, as frameRecvHeader does (a failure note's payload is read
// from fd).
mkcclResult_t frameCheckHeader(int fd, Channel& ch, const MsgHeader& h, FrameKind kind, uint32_t tag, uint64_t len,
                               const Deadline& dl, const char* what, const char* peer);
// The payload and its MAC after a checked header; moves the channel on.
mkcclResult_t frameRecvPayload(int fd, Channel& ch, void* data, uint64_t len, const Deadline& dl, const char* what,
                               const char* peer);
mkcclResult_t frameRecv(int fd, Channel& ch, FrameKind kind, uint32_t tag, void* data, uint64_t len,
                        const Deadline& dl, const char* what, const char* peer);

}  // namespace mkccl
