// libFuzzer target of the bootstrap wire: the same cases as the fork-per-case driver
// (wire_case.h), in process, coverage-guided; any outcome but clean (or a clean error from a peer
// holding the id) aborts, and libFuzzer keeps the input. A hang is libFuzzer's -timeout.
//   bootstrap_wire_libfuzzer -max_total_time=60 -timeout=10 [corpus dir]
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include "wire_case.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mkccl::fuzz::CaseReport r = mkccl::fuzz::runWireCase(data, size);
  if (r.outcome != mkccl::fuzz::Outcome::Clean && r.outcome != mkccl::fuzz::Outcome::CleanError) {
    fprintf(stderr, "bootstrap wire: %s: %s\n", mkccl::fuzz::outcomeName(r.outcome), r.detail.c_str());
    abort();
  }
  return 0;
}
