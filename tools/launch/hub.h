// The hub: serves the host collectives of the processes spawnLocal starts. Every rank sends its
// request (and its data); when all ranks of the world have sent the same request, the hub replies
// to each (allGather: the concatenation; broadcast: the root's data; barrier: nothing).
#pragma once
#include <stdint.h>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mkccl {
namespace launch {

// The wire format between the hub and world.cc.
constexpr uint32_t kHubMagic = 0x42484b4du;  // "MKHB"
enum HubOp : uint32_t { kHubHello = 1, kHubAllGather = 2, kHubBroadcast = 3, kHubBarrier = 4 };
struct HubRequest {
  uint32_t magic, op;
  int32_t rank;
  int32_t arg;     // hello: nranks; broadcast: root
  uint64_t bytes;  // allGather: per rank; broadcast: total (payload from the root only)
  uint64_t seq;    // the rank's count of collectives, so ranks out of step are caught
};
struct HubReply {
  uint32_t magic;
  uint32_t ok;   // 1: payload is the result; 0: payload is the error message
  uint64_t len;
};

class Hub {
 public:
  ~Hub() { stop(); }
  // Listens on loopback and starts serving n ranks; *addr is what MKCCL_LAUNCH_HUB gets.
  int start(int n, std::string* addr, std::string* err);
  // Rank r's process is gone: collectives that wait for it fail instead of hanging.
  void rankExited(int r);
  void stop();

 private:
  struct Conn {
    int fd = -1;
    int rank = -1;
    HubRequest req{};
    size_t got = 0;  // bytes of req, then of payload
    std::vector<char> payload;
    bool ready = false;  // a whole request is here
  };
  void run();
  bool readConn(Conn& c);  // false: drop it
  bool onHello(Conn& c);
  void drop(Conn& c);
  void tryRound();
  void failReady(const std::string& msg);
  bool reply(Conn& c, bool ok, const void* data, uint64_t len);

  int n_ = 0;
  int listenFd_ = -1;
  int stopPipe_[2] = {-1, -1};  // readable once stop() was called: ends every wait
  int wakePipe_[2] = {-1, -1};  // rankExited() news
  std::thread thread_;
  std::mutex mutex_;
  std::vector<bool> exited_;  // by rank, under mutex_
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> byRank_;  // null: not connected
  std::vector<bool> gone_;     // closed its connection, or its process exited
};

}  // namespace launch
}  // namespace mkccl
