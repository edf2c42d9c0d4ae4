// TCP sockets for the bootstrap: addresses, the interface choice, and deadline-bounded I/O.
//
// Environment:
//   MKCCL_SOCKET_IFNAME  Which network interface the bootstrap listens on (as NCCL_SOCKET_IFNAME):
//                        a comma-separated list of name prefixes ("eth,ib" matches eth0, ib1, ...);
//                        a leading '^' excludes the listed interfaces instead ("^docker,lo");
//                        a leading '=' (after any '^') makes the names exact ("=eth0", "^=lo").
//                        Of the first matching UP interface, an IPv4 address is used if it has one,
//                        else an IPv6 address. Unset: the first UP non-loopback interface with an
//                        IPv4 address (docker* and virbr* bridges skipped), else loopback.
//
// Every socket is close-on-exec and non-blocking; every wait is a poll() bounded by a Deadline;
// sends use MSG_NOSIGNAL so a vanished peer is an error, never SIGPIPE.
#pragma once
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <chrono>
#include <string>
#include "mkccl.h"

namespace mkccl {

union SocketAddress {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};

socklen_t socketAddrLen(const SocketAddress& a);
std::string socketAddrToString(const SocketAddress& a);  // "1.2.3.4:5" or "[::1]:5"
bool socketAddrIsLoopback(const SocketAddress& a);
bool socketAddrEqual(const SocketAddress& a, const SocketAddress& b);  // family, ip, port

// The address to listen on (port 0), chosen as described above; ifname receives the interface.
// mkcclInvalidArgument when MKCCL_SOCKET_IFNAME matches no usable interface.
mkcclResult_t socketFindInterface(SocketAddress* addr, std::string* ifname);
// Parses "<host>:<port>", "[<ipv6>]:<port>" (host: a literal address or a name to resolve).
// mkcclInvalidArgument (with what, e.g. "MKCCL_COMM_ID", in the message) when it is not one.
mkcclResult_t socketParseHostPort(const char* text, const char* what, SocketAddress* out);

// A point in time on the monotonic clock that bounds a sequence of operations.
class Deadline {
 public:
  explicit Deadline(int64_t timeoutMs)
      : timeoutMs_(timeoutMs), end_(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs)) {}
  int64_t timeoutMs() const { return timeoutMs_; }
  // Milliseconds left, rounded up (0 once expired), clamped to what poll() takes.
  int remainingMs() const;
  bool expired() const { return std::chrono::steady_clock::now() >= end_; }

 private:
  int64_t timeoutMs_;
  std::chrono::steady_clock::time_point end_;
};

// Sockets watched while an operation waits on others: when the peer of one hangs up, the wait
// ends with mkcclInProgress and `fired` set to its index; the caller decides whether that is fatal
// and calls again (the operation's progress is kept in its arguments).
struct SocketWatch {
  const int* fds = nullptr;
  int n = 0;
  int fired = -1;
};

// Binds a listening socket to *addr (its port filled in when it was 0). SO_REUSEADDR is set so a
// fixed port (MKCCL_COMM_ID) can be bound again right after a previous run. Address in use ->
// mkcclInvalidUsage; not an address of this host -> mkcclInvalidArgument; else mkcclSystemError.
mkcclResult_t socketListen(SocketAddress* addr, int* fd);
// Connects to addr, retrying with back-off while it refuses (the listener may not be up yet) until
// the deadline. `what` names the other side, with its address, in messages ("the root at 1.2.3.4:5").
mkcclResult_t socketConnect(const SocketAddress& addr, const Deadline& dl, const char* what, int* fd,
                            SocketWatch* watch = nullptr);
// Accepts one connection (non-blocking, close-on-exec, TCP_NODELAY) before the deadline. Out of
// descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM) it retries every 20 ms until the deadline.
mkcclResult_t socketAccept(int listenFd, const Deadline& dl, const char* what, int* fd, SocketWatch* watch = nullptr);

// One direction of a transfer on one socket, of up to three buffers in a row (a frame's header,
// payload and MAC); several on different sockets progress together, so a ring of ranks that all
// send and receive at once cannot deadlock on full socket buffers.
struct SocketIo {
  int fd = -1;
  bool isSend = false;
  void* buf = nullptr;
  size_t len = 0;
  void* buf2 = nullptr;  // optional: after buf
  size_t len2 = 0;
  void* buf3 = nullptr;  // optional: after buf2
  size_t len3 = 0;
  size_t done = 0;        // bytes done, over all buffers
  const char* peer = "";  // "rank 3 (1.2.3.4:5)", for messages
  size_t total() const { return len + len2 + len3; }
  // Starts over with one buffer.
  void set(void* b, size_t n) {
    buf = b, len = n, buf2 = buf3 = nullptr, len2 = len3 = 0, done = 0;
  }
};
// Completes every op before the deadline. Peer closed/reset -> mkcclRemoteError naming the peer;
// deadline -> mkcclTimeout naming `what` and the peer; other failures -> mkcclSystemError.
mkcclResult_t socketTransfer(SocketIo* ops, int nops, const Deadline& dl, const char* what,
                             SocketWatch* watch = nullptr);
mkcclResult_t socketSendAll(int fd, const void* buf, size_t len, const Deadline& dl, const char* what,
                            const char* peer);
mkcclResult_t socketRecvAll(int fd, void* buf, size_t len, const Deadline& dl, const char* what,
                            const char* peer);

void socketClose(int* fd);  // closes and sets -1; nothing for -1
// errno values of an accept or socket call that mean "out of descriptors or memory for now".
bool socketOutOfResources(int e);

}  // namespace mkccl
