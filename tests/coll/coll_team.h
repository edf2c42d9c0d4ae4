// The ranks a collective test runs on: every GPU of this process, one thread per rank (a single
// process), or this process's one rank (under mkccl-run / mpirun). Communicators are made once per
// configuration and kept for the whole test binary.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <functional>
#include <string>
#include <vector>
#include "mkccl.h"

namespace mkccl {
namespace test {

struct Rank {
  int rank = 0, nranks = 1, device = 0;
  mkcclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

enum class TeamKind {
  kDefault,        // default config
  kSingle,         // a 1-rank communicator per process
  kSmallWs,        // workspaceBytes 4 MiB: large calls pipeline through a small ring
  kFewCtas,        // maxCtas 2: every CTA runs every role of several channels
  kOneCta,         // maxCtas 1
};

class Team {
 public:
  // The team of a kind (made on first use). Null with *why when it cannot be made.
  static Team* get(TeamKind kind, std::string* why);
  static void destroyAll();

  int nranks() const { return nranks_; }
  bool multiProcess() const { return multiProcess_; }
  // Runs fn on every rank of the team (threads in one process, or this process's rank). fn returns
  // "" or what went wrong. Returns "" when every rank succeeded, else the first failure (every
  // process of a multi-process team gets the same verdict).
  std::string run(const std::function<std::string(Rank&)>& fn);
  // Sets the tuning of every rank's communicator (mkcclSetTuning); "" or what went wrong.
  std::string tune(const std::string& tuning);
  // The same 64-bit value on every rank (fresh per call): seeds of a test step.
  uint64_t sharedSeed();

 private:
  std::vector<Rank> ranks_;  // this process's ranks
  int nranks_ = 0;
  bool multiProcess_ = false;
};

}  // namespace test
}  // namespace mkccl
