// Frames on the bootstrap's sockets (see bootstrap_wire.h).
#include "runtime/bootstrap_wire.h"
#include <string.h>
#include <algorithm>
#include <string>
#include "base/check.h"
#include "base/log.h"

namespace mkccl {

Channel helloChannel(const Key128& idKey) { return Channel{deriveKey(idKey, "root hello", 0), 0, 0}; }

void rootConnChannels(const Key128& idKey, uint64_t nonce, Channel* rankToRoot, Channel* rootToRank) {
  Key128 k = deriveKey(idKey, "root connection", nonce);
  *rankToRoot = Channel{k, 1, 0};
  *rootToRank = Channel{k, 2, 0};
}

Key128 sessionKey(const Key128& idKey, uint64_t tableNonce) { return deriveKey(idKey, "session", tableNonce); }

Channel connHelloChannel(const Key128& session) { return Channel{deriveKey(session, "connection hello", 0), 0, 0}; }

void connChannels(const Key128& session, const ConnHello& h, Channel* connectorToAcceptor,
                  Channel* acceptorToConnector) {
  uint64_t who = ((uint64_t)(uint32_t)h.from << 32) ^ ((uint64_t)(uint32_t)h.to << 8) ^ h.kind;
  Key128 k = deriveKey(session, "connection", h.nonce, who);
  *connectorToAcceptor = Channel{k, 1, 0};
  *acceptorToConnector = Channel{k, 2, 0};
}

namespace {

uint64_t headerMac(const Channel& ch, const MsgHeader& h) {
  SipHash s(ch.key);
  s.updateU64(ch.id);
  s.updateU64(ch.seq);
  s.update(&h, offsetof(MsgHeader, mac));
  return s.final();
}

}  // namespace

MsgHeader frameHeader(const Channel& ch, FrameKind kind, uint32_t tag, uint64_t len) {
  MsgHeader h;
  memset(&h, 0, sizeof(h));
  h.magic = kMsgMagic, h.kind = kind, h.tag = tag, h.len = len;
  h.mac = headerMac(ch, h);
  return h;
}

bool frameHeaderValid(const Channel& ch, const MsgHeader& h) {
  return h.magic == kMsgMagic && h.reserved == 0 && h.reserved2 == 0 && h.mac == headerMac(ch, h);
}

uint64_t framePayloadMac(const Channel& ch, const void* payload, uint64_t len) {
  SipHash s(ch.key);
  s.updateU64(ch.id);
  s.updateU64(ch.seq);
  s.updateU64(~0ull);  // not a header
  s.update(payload, len);
  return s.final();
}

std::vector<char> frameBuild(Channel& ch, FrameKind kind, uint32_t tag, const void* payload, uint64_t len) {
  std::vector<char> f(frameBytes(len));
  MsgHeader h = frameHeader(ch, kind, tag, len);
  memcpy(f.data(), &h, sizeof(h));
  if (len) {
    memcpy(f.data() + sizeof(h), payload, len);
    uint64_t mac = framePayloadMac(ch, payload, len);
    memcpy(f.data() + sizeof(h) + len, &mac, sizeof(mac));
  }
  frameDone(ch);
  return f;
}

std::vector<char> failNote(mkcclResult_t res, int rank, const std::string& text) {
  FailNote n = {(int32_t)res, (int32_t)rank};
  size_t len = std::min(text.size(), kMaxFailText);
  std::vector<char> p(sizeof(n) + len);
  memcpy(p.data(), &n, sizeof(n));
  memcpy(p.data() + sizeof(n), text.data(), len);
  return p;
}

mkcclResult_t failNoteParse(const std::vector<char>& payload, int* rank, std::string* text) {
  FailNote n = {mkcclRemoteError, -1};
  if (payload.size() >= sizeof(n)) memcpy(&n, payload.data(), sizeof(n));
  *rank = n.rank;
  text->assign(payload.size() > sizeof(n) ? payload.data() + sizeof(n) : "",
               payload.size() > sizeof(n) ? payload.size() - sizeof(n) : 0);
  for (char& c : *text)
    if ((unsigned char)c < 32) c = ' ';  // a message for a log line
  return n.result > 0 && n.result < mkcclNumResults && n.result != mkcclInProgress ? (mkcclResult_t)n.result
                                                                                   : mkcclRemoteError;
}

mkcclResult_t frameSend(int fd, Channel& ch, FrameKind kind, uint32_t tag, const void* data, uint64_t len,
                        const Deadline& dl, const char* what, const char* peer) {
  MsgHeader h = frameHeader(ch, kind, tag, len);
  uint64_t mac = len ? framePayloadMac(ch, data, len) : 0;
  MKCCL_TRACE("%s: send kind %u tag 0x%x, %llu bytes to %s", what, kind, tag, (unsigned long long)len, peer);
  SocketIo op;
  op.fd = fd, op.isSend = true, op.peer = peer;
  op.buf = &h, op.len = sizeof(h);
  if (len) op.buf2 = const_cast<void*>(data), op.len2 = len, op.buf3 = &mac, op.len3 = sizeof(mac);
  MKCCL_CHECK(socketTransfer(&op, 1, dl, what));
  frameDone(ch);
  return mkcclSuccess;
}

mkcclResult_t frameCheckHeader(int fd, Channel& ch, const MsgHeader& h, FrameKind kind, uint32_t tag, uint64_t len,
                               const Deadline& dl, const char* what, const char* peer) {
  if (!frameHeaderValid(ch, h))
    return setError(mkcclRemoteError,
                    "%s: a frame from %s failed its check (magic 0x%08x): not a peer of this communicator, or a "
                    "corrupted stream",
                    what, peer, h.magic);
  if ((h.kind == kFrameAbort || h.kind == kFrameRootError) && h.kind != kind && h.len <= sizeof(FailNote) + kMaxFailText) {
    std::vector<char> payload(h.len);
    MKCCL_CHECK(frameRecvPayload(fd, ch, payload.data(), payload.size(), dl, what, peer));
    int rank = -1;
    std::string text;
    mkcclResult_t res = failNoteParse(payload, &rank, &text);
    if (h.kind == kFrameRootError) return setError(res, "%s: the rendezvous failed: %s", what, text.c_str());
    return setError(mkcclRemoteError, "%s: %s failed: %s", what, peer, text.c_str());
  }
  if (h.kind == kFrameBye && kind != kFrameBye)
    return setError(mkcclRemoteError, "%s: %s destroyed its bootstrap while this rank waits for it (did the ranks "
                    "make different calls?)", what, peer);
  if (h.kind != kind || h.tag != tag || h.len != len)
    return setError(mkcclInternalError,
                    "%s: expected a message with tag 0x%x and %llu bytes from %s, got kind %u, tag 0x%x and %llu "
                    "bytes (do all ranks make the same calls in the same order?)",
                    what, tag, (unsigned long long)len, peer, h.kind, h.tag, (unsigned long long)h.len);
  MKCCL_TRACE("%s: received kind %u tag 0x%x, %llu bytes from %s", what, kind, tag, (unsigned long long)len, peer);
  return mkcclSuccess;
}

mkcclResult_t frameRecvHeader(int fd, Channel& ch, FrameKind kind, uint32_t tag, uint64_t len, const Deadline& dl,
                              const char* what, const char* peer) {
  MsgHeader h;
  MKCCL_CHECK(socketRecvAll(fd, &h, sizeof(h), dl, what, peer));
  return frameCheckHeader(fd, ch, h, kind, tag, len, dl, what, peer);
}

mkcclResult_t frameRecvPayload(int fd, Channel& ch, void* data, uint64_t len, const Deadline& dl, const char* what,
                               const char* peer) {
  if (len) {
    uint64_t mac = 0;
    SocketIo op;
    op.fd = fd, op.isSend = false, op.peer = peer;
    op.buf = data, op.len = len, op.buf2 = &mac, op.len2 = sizeof(mac);
    MKCCL_CHECK(socketTransfer(&op, 1, dl, what));
    if (mac != framePayloadMac(ch, data, len))
      return setError(mkcclRemoteError, "%s: the payload from %s failed its check (a corrupted stream)", what, peer);
  }
  frameDone(ch);
  return mkcclSuccess;
}

mkcclResult_t frameRecv(int fd, Channel& ch, FrameKind kind, uint32_t tag, void* data, uint64_t len,
                        const Deadline& dl, const char* what, const char* peer) {
  MKCCL_CHECK(frameRecvHeader(fd, ch, kind, tag, len, dl, what, peer));
  return frameRecvPayload(fd, ch, data, len, dl, what, peer);
}

}  // namespace mkccl
