// One case of the bootstrap wire fuzzer: bytes decoded into a script of hostile connections (to the
// root, or to rank 0's listening port; from a stranger or from a peer holding the id), played
// against a real rendezvous of 2 or 3 ranks with a short timeout, and judged.
//
// Used by the fork-per-case driver (wire_fuzz_main.cc, ctest and CI) and by the libFuzzer target
// (wire_libfuzzer.cc), so that both explore the same thing.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string>

namespace mkccl {
namespace fuzz {

enum class Outcome : int {
  Clean = 0,       // the rendezvous succeeded as if nothing happened (or, with the id, ended in time)
  CleanError = 1,  // a peer holding the id broke the rules: every rank returned an error within the bound
  Broken = 2,      // a stranger (no id) made the rendezvous fail or stall
  Hang = 3,        // a wait outlived its deadline: a rank or the root still ran past timeout + grace
  Spin = 4,        // the process burnt CPU while waiting (more than 0.3 s + 30% of the wall time)
  Leak = 5,        // descriptors or threads left once everything ended
  Crash = 6,       // set by the driver: the case died by a signal or a sanitizer report
  Count = 7
};
const char* outcomeName(Outcome o);

struct CaseReport {
  Outcome outcome = Outcome::Clean;
  std::string detail;  // what was played and what went wrong
};

// The rendezvous timeout of a case, ms (the root's and the ranks').
constexpr int kCaseTimeoutMs = 400;

CaseReport runWireCase(const uint8_t* data, size_t size);

}  // namespace fuzz
}  // namespace mkccl
