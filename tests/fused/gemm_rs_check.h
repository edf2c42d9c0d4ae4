// Inputs and references of the GEMM+ReduceScatter / GEMM+AllReduce tests.
//
// Rank q of a world of ws holds A_q [M, Kr] and W_q [N, Kr], random from seeds derived from
// (seed, q): any rank can regenerate any other rank's share. The reference is the whole product
// A [M, ws*Kr] . W [N, ws*Kr]^T (the shares side by side along K) through cuBLAS with an fp32
// output, i.e. sum_q A_q . W_q^T.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"
#include "test_util.h"

namespace mkccl {
namespace test {

struct ReduceShape {
  size_t M, N, Kr;  // Kr: each rank's share of K
};

// One rank's device buffers of a call: its A and W shares and its output (RS: M/ws rows; AR: M).
struct ReduceBuffers {
  void* A = nullptr;
  void* W = nullptr;
  void* C = nullptr;
  size_t cRows = 0;
  ReduceBuffers() = default;
  ReduceBuffers(const ReduceBuffers&) = delete;
  ReduceBuffers& operator=(const ReduceBuffers&) = delete;
  ~ReduceBuffers();
};

// Allocates on the current device, fills A and W with rank `rank`'s random share and poisons C.
void makeRankBuffers(ReduceBuffers* b, const ReduceShape& s, mkcclDataType_t t, uint64_t seed, int rank, int ws,
                     bool allReduce);

// Rows [row0, row0 + rows) of sum_q A_q . W_q^T (host doubles, row-major), computed on the current
// device.
std::vector<double> referenceRows(const ReduceShape& s, mkcclDataType_t t, uint64_t seed, int ws, size_t row0,
                                  size_t rows);

// The output against the reference rows (relative to the reference's largest magnitude).
ErrStats checkOutput(const void* C, size_t rows, size_t N, mkcclDataType_t t, const std::vector<double>& ref);

// The op under test.
mkcclResult_t runReduceOp(bool allReduce, const ReduceBuffers& b, const ReduceShape& s, mkcclDataType_t t,
                          mkcclComm_t comm, cudaStream_t stream);

// The op's tuning for a run (ops/tuner/tuning.h): keys of gemm_rs.* (gemm_ar.* for the
// AllReduce) and gemm.variant; null fields are left to the tuner.
struct Tune {
  const char* plan = nullptr;
  const char* push = nullptr;
  const char* variant = nullptr;
  const char* order = nullptr;
  const char* publish = nullptr;
  const char* ceBatch = nullptr;
  const char* ceStreams = nullptr;
  const char* reduce = nullptr;
  std::string str(bool allReduce) const;
};
// Sets comm's tuning to t (every rank of a call must have the same plan, push and order).
void setTune(mkcclComm_t comm, bool allReduce, const Tune& t);

// The test bodies shared by gemm_rs_test.cc (allReduce = false) and gemm_ar_test.cc (true).
// World tests run on one communicator over the process world (alone: a world of 1); in-process
// tests skip under a launcher.
void worldShapes(bool allReduce);        // odd shapes x plans (tiles, orders) x types against the reference
void worldBackToBack(bool allReduce);    // >= 50 calls queued back to back, plans interleaved
void worldBadArguments(bool allReduce);  // argument errors, then a valid call still works
void inProcessWorlds(bool allReduce);    // mkcclCommInitAll over 1, 2 and all GPUs
void inProcessOneThread(bool allReduce);  // every rank's calls from one thread, auto plan
void inProcessTimeout(bool allReduce);    // a rank that never joins: bounded wait, clean exit, error
// Ranks sharing GPUs (SharedGpus, rank_threads.h): 2-4 ranks on one GPU, or 3 and 4 on two: the
// world sizes beyond the GPUs at hand, for correctness only.
void inProcessSharedGpus(bool allReduce);

// Relative-error tolerance of a bf16/fp16 result (partials are rounded to the input type once
// before they are summed; see docs/GEMM_RS_AR.md).
constexpr double kTolerance = 1e-2;

}  // namespace test
}  // namespace mkccl
