// mkccl-perf's entry: parse, launch or join the world of ranks, run the op, report (framework.cc).
#pragma once

namespace mkccl {
namespace perf {

// Returns the process exit status: 0 ok, 1 failure or wrong results, 2 bad arguments.
int run(int argc, char** argv);

}  // namespace perf
}  // namespace mkccl
