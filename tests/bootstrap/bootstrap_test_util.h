// Helpers of the bootstrap tests: ranks as threads or forked processes, fresh random data that
// every rank can regenerate from (seed, rank), environment guards, fd/thread counts.
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include "runtime/bootstrap.h"

namespace mkccl {
namespace test {

// A fresh seed per run; MKCCL_TEST_SEED=<n> replays one.
uint64_t freshSeed();
// `bytes` pseudo-random bytes, a function of (seed, stream) only.
std::vector<char> randomBytes(uint64_t seed, uint64_t stream, size_t bytes);
uint64_t rand64(uint64_t seed, uint64_t stream);

// Sets (or, with nullptr, unsets) an environment variable for the scope, and re-reads the settings
// (base/settings.h) as a communicator init would.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value);
  ~EnvGuard();

 private:
  std::string name_, old_;
  bool had_;
};

double secondsSince(std::chrono::steady_clock::time_point t0);

// fn(rank) in n threads; returns fn's results by rank.
std::vector<int> runThreads(int n, const std::function<int(int)>& fn);
// fn(rank) in n forked processes (exit status = fn's result, 0..255). Children still running after
// timeoutMs are killed. Returns the exit statuses, or 128+signal for a child killed by a signal.
std::vector<int> runProcesses(int n, const std::function<int(int)>& fn, int timeoutMs);
// The same with a root made by makeRoot in this process after the children are forked (each gets
// its id through a pipe): a process must not fork while its root thread runs.
std::vector<int> runProcessesWithRoot(int n, const std::function<mkcclUniqueId()>& makeRoot,
                                      const std::function<int(const mkcclUniqueId&, int)>& fn, int timeoutMs);

// Every collective and send/recv pattern with fresh random data; returns the number of mismatches
// (each printed to stderr with the rank, the operation and the seed). `big` adds MiB-sized payloads.
int exerciseBootstrap(Bootstrap& b, uint64_t seed, bool big);

// Rendezvous of n ranks on id plus exerciseBootstrap; 0 when all is well (for runThreads/Processes).
int rendezvousAndExercise(const mkcclUniqueId& id, int rank, int n, uint64_t seed, int timeoutMs, bool big);

// An id with no root behind it (a closed loopback port), for the id checks.
mkcclUniqueId idWithoutRoot();
// A loopback TCP port below the ephemeral range that was free a moment ago.
int freeLoopbackPort();

int countOpenFds();
int countThreads();
// Waits (up to timeoutMs) until no root service runs and the thread count is back to `threads`.
bool waitQuiet(int threads, int timeoutMs);

const char* resultName(int r);

}  // namespace test
}  // namespace mkccl
