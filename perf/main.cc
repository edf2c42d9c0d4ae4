// mkccl-perf: see `mkccl-perf --help` and perf/perf.h.
#include "framework.h"

int main(int argc, char** argv) { return mkccl::perf::run(argc, argv); }
