// mkccl-perf: the op interface. Each op lives in its own perf/op_*.cc and registers itself with
// MKCCL_PERF_OP (ops swept over sizes, -b/-e/-f) or MKCCL_PERF_SHAPE_OP (ops over -m/-n/-k or
// --shapes); the framework (perf/main.cc, perf/framework.cc) parses arguments, sets up ranks,
// communicator, stream, cuBLAS and the dlopen'd NCCL, prints the table and writes the JSON.
//
// An op runs on every rank (one process per GPU) and reports rows in the same order on every rank,
// either through env.emit(row) as it goes (printed at once) or by appending to its output vector
// (printed when it returns). The framework combines a row over the ranks: time and baseline time
// are the max of the ranks' medians, max_rel_err the max, wrong the sum; algbw/busbw are then
// computed from the combined time when the row has bytes and busFactor.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <functional>
#include <initializer_list>
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
  bool shapeOp = false;                           // the op takes shapes (-n is N, iterations are --iters)
  size_t minBytes = 8, maxBytes = 128ull << 20;  // -b / -e
  double factor = 2;                              // -f
  int iters = 20, warmup = 5;                     // -n / -w
  mkcclDataType_t dtype = mkcclBfloat16;          // -d
  mkcclRedOp_t redop = mkcclSum;                  // -o
  int check = 1;                                  // -c
  std::string json;                               // --json FILE
  std::vector<Shape> shapes;                      // -m/-n/-k or --shapes "MxNxK,..."
  bool baseline = true;                           // --no-baseline turns it off
  int gpus = 0;                                   // -g: processes to launch on this host (0: as launched)
  std::string ncclLib;                            // --nccl-lib (else MKCCL_PERF_NCCL_LIB, else search)
  uint64_t seed = 0;                              // --seed (0: fresh per run)
  int graphCalls = 0;                             // -G N: also time N calls captured in one CUDA graph
  int registered = 0;                             // -R 1: also time registered buffers (collectives)
  int rounds = 4;                                 // --rounds: blocks per candidate in timeAlternating
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
  double busFactor = -1;         // busbw = algbw * busFactor (nccl-tests' factors); < 0: none
  std::string redop;             // reductions: "sum", ... (printed and in the JSON)
  double maxRelErr = 0;
  long long wrong = 0;
  std::map<std::string, double> extra;  // gemm_alone_us, comm_alone_us, floor_us, floor_ratio, tflops...
  std::string note;                     // e.g. the plan chosen
};

struct Nccl;  // function table of the dlopen'd libnccl.so.2 (perf/nccl_loader.h)

struct Env {
  int rank = 0, nranks = 1, localRank = 0, device = 0;
  mkcclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  const Nccl* nccl = nullptr;  // null when NCCL could not be loaded (baseline then skipped)
  void* ncclComm = nullptr;    // ncclComm_t
  std::string deviceName;
  // The node of every rank, as the library sees it: hosts in order of first appearance, or
  // rank / MKCCL_RANKS_PER_NODE where that is set (emulated nodes).
  std::vector<int> node;
  // Combines a finished row over the ranks, prints it (rank 0) and keeps it for the JSON. Every
  // rank must call it for the same rows in the same order (it is a host collective).
  std::function<void(const Result&)> emit;
};

// Returns 0 on success; non-zero (with a message on stderr) on failure.
using OpFn = int (*)(const Args&, Env&, std::vector<Result>*);

struct OpRegistrar {
  OpRegistrar(const char* name, OpFn fn, const char* help, bool shapeOp = false);
};
#define MKCCL_PERF_OP(name, fn, help) static ::mkccl::perf::OpRegistrar mkccl_perf_reg_##fn(name, fn, help)
#define MKCCL_PERF_SHAPE_OP(name, fn, help) \
  static ::mkccl::perf::OpRegistrar mkccl_perf_reg_##fn(name, fn, help, true)

struct OpInfo {
  std::string name, help;
  OpFn fn = nullptr;
  bool shapeOp = false;
};
// Registered ops, sorted by name; findOp returns null for an unknown name.
std::vector<OpInfo> registeredOps();
const OpInfo* findOp(const std::string& name);

// Median time in microseconds of `launch(i)` over iters runs after warmup runs, each run timed with
// CUDA events on `stream`. `i` counts runs so callers can rotate input buffers. The timed runs are
// queued behind a short spin kernel, so each event pair measures the GPU's work and not the
// host's enqueue time (as nccl-tests' batched timing does).
double timeMedianUs(const std::function<void(int)>& launch, int warmup, int iters, cudaStream_t stream);

// -G: the per-call median time of `launch(i)`, i = 0 .. calls-1 captured once into one CUDA graph
// (each op's buffers rotate with i, as in timeMedianUs), the graph replayed warmup times, then
// iters times each between CUDA events (behind the same spin kernel); -1 when a call or the
// capture failed. The capture is thread-local: other ranks' threads keep working.
double timeGraphMedianUs(const std::function<void(int)>& launch, int calls, int warmup, int iters,
                         cudaStream_t stream);

// -G for the fused ops: the eager calls and the replays of one graph of `calls` calls timed in
// alternating blocks (rounds of iters/rounds each; per-call medians over all rounds), so that a
// drift of the GPU's clocks over the run (long GEMMs run into the power limit) weighs on both
// alike. false when a call or the capture failed.
bool timeEagerAndGraphUs(const std::function<void(int)>& launch, int calls, int warmup, int iters, int rounds,
                         cudaStream_t stream, double* eagerUs, double* graphUs);

// One thing timeAlternating times: `launch(i)` is one run (i counts the candidate's runs, to rotate
// inputs). Optional: `before` is enqueued untimed before the candidate's warm-up and before each of
// its blocks (e.g. the dispatch whose layout a timed combine reuses, since the other candidates'
// runs change it); `tuned` applies ScopedTuning(comm, tuning) around its warm-up and blocks ("": the
// user's MKCCL_TUNING; comm nullptr: the process's); with `comm` set the communicator's
// asynchronous error is checked after each block. `us` (the median over all rounds) and `failed`
// are the results.
struct Candidate {
  std::string name;
  std::function<void(int)> launch;
  std::function<void()> before;
  bool tuned = false;
  std::string tuning;
  mkcclComm_t comm = nullptr;
  double us = -1;
  bool failed = false;
  Candidate(std::string name, std::function<void(int)> launch);
  // Our call under the tuning `tuning` (forced plan; "" for the library's choice) on `comm`.
  Candidate(std::string name, std::function<void(int)> launch, mkcclComm_t comm, std::string tuning);
};

// Times every candidate under the same conditions: all are warmed up (warmup runs each), then in
// each of `rounds` rounds every candidate, in the order given, runs a block of its share of `iters`
// timed runs (behind the spin kernel, one event pair per run, as in timeMedianUs); each candidate's
// `us` is the median of its runs over all rounds. Timed one after another, a candidate timed later
// in a long run sees lower clocks (long GEMMs drive the GPU into its power limit): alternating
// blocks spread that drift over all of them alike. rounds 1 times each in one block, in sequence.
// Every rank must pass the same candidates in the same order (their collectives then match).
// Returns false at the first candidate that fails (its `failed` set, a message on stderr naming it;
// the candidates not yet timed keep us = -1).
bool timeAlternating(std::vector<Candidate>& candidates, int warmup, int iters, int rounds, cudaStream_t stream);
// "timing: alternating, N rounds", for a result's note.
std::string timingNote(int rounds);

// The tuner's overrides for a scope (keys of ops/tuner/tuning.h, e.g. "ag_gemm.plan=ce"): the
// user's MKCCL_TUNING followed by `extra` (a key given twice: the later wins), set on `comm`
// (nullptr: the process's, which mkcclGemm uses), restored to the user's after.
struct ScopedTuning {
  ScopedTuning(mkcclComm_t comm, const std::string& extra);
  ~ScopedTuning();
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;
  bool ok() const { return ok_; }

 private:
  mkcclComm_t comm_;
  bool ok_ = false;
};
// The user's MKCCL_TUNING ("" if unset): what a result ran with besides its forced keys.
std::string userTuning();

// Our call timed with a plan forced through the tuner: timeMedianUs of `launch` under
// ScopedTuning(comm, extra). Sets *failed when the tuning was refused, the timing failed or the
// communicator reports an asynchronous error.
double timeWithTuning(const std::string& extra, const std::function<void(int)>& launch, int warmup, int iters,
                      cudaStream_t stream, mkcclComm_t comm, bool* failed);

// Helpers for ops.
const char* dtypeName(mkcclDataType_t t);   // "bf16", ...
const char* redopName(mkcclRedOp_t op);     // "sum", ...
size_t dtypeSize(mkcclDataType_t t);

}  // namespace perf
}  // namespace mkccl
