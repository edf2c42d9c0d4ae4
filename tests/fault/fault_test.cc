// Fault injection on GPUs: one rank of two dies (SIGKILL) in the middle of a fused op, and the
// survivor must come back within the timeout: its call ends (success if it already had what it
// needed, else an error), the next call fails with an error, mkcclCommAbort returns, and nothing
// hangs, traps or crashes. Each rank is its own process (this program again: fork + exec), because a
// rank's death is a process's death; the launcher (mkccl-run) is not used since it stops every
// rank when one dies.
//
// Two moments of death, for every fused op (and AllReduce, the collective they lean on):
//   - the victim launches first and dies while its kernel waits for the survivor, which launches
//     after the death;
//   - the survivor launches first and the victim dies right after launching, while the survivor's
//     kernel waits for it.
// With two GPUs, one process per GPU. With one, both processes share it (MKCCL_SHARE_GPUS=1, each
// kernel on somewhat under half the SMs, so both fit beside each other): the protocol and its
// deadlines are the same; only the timings mean nothing. Skips (and says so) without a GPU.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include "launch/launch.h"
#include "test_util.h"

namespace mkccl {
namespace test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTimeoutMs = 3000;         // the communicators' timeout
constexpr int kGraceMs = 15000;          // on top of it: the kernel's exit, the stream, a loaded machine
enum class Op { AllGatherGemm, GemmReduceScatter, GemmAllReduce, AllReduce };
const char* opName(Op op) {
  static const char* n[] = {"AllGatherGemm", "GemmReduceScatter", "GemmAllReduce", "AllReduce"};
  return n[(int)op];
}

// Buffers of one rank for one op: large enough that the op takes a while.
struct Buffers {
  size_t M = 4096, N = 4096, K = 4096;
  void *A = nullptr, *W = nullptr, *C = nullptr;
  bool alloc(Op op, int nranks, uint64_t seed, int rank) {
    size_t aRows = op == Op::AllGatherGemm ? M / nranks : M;
    size_t cRows = op == Op::GemmReduceScatter ? M / nranks : M;
    size_t aBytes = aRows * K * 2, wBytes = N * K * 2, cBytes = cRows * N * 2;
    if (op == Op::AllReduce) aBytes = wBytes = cBytes = (64u << 20);
    if (cudaMalloc(&A, aBytes) || cudaMalloc(&W, wBytes) || cudaMalloc(&C, cBytes)) return false;
    fillRandom(A, aBytes / 2, mkcclBfloat16, seed + 2 * rank, 0.5f);
    fillRandom(W, wBytes / 2, mkcclBfloat16, seed + 2 * rank + 1, 0.5f);
    return cudaDeviceSynchronize() == cudaSuccess;
  }
  mkcclResult_t run(Op op, mkcclComm_t comm, cudaStream_t s) {
    switch (op) {
      case Op::AllGatherGemm: return mkcclAllGatherGemm(A, W, C, nullptr, M, N, K, mkcclBfloat16, comm, s);
      case Op::GemmReduceScatter: return mkcclGemmReduceScatter(A, W, C, M, N, K, mkcclBfloat16, comm, s);
      case Op::GemmAllReduce: return mkcclGemmAllReduce(A, W, C, M, N, K, mkcclBfloat16, comm, s);
      case Op::AllReduce: return mkcclAllReduce(A, C, (32u << 20), mkcclBfloat16, mkcclSum, comm, s);
    }
    return mkcclInternalError;
  }
};

// Waits for the stream, bounded; the CUDA result (cudaErrorNotReady: still running at the bound).
cudaError_t waitStream(cudaStream_t s, int boundMs, double* secs) {
  auto t0 = Clock::now();
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) {
    if (std::chrono::duration<double>(Clock::now() - t0).count() * 1000 > boundMs) break;
    usleep(1000);
  }
  *secs = std::chrono::duration<double>(Clock::now() - t0).count();
  return e;
}

bool waitByte(int fd, int ms) {
  pollfd p = {fd, POLLIN, 0};
  char c;
  return poll(&p, 1, ms) == 1 && read(fd, &c, 1) == 1;
}

// Exit codes of a rank process.
enum Exit { kOk = 0, kInitFailed = 10, kWarmupFailed = 11, kNoSignal = 12, kCallHung = 20, kNextCallHung = 21,
            kNextCallSucceeded = 22, kAbortFailed = 23, kStickyCudaError = 24 };

// toVictim and toSurvivor: pipes (read end [0], write end [1]) that order the two moments.
int rankProcess(Op op, const mkcclUniqueId& id, int rank, bool victim, bool victimFirst, const int* toVictim,
                const int* toSurvivor) {
  int gpus = 0;
  cudaError_t ce = cudaGetDeviceCount(&gpus);
  if (ce == cudaSuccess && gpus > 0) ce = cudaSetDevice(rank % gpus);
  if (ce != cudaSuccess || gpus < 1) {
    fprintf(stderr, "rank %d: no usable GPU: %s\n", rank, cudaGetErrorString(ce));
    return kInitFailed;
  }
  mkcclConfig_t cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.timeoutMs = kTimeoutMs;
  if (gpus < 2) {
    // Both ranks' persistent kernels must be resident together (whole clusters of 2).
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) return kInitFailed;
    cfg.maxCtas = (sms / 2 - 8) / 2 * 2;
  }
  mkcclComm_t comm = nullptr;
  if (mkcclCommInitRankConfig(&comm, 2, id, rank, &cfg) != mkcclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, mkcclGetLastError(nullptr));
    return kInitFailed;
  }
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  Buffers b;
  double secs = 0;
  mkcclResult_t async = mkcclSuccess;
  if (!b.alloc(op, 2, 1234, rank) || b.run(op, comm, s) != mkcclSuccess ||
      waitStream(s, kTimeoutMs + kGraceMs, &secs) != cudaSuccess || mkcclCommGetAsyncError(comm, &async) ||
      async != mkcclSuccess) {
    fprintf(stderr, "rank %d: the warm-up %s failed: %s\n", rank, opName(op), mkcclGetLastError(comm));
    return kWarmupFailed;
  }
  if (victim) {
    if (!victimFirst && !waitByte(toVictim[0], 30000)) return kNoSignal;
    b.run(op, comm, s);
    if (victimFirst) {
      usleep(50000);  // its kernel now waits for the survivor
      (void)!write(toSurvivor[1], "x", 1);
    }
    raise(SIGKILL);
  }
  // The survivor.
  if (victimFirst && !waitByte(toSurvivor[0], 30000)) return kNoSignal;
  usleep(victimFirst ? 20000 : 0);  // the victim is gone (or going)
  mkcclResult_t r1 = b.run(op, comm, s);
  if (!victimFirst) {
    usleep(20000);  // our kernel waits for the victim
    (void)!write(toVictim[1], "x", 1);
  }
  cudaError_t e1 = waitStream(s, kTimeoutMs + kGraceMs, &secs);
  mkcclCommGetAsyncError(comm, &async);
  fprintf(stderr, "FAULT %s, victim %s: the call in flight returned %d, ended after %.2f s (cuda: %s), async %d: %s\n",
          opName(op), victimFirst ? "died waiting" : "died after launching", (int)r1, secs, cudaGetErrorString(e1),
          (int)async, mkcclGetLastError(comm));
  if (e1 == cudaErrorNotReady) return kCallHung;
  if (e1 != cudaSuccess) return kStickyCudaError;  // a fault, not a clean error: the kernel must not trap
  // The next call: the peer is certainly gone now.
  auto t0 = Clock::now();
  mkcclResult_t r2 = b.run(op, comm, s);
  cudaError_t e2 = r2 == mkcclSuccess ? waitStream(s, kTimeoutMs + kGraceMs, &secs) : cudaSuccess;
  mkcclResult_t async2 = mkcclSuccess;
  mkcclCommGetAsyncError(comm, &async2);
  double secs2 = std::chrono::duration<double>(Clock::now() - t0).count();
  fprintf(stderr, "FAULT %s: the next call returned %d after %.2f s (cuda: %s), async %d\n", opName(op), (int)r2, secs2,
          cudaGetErrorString(e2), (int)async2);
  if (e2 == cudaErrorNotReady) return kNextCallHung;
  if (e2 != cudaSuccess) return kStickyCudaError;
  if (r2 == mkcclSuccess && async2 == mkcclSuccess) return kNextCallSucceeded;
  t0 = Clock::now();
  mkcclResult_t ra = mkcclCommAbort(comm);
  double secsA = std::chrono::duration<double>(Clock::now() - t0).count();
  if (ra != mkcclSuccess || secsA * 1000 > kTimeoutMs + kGraceMs) return kAbortFailed;
  return kOk;
}

// A rank process is this program again, started by fork + exec: a forked child of a process that
// has touched CUDA (a library, a static initialiser) cannot use CUDA itself. The child finds its
// role in MKCCL_FAULT_RANK and runs it from a global test environment, that is after every static
// initialiser (the CUDA kernels of each file register there) and before any test.
const char* kChildVar = "MKCCL_FAULT_RANK";

class RankRole : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* v = getenv(kChildVar);
    if (!v) return;
    int op, rank, victim, victimFirst, fds[4];
    char hex[2 * sizeof(mkcclUniqueId) + 1];
    if (sscanf(v, "%d %d %d %d %d %d %d %d %256s", &op, &rank, &victim, &victimFirst, &fds[0], &fds[1], &fds[2],
               &fds[3], hex) != 9 || strlen(hex) != 2 * sizeof(mkcclUniqueId))
      _exit(kInitFailed);
    mkcclUniqueId id;
    for (size_t i = 0; i < sizeof(id); i++) sscanf(hex + 2 * i, "%2hhx", reinterpret_cast<unsigned char*>(&id) + i);
    unsetenv(kChildVar);
    fflush(stdout);
    _exit(rankProcess(Op(op), id, rank, victim != 0, victimFirst != 0, fds, fds + 2));
  }
};
::testing::Environment* const kRankRole = ::testing::AddGlobalTestEnvironment(new RankRole);

void faultCase(Op op, bool victimFirst) {
  const int gpus = launch::visibleGpuCount();  // asks in a child: this process must not touch CUDA before fork
  if (gpus < 1) GTEST_SKIP() << "needs a GPU, found none: GPU fault test skipped";
  // Read by the library once, at its first call in this process (below), and inherited by the
  // forked ranks: they share the one GPU.
  if (gpus < 2) setenv("MKCCL_SHARE_GPUS", "1", 1);
  mkcclUniqueId id;
  ASSERT_EQ(mkcclSuccess, mkcclGetUniqueId(&id)) << mkcclGetLastError(nullptr);
  int toVictim[2], toSurvivor[2];
  ASSERT_EQ(0, pipe(toVictim));
  ASSERT_EQ(0, pipe(toSurvivor));
  fflush(stdout);
  fflush(stderr);
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    std::string hex;
    for (size_t i = 0; i < sizeof(id); i++) {
      char b[3];
      snprintf(b, sizeof(b), "%02x", reinterpret_cast<const unsigned char*>(&id)[i]);
      hex += b;
    }
    const std::string role = std::to_string(int(op)) + " " + std::to_string(r) + " " + std::to_string(r == 1) + " " +
                             std::to_string(victimFirst) + " " + std::to_string(toVictim[0]) + " " +
                             std::to_string(toVictim[1]) + " " + std::to_string(toSurvivor[0]) + " " +
                             std::to_string(toSurvivor[1]) + " " + hex;
    pids[r] = fork();
    if (pids[r] == 0) {
      setenv(kChildVar, role.c_str(), 1);
      char self[] = "/proc/self/exe";
      char* argv[] = {self, nullptr};
      execv(self, argv);
      _exit(kInitFailed);
    }
  }
  int st[2] = {-1, -1};
  auto t0 = Clock::now();
  const double limit = 4 * (kTimeoutMs + kGraceMs) / 1000.0 + 60;
  for (int left = 2; left > 0;) {
    for (int r = 0; r < 2; r++) {
      int status = 0;
      if (st[r] == -1 && waitpid(pids[r], &status, WNOHANG) == pids[r]) st[r] = status, left--;
    }
    if (left > 0 && std::chrono::duration<double>(Clock::now() - t0).count() > limit) {
      for (int r = 0; r < 2; r++)
        if (st[r] == -1) kill(pids[r], SIGKILL), waitpid(pids[r], &st[r], 0);
      ADD_FAILURE() << opName(op) << ": a rank process still ran after " << limit << " s";
      break;
    }
    usleep(10000);
  }
  for (int fd : {toVictim[0], toVictim[1], toSurvivor[0], toSurvivor[1]}) close(fd);
  EXPECT_TRUE(WIFSIGNALED(st[1]) && WTERMSIG(st[1]) == SIGKILL) << "the victim: status " << st[1];
  ASSERT_TRUE(WIFEXITED(st[0])) << opName(op) << ": the survivor died: status " << st[0];
  EXPECT_EQ(kOk, WEXITSTATUS(st[0])) << opName(op) << ": the survivor's exit code (see rankProcess's Exit)";
}

class FaultFusedOps : public ::testing::TestWithParam<std::tuple<Op, bool>> {};

TEST_P(FaultFusedOps, OneRankDiesMidOp) { faultCase(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(
    Fault, FaultFusedOps,
    ::testing::Combine(::testing::Values(Op::AllGatherGemm, Op::GemmReduceScatter, Op::GemmAllReduce, Op::AllReduce),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Op, bool>>& i) {
      return std::string(opName(std::get<0>(i.param))) + (std::get<1>(i.param) ? "_VictimWaiting" : "_SurvivorWaiting");
    });

}  // namespace
}  // namespace test
}  // namespace mkccl
