// CUDA graphs: every call with a flag protocol (the collectives, AllGather+GEMM, GEMM+RS/AR, in
// each of their plans) captured once on every rank, then replayed 100 times, each replay followed
// by an eager call of the same op on the same communicator into another buffer: fresh random
// inputs per round, both outputs poisoned, the replay's output compared with the eager one (and
// AllReduce's with a host reference). A replay that reused its capture's sequence number would
// pass on the flags of the round before and read stale or missing data. Also: one graph holding
// several ops, and a capture that would need the symmetric scratch to grow (refused with
// mkcclInvalidUsage, the capture left usable, the communicator too).
// Ranks: two GPUs where there are two, else two ranks sharing GPU 0 (MKCCL_SHARE_GPUS).
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "rank_inputs.h"
#include "rank_threads.h"
#include "test_util.h"

namespace mkccl {
namespace test {
namespace {

constexpr int kReplays = 100;

struct Buf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Buf(size_t b) : bytes(b) { cudaMalloc(&p, b < 16 ? 16 : b); }
  ~Buf() { cudaFree(p); }
  char* c() const { return static_cast<char*>(p); }
};

// The ranks of every test here, made once.
struct World {
  std::unique_ptr<SharedGpus> share;
  std::unique_ptr<InProcessRanks> ranks;
  std::unique_ptr<HostBarrier> barrier;
};
World* g_world = nullptr;

World* world2() {
  if (g_world) return g_world;
  g_world = new World;
  std::vector<int> devs = gpuCount() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
  if (gpusOf(devs) < int(devs.size())) g_world->share.reset(new SharedGpus(devs));
  g_world->ranks.reset(new InProcessRanks(devs));
  g_world->barrier.reset(new HostBarrier(int(devs.size())));
  return g_world;
}

class WorldEnv : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_world) {
      g_world->ranks.reset();
      g_world->share.reset();
      delete g_world;
      g_world = nullptr;
    }
  }
};
const auto* g_env = ::testing::AddGlobalTestEnvironment(new WorldEnv);

// One op of a case on one rank: reads `in` (and `w`, a second input filled once), writes `out`.
using OpFn = std::function<mkcclResult_t(const void* in, const void* w, void* out, mkcclComm_t, cudaStream_t)>;

struct Case {
  std::string name, tuning;
  mkcclDataType_t inType = mkcclFloat32, outType = mkcclFloat32;
  size_t inElems = 0, wElems = 0, outElems = 0;  // per rank
  double tol = 1e-6;                             // relative to the output's largest magnitude
  bool allReduceRef = false;                     // also check the replay against a host sum
  bool registeredOut = false;  // the graph's output from mkcclMemAlloc, registered (the eager one not)
  OpFn op;
};

std::string err(mkcclComm_t c, mkcclResult_t r, const char* what) {
  return std::string(what) + ": " + mkcclGetErrorString(r) + ": " + mkcclGetLastError(c);
}

struct RankBufs {
  std::unique_ptr<Buf> in, w, out[2];
};

// Runs a case on every rank: eager warm-up, capture, kReplays rounds of (fill, poison, replay,
// eager, compare). Returns the first failure of each rank ("" if none).
std::vector<std::string> runCase(const Case& k, uint64_t seed) {
  World* wd = world2();
  InProcessRanks& R = *wd->ranks;
  const int n = R.size();
  std::vector<RankBufs> b(n);
  const size_t ib = k.inElems * typeBytes(k.inType), wb = k.wElems * typeBytes(k.inType),
               ob = k.outElems * typeBytes(k.outType);
  for (int r = 0; r < n; ++r) {
    cudaSetDevice(R.devs[r]);
    b[r].in.reset(new Buf(ib));
    b[r].w.reset(new Buf(wb));
    b[r].out[0].reset(new Buf(ob));
    b[r].out[1].reset(new Buf(ob));
  }
  std::vector<std::string> fails(n);
  std::vector<int> bad(n, 0);
  R.onEveryRank([&](int r) {
    mkcclComm_t comm = R.comms[r];
    cudaStream_t s = R.streams[r];
    HostBarrier& bar = *wd->barrier;
    auto fail = [&](const std::string& m) {
      if (fails[r].empty()) fails[r] = m;
      bad[r] = 1;
    };
    auto anyBad = [&] {
      bar.wait();
      int x = 0;
      for (int q = 0; q < n; ++q) x |= bad[q];
      bar.wait();
      return x != 0;
    };
    void* outs[2] = {b[r].out[0]->p, b[r].out[1]->p};
    void* regMem = nullptr;
    void* regHandle = nullptr;
    if (k.registeredOut) {
      mkcclResult_t e = mkcclMemAlloc(&regMem, ob);
      if (e == mkcclSuccess) e = mkcclCommRegister(comm, regMem, ob, &regHandle);
      if (e != mkcclSuccess) fail(err(comm, e, "registering the output"));
      else outs[0] = regMem;
    }
    auto call = [&](int which) { return k.op(b[r].in->p, b[r].w->p, outs[which], comm, s); };
    mkcclResult_t res = mkcclSetTuning(comm, k.tuning.c_str());
    if (res != mkcclSuccess) fail(err(comm, res, "mkcclSetTuning"));
    fillRandom(b[r].in->p, k.inElems, k.inType, seed ^ (uint64_t(r + 1) << 40), 1.0f, s);
    if (k.wElems) fillRandom(b[r].w->p, k.wElems, k.inType, seed ^ (uint64_t(r + 1) << 48), 1.0f, s);
    // Eager first: plans made and scratch grown before the capture (docs/GRAPHS.md).
    if (!bad[r]) {
      res = call(1);
      if (res != mkcclSuccess) fail(err(comm, res, "eager warm-up"));
    }
    cudaStreamSynchronize(s);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (!anyBad()) {
      if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) fail("begin capture");
      res = call(0);
      const cudaError_t ce = cudaStreamEndCapture(s, &graph);
      if (res != mkcclSuccess) fail(err(comm, res, "captured call"));
      if (ce != cudaSuccess) fail(std::string("end capture: ") + cudaGetErrorString(ce));
      if (graph && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) fail("instantiate");
    }
    std::vector<double> x0, x1;
    for (int i = 0; i < kReplays && !anyBad(); ++i) {
      fillRandom(b[r].in->p, k.inElems, k.inType, seed + 7919ull * uint64_t(i + 1) + (uint64_t(r + 1) << 40), 1.0f,
                 s);
      poison(outs[0], ob, s);
      poison(outs[1], ob, s);
      cudaStreamSynchronize(s);
      bar.wait();  // every rank's inputs are in place before any rank's call reads them
      if (cudaGraphLaunch(exec, s) != cudaSuccess) fail("graph launch");
      res = call(1);  // eager, between replays, on the same communicator
      if (res != mkcclSuccess) fail(err(comm, res, "eager call"));
      const cudaError_t se = cudaStreamSynchronize(s);
      if (se != cudaSuccess) fail(std::string("stream: ") + cudaGetErrorString(se));
      mkcclResult_t async = mkcclSuccess;
      mkcclCommGetAsyncError(comm, &async);
      if (async != mkcclSuccess) fail(std::string("async error: ") + mkcclGetLastError(comm));
      bar.wait();  // every rank done with this round before anyone reads a peer's input
      if (bad[r]) continue;
      x0 = toHostDouble(outs[0], k.outElems, k.outType);
      x1 = toHostDouble(outs[1], k.outElems, k.outType);
      const ErrStats e = compare(x0, x1, k.tol);
      if (e.wrong > 0) {
        char m[256];
        snprintf(m, sizeof(m), "round %d: replay vs eager: %zu of %zu elements differ (first %zu: %g vs %g)", i,
                 e.wrong, k.outElems, e.firstWrong, x0[e.firstWrong], x1[e.firstWrong]);
        fail(m);
      }
      if (k.allReduceRef && (i % 10 == 0 || i == kReplays - 1)) {
        std::vector<double> ref(k.outElems, 0.0);
        for (int q = 0; q < n; ++q) {
          const std::vector<double> x = toHostDouble(b[q].in->p, k.inElems, k.inType);
          for (size_t j = 0; j < k.outElems; ++j) ref[j] += x[j];
        }
        const ErrStats e2 = compare(x0, ref, 1e-5);
        if (e2.wrong > 0) {
          char m[200];
          snprintf(m, sizeof(m), "round %d: replay vs host AllReduce: %zu of %zu elements differ", i, e2.wrong,
                   k.outElems);
          fail(m);
        }
      }
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamSynchronize(s);
    mkcclSetTuning(comm, "");
    if (regHandle) {
      const mkcclResult_t e = mkcclCommDeregister(comm, regHandle);
      if (e != mkcclSuccess) fail(err(comm, e, "mkcclCommDeregister after the graph was destroyed"));
    }
    if (regMem && mkcclMemFree(regMem) != mkcclSuccess) fail(std::string("mkcclMemFree: ") + mkcclGetLastError(nullptr));
  });
  return fails;
}

void expectCase(const Case& k) {
  World* w = world2();
  ASSERT_TRUE(w->ranks->ok());
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("case " + k.name + ", seed " + std::to_string(seed));
  const std::vector<std::string> f = runCase(k, seed);
  for (size_t r = 0; r < f.size(); ++r) EXPECT_EQ("", f[r]) << "rank " << r;
}

int worldSize() { return world2()->ranks->size(); }

Case allReduceCase(const char* name, const char* tuning, size_t count) {
  Case k;
  k.name = name;
  k.tuning = tuning;
  k.inElems = k.outElems = count;
  k.allReduceRef = true;
  k.op = [count](const void* in, const void*, void* out, mkcclComm_t c, cudaStream_t s) {
    return mkcclAllReduce(in, out, count, mkcclFloat32, mkcclSum, c, s);
  };
  return k;
}

// GEMM-family cases: A [rowsA, K] per rank, W [N, K], C [rowsC, N], bf16.
Case gemmCase(const char* name, const char* tuning, size_t rowsA, size_t rowsC, size_t N, size_t K,
              std::function<mkcclResult_t(const void*, const void*, void*, mkcclComm_t, cudaStream_t)> op) {
  Case k;
  k.name = name;
  k.tuning = tuning;
  k.inType = k.outType = mkcclBfloat16;
  k.inElems = rowsA * K;
  k.wElems = N * K;
  k.outElems = rowsC * N;
  k.tol = 2e-2;  // bf16 output; the same plan runs twice, so differences would be reduction order
  k.op = op;
  return k;
}

}  // namespace

TEST(Graphs, AllReduceLL) {
  MKCCL_REQUIRE_GPUS(1);
  expectCase(allReduceCase("allreduce ll", "coll.proto=ll", 3000));
}

TEST(Graphs, AllReduceSimpleOneShot) {
  MKCCL_REQUIRE_GPUS(1);
  expectCase(allReduceCase("allreduce simple oneshot", "coll.proto=simple;allreduce.algo=oneshot", 70001));
}

TEST(Graphs, AllReduceSimpleTwoShot) {
  MKCCL_REQUIRE_GPUS(1);
  expectCase(allReduceCase("allreduce simple twoshot", "coll.proto=simple;allreduce.algo=twoshot", 70002));
}

TEST(Graphs, AllGatherAndReduceScatter) {
  MKCCL_REQUIRE_GPUS(1);
  const int n = worldSize();
  for (const char* tuning : {"coll.proto=ll", "coll.proto=simple"}) {
    Case ag;
    ag.name = std::string("allgather ") + tuning;
    ag.tuning = tuning;
    ag.inType = ag.outType = mkcclBfloat16;
    const size_t cnt = 12345;
    ag.inElems = cnt;
    ag.outElems = cnt * n;
    ag.tol = 0;
    ag.op = [cnt](const void* in, const void*, void* out, mkcclComm_t c, cudaStream_t s) {
      return mkcclAllGather(in, out, cnt, mkcclBfloat16, c, s);
    };
    expectCase(ag);
    // Registered: the replays store straight into the peers' outputs from a block of 1 MiB
    // (kDirectMinBlockBytes), below it they take the staged path.
    for (size_t c : {cnt, size_t(600000)}) {
      Case reg = ag;
      reg.name += " registered, " + std::to_string(c) + " elements";
      reg.registeredOut = true;
      reg.inElems = c;
      reg.outElems = c * n;
      reg.op = [c](const void* in, const void*, void* out, mkcclComm_t cm, cudaStream_t s) {
        return mkcclAllGather(in, out, c, mkcclBfloat16, cm, s);
      };
      expectCase(reg);
    }
    Case rs;
    rs.name = std::string("reducescatter ") + tuning;
    rs.tuning = tuning;
    rs.inElems = cnt * n;
    rs.outElems = cnt;
    rs.op = [cnt](const void* in, const void*, void* out, mkcclComm_t c, cudaStream_t s) {
      return mkcclReduceScatter(in, out, cnt, mkcclFloat32, mkcclSum, c, s);
    };
    expectCase(rs);
  }
}

// AllToAllv whose own block goes LL and whose peer blocks go simple: one call, two kernels that
// share the call's number (the second peeks at it).
TEST(Graphs, AllToAllvTwoProtocols) {
  MKCCL_REQUIRE_GPUS(1);
  const int n = worldSize();
  const size_t small = 1000, big = 400000;  // elements (fp32): 4 KB (LL) and 1.6 MB (simple)
  Case k;
  k.name = "alltoallv ll+simple";
  k.inElems = k.outElems = small + (n - 1) * big;
  k.tol = 0;
  k.op = [n, small, big](const void* in, const void*, void* out, mkcclComm_t c, cudaStream_t s) {
    int r = 0;
    mkcclCommUserRank(c, &r);
    std::vector<size_t> cnt(n), dsp(n);
    size_t off = 0;
    for (int p = 0; p < n; ++p) {
      cnt[p] = p == r ? small : big;
      dsp[p] = off;
      off += cnt[p];
    }
    return mkcclAllToAllv(in, cnt.data(), dsp.data(), out, cnt.data(), dsp.data(), mkcclFloat32, c, s);
  };
  expectCase(k);
}

TEST(Graphs, AllGatherGemm) {
  MKCCL_REQUIRE_GPUS(1);
  const int n = worldSize();
  const size_t M = 256, N = 512, K = 1024;
  // The ce plans (copy engines on side streams, constants only) are captured and replayed too.
  for (const char* tuning : {"ag_gemm.plan=fused", "ag_gemm.plan=sequential", "ag_gemm.plan=auto", "ag_gemm.plan=ce",
                             "ag_gemm.plan=ce;ag_gemm.ce=ring"}) {
    expectCase(gemmCase((std::string("allgather+gemm ") + tuning).c_str(), tuning, M / n, M, N, K,
                        [=](const void* A, const void* W, void* C, mkcclComm_t c, cudaStream_t s) {
                          return mkcclAllGatherGemm(A, W, C, nullptr, M, N, K, mkcclBfloat16, c, s);
                        }));
  }
}

TEST(Graphs, GemmReduceScatter) {
  MKCCL_REQUIRE_GPUS(1);
  const int n = worldSize();
  const size_t M = 256, N = 512, K = 768;
  for (const char* tuning : {"gemm_rs.plan=fused", "gemm_rs.plan=sequential", "gemm_rs.plan=fused;gemm_rs.push=ce"}) {
    expectCase(gemmCase((std::string("gemm+rs ") + tuning).c_str(), tuning, M, M / n, N, K,
                        [=](const void* A, const void* W, void* C, mkcclComm_t c, cudaStream_t s) {
                          return mkcclGemmReduceScatter(A, W, C, M, N, K, mkcclBfloat16, c, s);
                        }));
  }
}

TEST(Graphs, GemmAllReduce) {
  MKCCL_REQUIRE_GPUS(1);
  const size_t M = 128, N = 1024, K = 512;
  for (const char* tuning :
       {"gemm_ar.plan=fused", "gemm_ar.plan=rs_ag", "gemm_ar.plan=sequential", "gemm_ar.plan=fused;gemm_ar.push=ce"}) {
    expectCase(gemmCase((std::string("gemm+ar ") + tuning).c_str(), tuning, M, M, N, K,
                        [=](const void* A, const void* W, void* C, mkcclComm_t c, cudaStream_t s) {
                          return mkcclGemmAllReduce(A, W, C, M, N, K, mkcclBfloat16, c, s);
                        }));
  }
}

// A decode step's shape of use: one graph of several ops (AllGather+GEMM, GEMM+AllReduce and a
// small AllReduce), its replays interleaved with eager calls of other ops.
TEST(Graphs, OneGraphOfSeveralOps) {
  MKCCL_REQUIRE_GPUS(1);
  const int n = worldSize();
  const size_t M = 128, N = 512, K = 512;
  Case k = gemmCase("ag_gemm then gemm_ar then allreduce", "", M / n, M, N, K, nullptr);
  k.outElems = M * N + M * N;  // the AllGather+GEMM's C, then the GEMM+AllReduce's C
  k.wElems = N * K + N * K;
  k.op = [=](const void* A, const void* W, void* out, mkcclComm_t c, cudaStream_t s) {
    char* C1 = static_cast<char*>(out);
    char* C2 = C1 + M * N * 2;
    const char* W2 = static_cast<const char*>(W) + N * K * 2;
    mkcclResult_t r = mkcclAllGatherGemm(A, W, C1, nullptr, M, N, K, mkcclBfloat16, c, s);
    if (r != mkcclSuccess) return r;
    // C1 [M, N] as the next GEMM's A (K2 = N): each rank its own partial product.
    r = mkcclGemmAllReduce(C1, W2, C2, M, K, N, mkcclBfloat16, c, s);
    if (r != mkcclSuccess) return r;
    return mkcclAllReduce(C2, C2, M * K, mkcclBfloat16, mkcclSum, c, s);
  };
  k.outElems = M * N + M * K;
  k.wElems = N * K + K * N;
  k.tol = 5e-2;
  expectCase(k);
}

// Registration errors, each refused with a message on every rank and the communicator usable
// after: a buffer not from mkcclMemAlloc (on one rank: that rank mkcclInvalidArgument, the other
// mkcclInvalidUsage), a second registration of an overlapping range, an unknown handle,
// mkcclMemFree of registered memory and of foreign memory, and deregistration while a captured
// graph that uses the registration exists (allowed once it is destroyed).
TEST(Graphs, RegistrationErrors) {
  MKCCL_REQUIRE_GPUS(1);
  World* w = world2();
  ASSERT_TRUE(w->ranks->ok());
  InProcessRanks& R = *w->ranks;
  const int n = R.size();
  const size_t cnt = 4096, bytes = cnt * 4 * n;
  std::vector<std::string> fails(n);
  R.onEveryRank([&](int r) {
    mkcclComm_t c = R.comms[r];
    cudaStream_t s = R.streams[r];
    HostBarrier& bar = *w->barrier;
    auto expect = [&](mkcclResult_t got, mkcclResult_t want, const char* what) {
      if (got != want && fails[r].empty())
        fails[r] = std::string(what) + ": got " + mkcclGetErrorString(got) + " (" + mkcclGetLastError(c) +
                   "), want " + mkcclGetErrorString(want);
    };
    void* foreign = nullptr;
    cudaMalloc(&foreign, bytes);
    void* mem = nullptr;
    expect(mkcclMemAlloc(&mem, bytes), mkcclSuccess, "mkcclMemAlloc");
    void* h = nullptr;
    // Rank 0 passes cudaMalloc memory: refused there, and on every other rank because of it.
    expect(mkcclCommRegister(c, r == 0 ? foreign : mem, bytes, &h), r == 0 ? mkcclInvalidArgument : mkcclInvalidUsage,
           "register a foreign pointer on rank 0");
    expect(mkcclCommRegister(c, mem, bytes, &h), mkcclSuccess, "register");
    void* h2 = nullptr;
    expect(mkcclCommRegister(c, static_cast<char*>(mem) + 256, 1024, &h2), mkcclInvalidUsage, "register twice");
    expect(mkcclCommDeregister(c, foreign), mkcclInvalidArgument, "deregister an unknown handle");
    expect(mkcclMemFree(mem), mkcclInvalidUsage, "mkcclMemFree while registered");
    expect(mkcclMemFree(foreign), mkcclInvalidArgument, "mkcclMemFree of cudaMalloc memory");
    // A graph whose AllGather stores into the registration.
    void* send = nullptr;
    cudaMalloc(&send, cnt * 4);
    fillRandom(send, cnt, mkcclFloat32, 99 + r, 1.0f, s);
    cudaStreamSynchronize(s);
    bar.wait();
    cudaGraph_t g = nullptr;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    expect(mkcclAllGather(send, mem, cnt, mkcclFloat32, c, s), mkcclSuccess, "captured AllGather");
    if (cudaStreamEndCapture(s, &g) != cudaSuccess && fails[r].empty()) fails[r] = "end capture";
    bar.wait();
    expect(mkcclCommDeregister(c, h), mkcclInvalidUsage, "deregister while a captured graph uses it");
    if (g) {
      cudaGraphExec_t x = nullptr;
      if (cudaGraphInstantiate(&x, g, 0) == cudaSuccess) {
        cudaGraphLaunch(x, s);
        cudaStreamSynchronize(s);
        cudaGraphExecDestroy(x);
      }
      cudaGraphDestroy(g);
    }
    cudaStreamSynchronize(s);
    bar.wait();
    expect(mkcclCommDeregister(c, h), mkcclSuccess, "deregister after the graph was destroyed");
    expect(mkcclMemFree(mem), mkcclSuccess, "mkcclMemFree after deregistration");
    // Still usable.
    void* out = nullptr;
    cudaMalloc(&out, bytes);
    expect(mkcclAllGather(send, out, cnt, mkcclFloat32, c, s), mkcclSuccess, "AllGather after the errors");
    if (cudaStreamSynchronize(s) != cudaSuccess && fails[r].empty()) fails[r] = "stream after the errors";
    mkcclResult_t async = mkcclSuccess;
    mkcclCommGetAsyncError(c, &async);
    if (async != mkcclSuccess && fails[r].empty()) fails[r] = std::string("async error: ") + mkcclGetLastError(c);
    cudaFree(out);
    cudaFree(send);
    cudaFree(foreign);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ("", fails[r]) << "rank " << r;
}

// A captured call that would have to grow the symmetric scratch is refused with
// mkcclInvalidUsage; the capture stays valid (nothing was enqueued) and the communicator usable:
// the same call eagerly grows the scratch.
TEST(Graphs, ScratchGrowthUnderCaptureRefused) {
  MKCCL_REQUIRE_GPUS(1);
  World* w = world2();
  ASSERT_TRUE(w->ranks->ok());
  InProcessRanks& R = *w->ranks;
  const int n = R.size();
  const size_t M = 4096, N = 256, K = 8192;  // a gathered A of 64 MiB: larger than any case before
  std::vector<std::string> fails(n);
  std::vector<std::unique_ptr<Buf>> A(n), W(n), C(n);
  for (int r = 0; r < n; ++r) {
    cudaSetDevice(R.devs[r]);
    A[r].reset(new Buf(M / n * K * 2));
    W[r].reset(new Buf(N * K * 2));
    C[r].reset(new Buf(M * N * 2));
  }
  R.onEveryRank([&](int r) {
    mkcclComm_t c = R.comms[r];
    cudaStream_t s = R.streams[r];
    fillRandom(A[r]->p, M / n * K, mkcclBfloat16, 1 + r, 1.0f, s);
    fillRandom(W[r]->p, N * K, mkcclBfloat16, 11 + r, 1.0f, s);
    cudaStreamSynchronize(s);
    cudaGraph_t g = nullptr;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    const mkcclResult_t res = mkcclAllGatherGemm(A[r]->p, W[r]->p, C[r]->p, nullptr, M, N, K, mkcclBfloat16, c, s);
    const cudaError_t ce = cudaStreamEndCapture(s, &g);
    if (res != mkcclInvalidUsage)
      fails[r] = std::string("captured growth returned ") + mkcclGetErrorString(res) + " (want mkcclInvalidUsage)";
    else if (std::string(mkcclGetLastError(c)).find("eager call") == std::string::npos)
      fails[r] = std::string("message does not say what to do: ") + mkcclGetLastError(c);
    if (ce != cudaSuccess) fails[r] += std::string("; capture broken: ") + cudaGetErrorString(ce);
    if (g) cudaGraphDestroy(g);
    w->barrier->wait();
    const mkcclResult_t e = mkcclAllGatherGemm(A[r]->p, W[r]->p, C[r]->p, nullptr, M, N, K, mkcclBfloat16, c, s);
    if (e != mkcclSuccess) fails[r] += std::string("; eager call after: ") + mkcclGetLastError(c);
    if (cudaStreamSynchronize(s) != cudaSuccess) fails[r] += "; stream failed";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ("", fails[r]) << "rank " << r;
}

}  // namespace test
}  // namespace mkccl
