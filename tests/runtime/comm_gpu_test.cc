// Communicators on GPUs: init in one process (mkcclCommInitAll) and one process per GPU, the
// symmetric workspace proven by AllGather (any size, larger than the workspace, in place), 1000
// back-to-back calls with no resets, a device wait that times out, abort, non-blocking init,
// destroy twice / use after destroy, and argument checks that need real device memory.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include <thread>
#include "test_util.h"

using namespace mkccl::test;

namespace {

// Expected AllGather output block of rank r: fillRandom(seed + r) regenerated on this device.
std::vector<double> expectedBlock(size_t count, mkcclDataType_t t, uint64_t seed, int r) {
  const size_t es = mkcclFloat64 == t ? 8 : (t == mkcclFloat32 || t == mkcclInt32) ? 4 : (t == mkcclInt8) ? 1 : 2;
  void* tmp = nullptr;
  EXPECT_EQ(cudaSuccess, cudaMalloc(&tmp, count * es + 16));
  fillRandom(tmp, count, t, seed + r);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  std::vector<double> v = toHostDouble(tmp, count, t);
  cudaFree(tmp);
  return v;
}

size_t esize(mkcclDataType_t t) {
  return t == mkcclFloat64 ? 8 : (t == mkcclFloat32 || t == mkcclInt32) ? 4 : t == mkcclInt8 ? 1 : 2;
}

// One AllGather on `comm` (this process's rank), checked against every rank's regenerated input.
void checkAllGather(mkcclComm_t comm, int rank, int nranks, size_t count, mkcclDataType_t t, bool inPlace,
                    uint64_t seed) {
  const size_t es = esize(t);
  char *send = nullptr, *recv = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&recv, nranks * count * es + 16));
  poison(recv, nranks * count * es);
  if (inPlace) {
    send = recv + rank * count * es;
  } else {
    ASSERT_EQ(cudaSuccess, cudaMalloc(&send, count * es + 16));
  }
  fillRandom(send, count, t, seed + rank);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  ASSERT_EQ(mkcclSuccess, mkcclAllGather(send, recv, count, t, comm, 0)) << mkcclGetLastError(comm);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  mkcclResult_t async;
  ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comm, &async));
  ASSERT_EQ(mkcclSuccess, async) << mkcclGetLastError(comm);
  std::vector<double> got = toHostDouble(recv, nranks * count, t);
  for (int r = 0; r < nranks; ++r) {
    std::vector<double> ref = expectedBlock(count, t, seed, r);
    std::vector<double> part(got.begin() + r * count, got.begin() + (r + 1) * count);
    ErrStats st = compare(part, ref, 0.0);
    EXPECT_EQ(0u, st.wrong) << "block of rank " << r << ", count " << count << ", first wrong " << st.firstWrong;
  }
  if (!inPlace) cudaFree(send);
  cudaFree(recv);
}

bool multiProcess() { return world().nranks > 1; }

// ---------------- one process per GPU (also run alone: a world of 1) ----------------

TEST(CommWorld, InitQueriesAndAllGather) {
  MKCCL_REQUIRE_GPUS(1);
  const auto& w = world();
  if (gpuCount() < w.localRanks) GTEST_SKIP() << "fewer GPUs than processes on this host";
  mkcclConfig_t cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.workspaceBytes = 4 << 20;  // small, so that large calls pipeline through it
  mkcclComm_t comm = worldComm(&cfg);
  ASSERT_NE(nullptr, comm);
  int n = -1, r = -1, d = -1;
  EXPECT_EQ(mkcclSuccess, mkcclCommCount(comm, &n));
  EXPECT_EQ(mkcclSuccess, mkcclCommUserRank(comm, &r));
  EXPECT_EQ(mkcclSuccess, mkcclCommCuDevice(comm, &d));
  EXPECT_EQ(w.nranks, n);
  EXPECT_EQ(w.rank, r);
  EXPECT_EQ(w.localRank % gpuCount(), d);
  uint64_t seed = 0;
  if (w.rank == 0) seed = freshSeed();
  std::string err;
  ASSERT_EQ(0, mkccl::launch::worldBroadcast(&seed, sizeof(seed), 0, &err)) << err;
  struct Case {
    size_t count;
    mkcclDataType_t t;
  } cases[] = {{1, mkcclInt8}, {7, mkcclInt8}, {4097, mkcclFloat16}, {(1 << 20) + 3, mkcclFloat32},
               {(3 << 20) + 5, mkcclBfloat16} /* > the 4 MiB workspace per rank */};
  for (const Case& c : cases)
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(testing::Message() << "count " << c.count << " in place " << inPlace);
      checkAllGather(comm, w.rank, w.nranks, c.count, c.t, inPlace, seed += 1000);
    }
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
  // Destroy twice, use after destroy: errors, not crashes.
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommDestroy(comm));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGather(nullptr, nullptr, 1, mkcclInt8, comm, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommCount(comm, &n));
}

TEST(CommWorld, ThousandBackToBackCalls) {
  MKCCL_REQUIRE_GPUS(1);
  const auto& w = world();
  if (gpuCount() < w.localRanks) GTEST_SKIP() << "fewer GPUs than processes on this host";
  mkcclComm_t comm = worldComm();
  ASSERT_NE(nullptr, comm);
  const int calls = 1000;
  const size_t count = 96;  // floats per rank per call
  float *in = nullptr, *out = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&in, calls * count * sizeof(float)));
  ASSERT_EQ(cudaSuccess, cudaMalloc(&out, (size_t)calls * w.nranks * count * sizeof(float)));
  poison(out, (size_t)calls * w.nranks * count * sizeof(float));
  uint64_t seed = 0;
  if (w.rank == 0) seed = freshSeed();
  std::string err;
  ASSERT_EQ(0, mkccl::launch::worldBroadcast(&seed, sizeof(seed), 0, &err)) << err;
  fillRandom(in, calls * count, mkcclFloat32, seed + w.rank);
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  for (int i = 0; i < calls; ++i)
    ASSERT_EQ(mkcclSuccess, mkcclAllGather(in + i * count, out + (size_t)i * w.nranks * count, count, mkcclFloat32,
                                           comm, s))
        << "call " << i << ": " << mkcclGetLastError(comm);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  mkcclResult_t async;
  ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comm, &async));
  ASSERT_EQ(mkcclSuccess, async) << mkcclGetLastError(comm);
  std::vector<double> got = toHostDouble(out, (size_t)calls * w.nranks * count, mkcclFloat32);
  size_t wrong = 0;
  for (int r = 0; r < w.nranks; ++r) {
    std::vector<double> ref = expectedBlock(calls * count, mkcclFloat32, seed, r);
    for (int i = 0; i < calls; ++i)
      for (size_t k = 0; k < count; ++k)
        wrong += got[((size_t)i * w.nranks + r) * count + k] != ref[i * count + k];
  }
  EXPECT_EQ(0u, wrong);
  cudaStreamDestroy(s);
  cudaFree(in);
  cudaFree(out);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

TEST(CommWorld, ArgumentsThatNeedDeviceMemory) {
  MKCCL_REQUIRE_GPUS(1);
  const auto& w = world();
  if (gpuCount() < w.localRanks) GTEST_SKIP() << "fewer GPUs than processes on this host";
  mkcclComm_t comm = worldComm();
  ASSERT_NE(nullptr, comm);
  float* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 1024 * sizeof(float)));
  std::vector<float> host(1024 * w.nranks);
  // Host memory, a buffer too small for the call, an invalid type, a bad stream: argument errors.
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGather(host.data(), d, 4, mkcclFloat32, comm, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGather(d, d + 512, 1024, mkcclFloat32, comm, 0));
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("past the end"));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGather(d, d, 4, (mkcclDataType_t)77, comm, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllReduce(d, d + 1, 4, mkcclFloat32, mkcclSum, comm, 0));  // partial overlap
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllReduce(d, d, 4, mkcclFloat32, (mkcclRedOp_t)9, comm, 0));
  // A tuning override with a value it does not take: refused where it is set, naming the key, and
  // the communicator keeps its tuning.
  const char* const bad[][2] = {{"coll.proto=fast", "coll.proto"},
                                {"coll.channels=0", "coll.channels"},
                                {"coll.slots=4x", "coll.slots"},
                                {"allreduce.algo=ring", "allreduce.algo"},
                                {"coll.protocol=ll", "unknown key"}};
  for (const auto& b : bad) {
    EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(comm, b[0])) << b[0];
    EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find(b[1])) << mkcclGetLastError(nullptr);
  }
  // A count of 0 is a no-op that still checks the communicator.
  EXPECT_EQ(mkcclSuccess, mkcclAllGather(nullptr, nullptr, 0, mkcclFloat32, comm, 0));
  // The comm is still healthy after rejected calls: a real call works.
  if (w.nranks == 1) {
    EXPECT_EQ(mkcclSuccess, mkcclAllGather(d, d + 512, 4, mkcclFloat32, comm, 0)) << mkcclGetLastError(comm);
    EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  }
  cudaFree(d);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

// ---------------- in one process (skipped under mkccl-run: every process would do it) ----------------

TEST(CommInProcess, InitAllAndAllGather) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  const int n = gpuCount();
  for (int ranks = 1; ranks <= n; ranks *= 2) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks");
    std::vector<mkcclComm_t> comms(ranks);
    ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(comms.data(), ranks, nullptr)) << mkcclGetLastError(nullptr);
    const uint64_t seed = freshSeed();
    const size_t count = 12345;
    std::vector<float*> send(ranks), recv(ranks);
    for (int r = 0; r < ranks; ++r) {
      cudaSetDevice(r);
      ASSERT_EQ(cudaSuccess, cudaMalloc(&send[r], count * 4));
      ASSERT_EQ(cudaSuccess, cudaMalloc(&recv[r], count * 4 * ranks));
      fillRandom(send[r], count, mkcclFloat32, seed + r);
      poison(recv[r], count * 4 * ranks);
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    }
    // Launches are asynchronous: one thread can drive every rank.
    for (int r = 0; r < ranks; ++r)
      ASSERT_EQ(mkcclSuccess, mkcclAllGather(send[r], recv[r], count, mkcclFloat32, comms[r], 0))
          << mkcclGetLastError(comms[r]);
    for (int r = 0; r < ranks; ++r) {
      cudaSetDevice(r);
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
      std::vector<double> got = toHostDouble(recv[r], count * ranks, mkcclFloat32);
      for (int q = 0; q < ranks; ++q) {
        std::vector<double> ref = expectedBlock(count, mkcclFloat32, seed, q);
        std::vector<double> part(got.begin() + q * count, got.begin() + (q + 1) * count);
        EXPECT_EQ(0u, compare(part, ref, 0.0).wrong) << "rank " << r << " block " << q;
      }
      cudaFree(send[r]);
      cudaFree(recv[r]);
    }
    for (auto c : comms) EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(c));
  }
}

TEST(CommInProcess, NonBlockingInit) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  const int ranks = std::min(gpuCount(), 2);
  mkcclUniqueId id;
  ASSERT_EQ(mkcclSuccess, mkcclGetUniqueId(&id));
  std::vector<mkcclComm_t> comms(ranks, nullptr);
  mkcclConfig_t cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  for (int r = 0; r < ranks; ++r) {
    cudaSetDevice(r);
    mkcclResult_t res = mkcclCommInitRankConfig(&comms[r], ranks, id, r, &cfg);
    ASSERT_TRUE(res == mkcclInProgress || res == mkcclSuccess) << mkcclGetErrorString(res);
    ASSERT_NE(nullptr, comms[r]);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < ranks; ++r) {
    mkcclResult_t state = mkcclInProgress;
    while (state == mkcclInProgress && std::chrono::steady_clock::now() < until) {
      ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comms[r], &state));
      if (state == mkcclInProgress) {
        int n;
        EXPECT_EQ(mkcclInvalidUsage, mkcclCommCount(comms[r], &n)) << "queries wait for init";
        usleep(1000);
      }
    }
    ASSERT_EQ(mkcclSuccess, state) << mkcclGetLastError(comms[r]);
  }
  for (auto c : comms) EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(c));
}

// A rank that never joins a call: the other's device wait times out, the kernel leaves cleanly,
// and the error reaches mkcclCommGetAsyncError and the next call.
TEST(CommInProcess, DeviceWaitTimesOut) {
  MKCCL_REQUIRE_GPUS(2);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  setenv("MKCCL_TIMEOUT_MS", "700", 1);
  mkcclComm_t comms[2];
  mkcclResult_t init = mkcclCommInitAll(comms, 2, nullptr);
  unsetenv("MKCCL_TIMEOUT_MS");
  ASSERT_EQ(mkcclSuccess, init) << mkcclGetLastError(nullptr);
  cudaSetDevice(0);
  float* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 4096 * 4));
  fillRandom(d, 4096, mkcclFloat32, freshSeed());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(mkcclSuccess, mkcclAllGather(d, d + 2048, 1024, mkcclFloat32, comms[0], 0)) << mkcclGetLastError(comms[0]);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize()) << "the kernel must exit cleanly (no trap)";
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(secs, 0.6);
  EXPECT_LT(secs, 10.0);
  mkcclResult_t async = mkcclSuccess;
  ASSERT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comms[0], &async));
  EXPECT_EQ(mkcclTimeout, async);
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(comms[0])).find("gave up")) << mkcclGetLastError(comms[0]);
  EXPECT_EQ(mkcclTimeout, mkcclAllGather(d, d + 2048, 1024, mkcclFloat32, comms[0], 0));
  EXPECT_EQ(mkcclSuccess, mkcclCommAbort(comms[0]));
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comms[1]));
  cudaFree(d);
}

// Abort makes a kernel that waits for a peer give up at once, not after the timeout.
TEST(CommInProcess, AbortReleasesAWaitingKernel) {
  MKCCL_REQUIRE_GPUS(2);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  mkcclComm_t comms[2];
  ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(comms, 2, nullptr)) << mkcclGetLastError(nullptr);  // 60 s timeout
  cudaSetDevice(0);
  float* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 4096 * 4));
  fillRandom(d, 4096, mkcclFloat32, freshSeed());
  ASSERT_EQ(mkcclSuccess, mkcclAllGather(d, d + 2048, 1024, mkcclFloat32, comms[0], 0));
  usleep(200000);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(mkcclSuccess, mkcclCommAbort(comms[0]));
  cudaSetDevice(0);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 5.0) << "abort must not wait for the 60 s timeout";
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comms[1]));
  cudaFree(d);
}

TEST(CommInProcess, StreamOfAnotherDevice) {
  MKCCL_REQUIRE_GPUS(2);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  mkcclComm_t comm;
  int dev = 0;
  ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(&comm, 1, &dev));
  cudaSetDevice(1);
  cudaStream_t s1;
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&s1));
  cudaSetDevice(0);
  float* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, 4096));
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGather(d, d + 512, 4, mkcclFloat32, comm, s1));
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(nullptr)).find("device 1"));
  // Another device's memory is rejected too.
  cudaSetDevice(1);
  float* d1 = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d1, 4096));
  cudaSetDevice(0);
  EXPECT_EQ(mkcclInvalidArgument, mkcclAllGather(d1, d, 4, mkcclFloat32, comm, 0));
  cudaFree(d);
  cudaFree(d1);
  cudaStreamDestroy(s1);
  EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm));
}

TEST(CommInProcess, SameGpuTwiceIsRejected) {
  MKCCL_REQUIRE_GPUS(1);
  if (multiProcess()) GTEST_SKIP() << "in-process test: runs when the test runs alone";
  mkcclUniqueId id;
  ASSERT_EQ(mkcclSuccess, mkcclGetUniqueId(&id));
  mkcclResult_t res[2];
  mkcclComm_t comms[2] = {nullptr, nullptr};
  std::thread t[2];
  for (int r = 0; r < 2; ++r)
    t[r] = std::thread([&, r] {
      cudaSetDevice(0);
      res[r] = mkcclCommInitRank(&comms[r], 2, id, r);
    });
  for (auto& x : t) x.join();
  EXPECT_EQ(mkcclInvalidUsage, res[0]);
  EXPECT_EQ(mkcclInvalidUsage, res[1]);
  EXPECT_EQ(nullptr, comms[0]);
}

}  // namespace
