// Runs a function as n forked processes ("ranks") that can all-gather blobs (connection data)
// through the parent. Each child exits with the function's result; the parent kills every child
// still running at the deadline. libfabric and CUDA are initialised only in the children.
#pragma once
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace mkccl {
namespace test {

class RankLink {
 public:
  explicit RankLink(int fd) : fd_(fd) {}
  // Every rank's blob, in rank order. False if the parent or a peer went away.
  bool allGather(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all, int n) {
    if (!sendBlob(fd_, mine)) return false;
    all->assign(n, {});
    for (int r = 0; r < n; ++r)
      if (!recvBlob(fd_, &(*all)[r])) return false;
    return true;
  }
  static bool sendBlob(int fd, const std::vector<uint8_t>& b) {
    const uint64_t len = b.size();
    return writeAll(fd, &len, sizeof(len)) && writeAll(fd, b.data(), b.size());
  }
  static bool recvBlob(int fd, std::vector<uint8_t>* b) {
    uint64_t len = 0;
    if (!readAll(fd, &len, sizeof(len)) || len > (1 << 20)) return false;
    b->resize(len);
    return readAll(fd, b->data(), len);
  }

 private:
  static bool writeAll(int fd, const void* p, size_t n) {
    const char* c = (const char*)p;
    while (n) {
      ssize_t k = write(fd, c, n);
      if (k <= 0) return false;
      c += k;
      n -= k;
    }
    return true;
  }
  static bool readAll(int fd, void* p, size_t n) {
    char* c = (char*)p;
    while (n) {
      ssize_t k = read(fd, c, n);
      if (k <= 0) return false;
      c += k;
      n -= k;
    }
    return true;
  }
  int fd_;
};

// Exit status of each rank (128+signal when killed, -1 when it had to be killed at the deadline).
inline std::vector<int> runRanks(int n, int timeoutSec, const std::function<int(int rank, int n, RankLink&)>& fn) {
  fflush(stdout);
  fflush(stderr);
  std::vector<int> parentFd(n, -1);
  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return std::vector<int>(n, -2);
    const pid_t pid = fork();
    if (pid == 0) {
      for (int q = 0; q < r; ++q) close(parentFd[q]);
      close(sv[0]);
      timeval tv{timeoutSec, 0};
      setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      RankLink link(sv[1]);
      const int rc = fn(r, n, link);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
    close(sv[1]);
    parentFd[r] = sv[0];
    pids[r] = pid;
  }
  // Serve all-gathers until the children close their ends (each round: n blobs in, n*n out).
  std::thread server([&] {
    while (true) {
      std::vector<std::vector<uint8_t>> blobs(n);
      for (int r = 0; r < n; ++r)
        if (!RankLink::recvBlob(parentFd[r], &blobs[r])) return;
      for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q) RankLink::sendBlob(parentFd[r], blobs[q]);
    }
  });
  std::vector<int> status(n, -1);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] < 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        pids[r] = -1;
        --left;
        // A rank that is gone stops the all-gather server from waiting on it.
        shutdown(parentFd[r], SHUT_RDWR);
      }
    }
    if (std::chrono::steady_clock::now() > end) {
      for (int r = 0; r < n; ++r)
        if (pids[r] > 0) {
          fprintf(stderr, "rank %d still running after %d s: killed\n", r, timeoutSec);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          pids[r] = -1;
          --left;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int fd : parentFd) shutdown(fd, SHUT_RDWR);
  server.join();
  for (int fd : parentFd) close(fd);
  return status;
}

}  // namespace test
}  // namespace mkccl
