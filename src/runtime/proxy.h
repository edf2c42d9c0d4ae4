// The proxy thread: drains this rank's device->host FIFO into transport posts, batching per peer,
// polls completions, raises arrival flags, and turns every failure into the communicator's async
// error plus a released GPU (the FIFO's error word; the caller's error sink sets the abort flag
// every device wait watches). Knows nothing of CUDA or the communicator: the tests drive it with a
// CPU producer and host memory.
#pragma once
#include <stdint.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include "mkccl.h"
#include "runtime/proxy_fifo.h"
#include "transport/net.h"

namespace mkccl {

// Copies between the GPU window and its host mirror, for transports that cannot reach GPU memory.
// Copies of one direction complete in the order they were issued.
class Stager {
 public:
  virtual ~Stager() = default;
  // Starts copying [off, off+bytes): window -> mirror (toHost) or mirror -> window. *ticket counts
  // copies of that direction from 0.
  virtual mkcclResult_t copy(bool toHost, uint64_t off, uint64_t bytes, uint64_t* ticket) = 0;
  // How many copies of that direction have completed.
  virtual mkcclResult_t completed(bool toHost, uint64_t* count) = 0;
};

// Host memory on both sides: copies are memcpy, done at once (tests, benchmarks).
class MemcpyStager final : public Stager {
 public:
  MemcpyStager(char* window, char* mirror) : window_(window), mirror_(mirror) {}
  mkcclResult_t copy(bool toHost, uint64_t off, uint64_t bytes, uint64_t* ticket) override;
  mkcclResult_t completed(bool toHost, uint64_t* count) override {
    *count = issued_[toHost ? 1 : 0];
    return mkcclSuccess;
  }

 private:
  char* window_;
  char* mirror_;
  uint64_t issued_[2] = {0, 0};
};

struct ProxyOptions {
  int rank = 0, nranks = 1;
  int flagsPerPeer = 0;
  int timeoutMs = 60000;      // a put that does not complete by then fails the communicator
  uint64_t windowBytes = 0;
  uint64_t* flags = nullptr;  // arrival flags the proxy raises (host-visible); null: the transport writes them
  Stager* stager = nullptr;   // non-null: stage every transfer through host memory
  // Called before raising flags of arrivals that the NIC wrote straight into GPU memory (GPUDirect
  // RDMA: the writes must be visible to the GPU before the flag is); null when not needed.
  std::function<mkcclResult_t()> flushRemoteWrites;
  std::vector<int> cpus;      // pin the thread here (topology's choice); empty: no pinning
  int maxInFlight = 1024;     // puts consumed and not completed; beyond it the FIFO fills up
};

using ProxyErrorSink = std::function<void(mkcclResult_t, const std::string&)>;

class Proxy {
 public:
  Proxy(const ProxyOptions& o, FifoReader* fifo, net::Transport* transport, ProxyErrorSink sink);
  ~Proxy();

  mkcclResult_t start();
  // Asks the thread to stop; true once it has exited and been joined, false if it did not exit
  // within timeoutMs (the thread is then left running detached and this object must be leaked).
  bool stop(int timeoutMs);
  // One round of work (the thread's loop body; tests may drive it directly). True if anything moved.
  bool progress();

  bool failed() const { return failed_.load(); }
  uint64_t puts() const { return puts_; }
  uint64_t arrivals() const { return arrivals_; }
  uint64_t posts() const { return posts_; }  // transport post calls (batching: puts / posts)

 private:
  struct Staged {
    net::PutOp op;    // stage-out: the put waiting for its copy
    net::Event ev;    // stage-in: the arrival waiting for its copy
    uint64_t ticket;
  };
  struct InFlight {
    int peer;
    uint64_t bytes;
    std::chrono::steady_clock::time_point since;
  };

  void loop();
  void fail(mkcclResult_t res, const std::string& msg);
  bool consume();
  bool postQueued();
  bool reap();
  bool drainStaging();
  void checkTimeouts();
  void raiseFlag(const net::Event& ev);

  ProxyOptions o_;
  FifoReader* fifo_;
  net::Transport* t_;
  ProxyErrorSink sink_;
  bool transportWritesFlags_ = false;

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex exitMutex_;
  std::condition_variable exitCv_;
  bool exited_ = false;

  std::vector<std::vector<net::PutOp>> queued_;  // per peer: ready to post, in order
  std::vector<int> busyPeers_;                   // peers with something queued
  std::deque<Staged> stageOut_, stageIn_;
  std::unordered_map<uint64_t, InFlight> inFlight_;  // by ticket
  std::vector<uint64_t> sendClock_;  // per peer: last value sent (extends the FIFO's 32-bit values)
  std::vector<uint64_t> recvClock_;  // per sender: last value raised
  std::vector<uint64_t> shadow_;     // last value raised per flag
  std::vector<net::Event> events_;
  uint64_t rounds_ = 0;
  uint64_t puts_ = 0, arrivals_ = 0, posts_ = 0;
};

}  // namespace mkccl
