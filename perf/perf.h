// mkccl-perf: the op interface. Each op lives in its own perf/op_*.cc and registers itself with
// MKCCL_PERF_OP; the framework (perf/main.cc, perf/framework.cc) parses arguments, sets up ranks,
// communicator, stream, cuBLAS and the dlopen'd NCCL, prints the table and writes the JSON.
#pragma once
#include <cuda_runtime.h>
#include <functional>
#include <map>
#include <string>
#include <vector>
#include "mkccl.h"

typedef struct cublasContext* cublasHandle_t;

namespace mkccl {
namespace perf {

struct Shape {
  size_t m = 0, n = 0, k = 0;
};

struct Args {
  std::string op;
  size_t minBytes = 8, maxBytes = 128ull << 20;  // -b / -e
  double factor = 2;                              // -f
  int iters = 20, warmup = 5;                     // -n / -w
  mkcclDataType_t dtype = mkcclBfloat16;          // -d
  mkcclRedOp_t redop = mkcclSum;                  // -o
  int check = 1;                                  // -c
  std::string json;                               // --json FILE
  std::vector<Shape> shapes;                      // -m/-n/-k or --shapes "MxNxK,..."
  bool baseline = true;                           // --no-baseline turns it off
};

struct Nccl;  // function table of the dlopen'd libnccl.so.2 (perf/nccl_loader.h)

struct Env {
  int rank = 0, nranks = 1, localRank = 0, device = 0;
  mkcclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  const Nccl* nccl = nullptr;  // null when NCCL could not be loaded (baseline then skipped)
  void* ncclComm = nullptr;    // ncclComm_t
};

// One row of the table / JSON "results" entry.
struct Result {
  std::string op;
  int worldSize = 1;
  std::string dtype;
  bool hasShape = false;
  Shape shape;
  size_t bytes = 0;
  size_t count = 0;
  double timeUs = 0;
  std::string baseline;          // e.g. "nccl", "cublas", "nccl+cublas"
  double baselineTimeUs = -1;    // < 0: not measured
  double busbwGbps = -1;         // < 0: not applicable
  double algbwGbps = -1;
  double maxRelErr = 0;
  long long wrong = 0;
  std::map<std::string, double> extra;  // gemm_alone_us, comm_alone_us, floor_us, floor_ratio, tflops...
  std::string note;                     // e.g. the plan chosen
};

// Returns 0 on success; non-zero (with a message on stderr) on failure.
using OpFn = int (*)(const Args&, Env&, std::vector<Result>*);

struct OpRegistrar {
  OpRegistrar(const char* name, OpFn fn, const char* help);
};
#define MKCCL_PERF_OP(name, fn, help) static ::mkccl::perf::OpRegistrar mkccl_perf_reg_##fn(name, fn, help)

// Median time in microseconds of `launch(i)` over iters runs after warmup runs, each run timed with
// CUDA events on `stream`. `i` counts runs so callers can rotate input buffers.
double timeMedianUs(const std::function<void(int)>& launch, int warmup, int iters, cudaStream_t stream);

}  // namespace perf
}  // namespace mkccl
