// The world of processes a multi-process program (test, mkccl-perf) runs in, and how it got
// launched: by tools/mkccl-run (or `mkccl-perf -g N`), by mpirun, or alone. Used only by the
// project's tools and tests, never by libmkccl: the library itself needs nothing but the unique id.
#pragma once
#include <stddef.h>
#include <string>
#include <vector>

namespace mkccl {
namespace launch {

struct World {
  int rank = 0, nranks = 1;
  int localRank = 0, localRanks = 1;  // on this host
  std::string how = "single";         // "single", "mkccl-run" or "mpirun"
};

// Discovers the world from the environment (MKCCL_LAUNCH_* set by the launcher; OMPI_COMM_WORLD_*
// or PMI_* under mpirun, then MPI is initialised if the tools were built with it). Idempotent.
// Returns 0, or non-zero with a message in *err (e.g. mpirun without MPI support built in).
int worldInit(World* w, std::string* err);
const World& world();  // after worldInit

// Host collectives among the world's processes (not the library's: for exchanging the unique id,
// results and pass/fail). out receives nranks blocks of `bytes`, block r from rank r.
int worldAllGather(const void* in, size_t bytes, void* out, std::string* err);
int worldBroadcast(void* data, size_t bytes, int root, std::string* err);
int worldBarrier(std::string* err);
void worldFinalize();

// Starts n copies of argv[0..] with MKCCL_LAUNCH_* set (ranks 0..n-1 on this host) and serves
// their host collectives; waits for all. If one fails or is killed, the others are killed after
// a grace period. Returns the first non-zero exit status (128+signal for a signal), else 0; 127
// when argv[0] cannot be executed. Children get SIGKILL if the calling thread dies first. One line
// on stderr per rank that failed ("mkccl-run: rank 2 exited with status 1").
struct SpawnOptions {
  int timeoutSec = 0;  // 0: none; else kill everything after this long and return 124
  bool quiet = false;  // no launcher messages on stderr
};
int spawnLocal(int n, const std::vector<std::string>& argv, const SpawnOptions& opt);

// Number of CUDA devices visible (0 where there is no driver or no GPU), without initialising
// a CUDA context in this process (safe to call before fork).
int visibleGpuCount();

}  // namespace launch
}  // namespace mkccl
