// Raw sockets and measures of the hostile-peer tests (see hostile.h).
#include "hostile.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <set>
#include "runtime/bootstrap_id.h"

namespace mkccl {
namespace test {

SocketAddress idRootAddress(const mkcclUniqueId& id) {
  SocketAddress a;
  uint16_t flags = 0;
  memset(&a, 0, sizeof(a));
  idDecode(id, &a, &flags);
  return a;
}

SocketAddress loopbackAddress(int port) {
  SocketAddress a;
  memset(&a, 0, sizeof(a));
  a.sin.sin_family = AF_INET;
  a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin.sin_port = htons((uint16_t)port);
  return a;
}

int rawConnect(const SocketAddress& a) {
  int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return -1;
  if (connect(s, &a.sa, socketAddrLen(a)) != 0) {
    if (errno != EINPROGRESS) {
      close(s);
      return -1;
    }
    pollfd p = {s, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, 2000) != 1 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      close(s);
      return -1;
    }
  }
  return s;  // non-blocking: rawSend polls, bounded
}

bool rawSend(int fd, const void* data, size_t len) {
  const char* p = (const char*)data;
  auto t0 = std::chrono::steady_clock::now();
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n, len -= (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(2)) return false;
      pollfd q = {fd, POLLOUT, 0};
      poll(&q, 1, 50);
      continue;
    }
    return false;
  }
  return true;
}

bool rawSend(int fd, const std::vector<char>& v) { return rawSend(fd, v.data(), v.size()); }

namespace {

std::set<unsigned long> ourSocketInodes() {
  std::set<unsigned long> inodes;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return inodes;
  while (dirent* e = readdir(d)) {
    char path[300], link[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0) continue;
    link[n] = 0;
    unsigned long ino = 0;
    if (sscanf(link, "socket:[%lu]", &ino) == 1) inodes.insert(ino);
  }
  closedir(d);
  return inodes;
}

}  // namespace

std::vector<SocketAddress> listeningAddresses() {
  std::set<unsigned long> mine = ourSocketInodes();
  std::vector<SocketAddress> out;
  for (int v6 = 0; v6 < 2; v6++) {
    FILE* f = fopen(v6 ? "/proc/self/net/tcp6" : "/proc/self/net/tcp", "r");
    if (!f) continue;
    char line[512];
    if (!fgets(line, sizeof(line), f)) {  // the column names
      fclose(f);
      continue;
    }
    while (fgets(line, sizeof(line), f)) {
      char local[64], remote[64];
      unsigned st = 0;
      unsigned long inode = 0;
      int slot = 0;
      unsigned long txq = 0, rxq = 0, tr = 0, tm = 0, retr = 0, uid = 0, timeout = 0;
      if (sscanf(line, " %d: %63s %63s %x %lx:%lx %lx:%lx %lx %lu %lu %lu", &slot, local, remote, &st, &txq, &rxq, &tr,
                 &tm, &retr, &uid, &timeout, &inode) != 12)
        continue;
      if (st != 0x0A || !mine.count(inode)) continue;  // 0A: LISTEN
      char* colon = strrchr(local, ':');
      if (!colon) continue;
      *colon = 0;
      SocketAddress a;
      memset(&a, 0, sizeof(a));
      // The address is printed as 32-bit words in host order.
      uint32_t words[4] = {0, 0, 0, 0};
      for (int w = 0; w < (v6 ? 4 : 1); w++) {
        char word[9] = {0};
        memcpy(word, local + 8 * w, 8);
        words[w] = (uint32_t)strtoul(word, nullptr, 16);
      }
      if (v6) {
        a.sin6.sin6_family = AF_INET6;
        memcpy(&a.sin6.sin6_addr, words, 16);
        a.sin6.sin6_port = htons((uint16_t)strtol(colon + 1, nullptr, 16));
      } else {
        a.sin.sin_family = AF_INET;
        a.sin.sin_addr.s_addr = words[0];
        a.sin.sin_port = htons((uint16_t)strtol(colon + 1, nullptr, 16));
      }
      out.push_back(a);
    }
    fclose(f);
  }
  return out;
}

bool SocketAddressIn(const SocketAddress& a, const std::vector<SocketAddress>& list) {
  for (const SocketAddress& b : list)
    if (socketAddrEqual(a, b)) return true;
  return false;
}

bool waitNewListeningAddress(const std::vector<SocketAddress>& known, int timeoutMs, SocketAddress* out) {
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    for (const SocketAddress& a : listeningAddresses())
      if (!SocketAddressIn(a, known)) {
        *out = a;
        return true;
      }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(timeoutMs)) return false;
    usleep(2000);
  }
}

double cpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

}  // namespace test
}  // namespace mkccl
