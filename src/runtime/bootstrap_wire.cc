// Framed messages on the bootstrap's sockets (see bootstrap_wire.h).
#include "runtime/bootstrap_wire.h"
#include <string.h>
#include <string>
#include "runtime/log.h"

namespace mkccl {

mkcclResult_t msgSend(int fd, uint32_t tag, const void* data, uint64_t len, const Deadline& dl, const char* what,
                      const char* peer) {
  MsgHeader h = {kMsgMagic, tag, len};
  MKCCL_TRACE("%s: send tag 0x%x, %llu bytes to %s", what, tag, (unsigned long long)len, peer);
  mkcclResult_t r = socketSendAll(fd, &h, sizeof(h), dl, what, peer);
  if (r == mkcclSuccess && len) r = socketSendAll(fd, data, len, dl, what, peer);
  return r;
}

mkcclResult_t msgCheckHeader(int fd, const MsgHeader& h, uint32_t tag, uint64_t len, const Deadline& dl,
                             const char* what, const char* peer) {
  if (h.magic != kMsgMagic)
    return setError(mkcclRemoteError, "%s: bad message from %s (magic 0x%08x, expected 0x%08x): not an mkccl peer "
                    "or a corrupted stream", what, peer, h.magic, kMsgMagic);
  if (h.tag == kTagRootError && tag != kTagRootError && h.len >= sizeof(RootError) && h.len < 65536) {
    std::string text(h.len, '\0');
    mkcclResult_t r = socketRecvAll(fd, &text[0], h.len, dl, what, peer);
    if (r != mkcclSuccess) return r;
    RootError e;
    memcpy(&e, text.data(), sizeof(e));
    mkcclResult_t res = (e.result > 0 && e.result < mkcclNumResults) ? (mkcclResult_t)e.result : mkcclRemoteError;
    return setError(res, "%s: the rendezvous failed: %s", what, text.c_str() + sizeof(RootError));
  }
  if (h.tag == kTagBye && tag != kTagBye)
    return setError(mkcclRemoteError, "%s: %s destroyed its bootstrap while this rank waits for it (did the ranks "
                    "make different calls?)", what, peer);
  if (h.tag != tag || h.len != len)
    return setError(mkcclInternalError,
                    "%s: expected a message with tag 0x%x and %llu bytes from %s, got tag 0x%x and %llu bytes "
                    "(do all ranks make the same calls in the same order?)",
                    what, tag, (unsigned long long)len, peer, h.tag, (unsigned long long)h.len);
  MKCCL_TRACE("%s: received tag 0x%x, %llu bytes from %s", what, tag, (unsigned long long)len, peer);
  return mkcclSuccess;
}

mkcclResult_t msgRecvHeader(int fd, uint32_t tag, uint64_t len, const Deadline& dl, const char* what,
                            const char* peer) {
  MsgHeader h;
  mkcclResult_t r = socketRecvAll(fd, &h, sizeof(h), dl, what, peer);
  if (r != mkcclSuccess) return r;
  return msgCheckHeader(fd, h, tag, len, dl, what, peer);
}

mkcclResult_t msgRecv(int fd, uint32_t tag, void* data, uint64_t len, const Deadline& dl, const char* what,
                      const char* peer) {
  mkcclResult_t r = msgRecvHeader(fd, tag, len, dl, what, peer);
  if (r == mkcclSuccess && len) r = socketRecvAll(fd, data, len, dl, what, peer);
  return r;
}

}  // namespace mkccl
