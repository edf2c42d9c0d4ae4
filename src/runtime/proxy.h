// The proxy thread: drains this rank's device->host FIFO into transport posts, batching per peer,
// polls completions, raises arrival flags, and turns every failure into the communicator's async
// error plus a released GPU (the FIFO's error word; the caller's error sink sets the abort flag
// every device wait watches). Knows nothing of CUDA or the communicator: the tests drive it with a
// CPU producer and host memory.
//
// It must never wait for the GPU: a kernel of the communicator may be spinning on an arrival that
// only this thread can raise. With a Stager it issues asynchronous copies on streams of its own
// and polls them; without one (the production path: transports that reach GPU memory, or a
// host-mapped window) it makes no CUDA call at all while kernels run.
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
  // The communicator's device error code (host-mapped; null: none). When a kernel gives up a wait,
  // the proxy logs its own state once (WARN), so the log says how far the network path got.
  const volatile int* deviceError = nullptr;
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
  uint64_t puts() const { return st_.puts.load(); }
  uint64_t arrivals() const { return st_.arrivals.load(); }
  uint64_t posts() const { return st_.postCalls.load(); }  // transport post calls (batching: puts / posts)

  // Where the work stands, stage by stage, readable from any thread while the proxy runs: when a
  // kernel waits for an arrival that never comes, this says which stage stopped (see describe()).
  struct Stats {
    std::atomic<uint64_t> commands{0};      // FIFO commands consumed (tickets [0, commands))
    std::atomic<uint64_t> puts{0};          // of which puts (the rest: no-ops)
    std::atomic<uint64_t> stagedOut{0};     // puts whose GPU->host staging copy completed
    std::atomic<uint64_t> posted{0};        // puts accepted by the transport
    std::atomic<uint64_t> postCalls{0};     // transport post calls
    std::atomic<uint64_t> sendDone{0};      // puts completed locally (source reusable)
    std::atomic<uint64_t> arrivals{0};      // arrival events from the transport
    std::atomic<uint64_t> stagedIn{0};      // arrivals whose host->GPU staging copy completed
    std::atomic<uint64_t> flagsRaised{0};   // arrival flags written
    std::atomic<uint64_t> lastFlagIdx{0};   // sender * flagsPerPeer + flag of the last flag written
    std::atomic<uint64_t> lastFlagValue{0}; // and its value
  };
  const Stats& stats() const { return st_; }
  // One line: the counters above, the FIFO's tail and done, and the failure if any.
  std::string describe() const;

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
  Stats st_;
  std::atomic<uint64_t> fifoTail_{0}, fifoDone_{0};  // copies of the reader's, for describe()
  bool deviceErrorLogged_ = false;
  mutable std::mutex failMutex_;
  std::string failMsg_;
};

}  // namespace mkccl
