// Shared helpers of the GoogleTest suites: GPU presence and skips, the multi-process world,
// communicators for it, device buffers, random inputs, poisoned outputs and relative-error
// comparison.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "launch/launch.h"
#include "mkccl.h"

namespace mkccl {
namespace test {

// Number of usable CUDA GPUs (0 without a driver/GPU). Cached.
int gpuCount();

// Skips the current test with a message when fewer than n GPUs exist.
#define MKCCL_REQUIRE_GPUS(n)                                                                  \
  do {                                                                                         \
    if (::mkccl::test::gpuCount() < (n))                                                       \
      GTEST_SKIP() << "needs " << (n) << " GPU(s), found " << ::mkccl::test::gpuCount()       \
                   << ": GPU test skipped";                                                    \
  } while (0)

// The process world (mkccl-run / mpirun / single). Initialised on first use.
const launch::World& world();
// Skips unless the world has exactly/at least n ranks.
#define MKCCL_REQUIRE_WORLD_MIN(n)                                                              \
  do {                                                                                          \
    if (::mkccl::test::world().nranks < (n))                                                    \
      GTEST_SKIP() << "needs >= " << (n) << " processes (run under mkccl-run -n " << (n) << ")"; \
  } while (0)

// A communicator over the whole world, one GPU per process (device = localRank). The unique id
// is made by rank 0 and shared through the world's host collectives. EXPECTs success.
mkcclComm_t worldComm(const mkcclConfig_t* config = nullptr);
// World host collectives for tests: logical AND of `ok` over all ranks (so every rank fails together).
bool worldAllOk(bool ok);

// Host-side error check of a CUDA runtime call inside a test.
#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call << ": " << cudaGetErrorString(cudaGetLastError())
#define MKCCL_OK(comm, call) ASSERT_EQ(mkcclSuccess, (call)) << #call << ": " << mkcclGetLastError(comm)

// A fresh seed per run (time and pid based; printed with the test so a failure can be replayed
// with MKCCL_TEST_SEED=<seed>).
uint64_t freshSeed();

// Multiprocessors of the current device (0 without one).
int smCount();

// Device fills (on the current device, on `stream`). Values are uniform in [-scale, scale),
// never all zero; integers in [-100, 100]. count is in elements of `t`.
void fillRandom(void* dptr, size_t count, mkcclDataType_t t, uint64_t seed, float scale = 1.0f,
                cudaStream_t stream = 0);
// Writes a NaN/0xFF.. pattern so any element left unwritten is caught by a comparison.
void poison(void* dptr, size_t bytes, cudaStream_t stream = 0);

// A device allocation on the current device, freed with its owner; p stays null when cudaMalloc
// fails (the tests ASSERT p). Sized at construction, or default-constructed and alloc()ed later
// (members of a per-rank struct). Not copyable: a copy would free the buffer twice.
struct DeviceBuf {
  void* p = nullptr;
  size_t bytes = 0;
  DeviceBuf() = default;
  explicit DeviceBuf(size_t n) { alloc(n); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  ~DeviceBuf() { cudaFree(p); }
  void alloc(size_t n) {
    bytes = n;
    if (cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
  }
};

// Host conversions for references.
float toFloat(const void* p, size_t i, mkcclDataType_t t);
std::vector<double> toHostDouble(const void* dptr, size_t count, mkcclDataType_t t);

// max |a-b| / max(|ref|_inf, tiny), and count of elements whose error exceeds tol*|ref|_inf
// (NaN counts as wrong).
struct ErrStats {
  double maxRelErr = 0;
  size_t wrong = 0;
  size_t firstWrong = (size_t)-1;
};
ErrStats compare(const std::vector<double>& got, const std::vector<double>& ref, double tol);

// C[M,N] = A[M,K] · W[N,K]^T through cuBLAS in fp32 accumulation, C in outType.
void cublasGemmRef(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                   mkcclDataType_t outType, cudaStream_t stream = 0);

}  // namespace test
}  // namespace mkccl
