// mkccl-run: starts N copies of a program on this host, one per GPU, and serves their host
// collectives (tools/launch). Exit status: the first failing rank's (128+signal when killed), 124
// on --timeout, 77 when --skip-if-fewer-gpus finds too few GPUs, 2 for a usage error.
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>
#include "launch/launch.h"

namespace {

constexpr int kMaxProcs = 1024;

void usage(FILE* out) {
  fprintf(out,
          "usage: mkccl-run -n N [--skip-if-fewer-gpus] [--timeout SEC] [--] program [args...]\n"
          "  -n N                  start N processes (ranks 0..N-1) on this host, N in [1, %d]\n"
          "  --skip-if-fewer-gpus  exit 77 (a skipped test for ctest) when fewer than N GPUs are visible\n"
          "  --timeout SEC         kill every rank after SEC seconds and exit 124\n"
          "Each rank gets MKCCL_LAUNCH_RANK, _NRANKS, _LOCAL_RANK, _LOCAL_RANKS and _HUB in its environment.\n",
          kMaxProcs);
}

int usageError(const char* fmt, const char* arg) {
  fprintf(stderr, "mkccl-run: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  usage(stderr);
  return 2;
}

bool parseCount(const char* s, long lo, long hi, int* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (*end || v < lo || v > hi) return false;
  *out = (int)v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0, timeoutSec = 0;
  bool skipIfFewer = false;
  int i = 1;
  for (; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--") {
      i++;
      break;
    }
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    }
    if (a == "-n" || a == "-np" || (a.size() > 2 && a.compare(0, 2, "-n") == 0 && isdigit((unsigned char)a[2]))) {
      bool attached = a != "-n" && a != "-np";  // "-n4"
      const char* v = attached ? argv[i] + 2 : (i + 1 < argc ? argv[++i] : nullptr);
      if (!v) return usageError("%s needs a number", a.c_str());
      if (!parseCount(v, 1, kMaxProcs, &n)) return usageError("bad process count \"%s\"", v);
    } else if (a == "--timeout" || a.compare(0, 10, "--timeout=") == 0) {
      const char* v = a.size() > 9 ? argv[i] + 10 : (i + 1 < argc ? argv[++i] : nullptr);
      if (!v) return usageError("%s needs a number of seconds", "--timeout");
      if (!parseCount(v, 0, 1 << 24, &timeoutSec)) return usageError("bad timeout \"%s\" (seconds)", v);
    } else if (a == "--skip-if-fewer-gpus") {
      skipIfFewer = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError("unknown option %s", a.c_str());
    } else {
      break;  // the program
    }
  }
  if (n == 0) return usageError("%s", "-n N is required");
  if (i >= argc) return usageError("%s", "no program given");

  if (skipIfFewer) {
    int gpus = mkccl::launch::visibleGpuCount();
    if (gpus < n) {
      printf("mkccl-run: SKIP: %d processes need %d GPUs, found %d\n", n, n, gpus);
      fflush(stdout);
      return 77;
    }
  }
  std::vector<std::string> prog(argv + i, argv + argc);
  mkccl::launch::SpawnOptions opt;
  opt.timeoutSec = timeoutSec;
  return mkccl::launch::spawnLocal(n, prog, opt);
}
