// graph_bench: eager calls against the same calls replayed from a CUDA graph, and (the collectives)
// unregistered against registered send and receive buffers, for ranks of ONE process (a thread per rank):
// two GPUs where there are two, else two ranks sharing GPU 0 (MKCCL_SHARE_GPUS; then the kernels
// of both ranks share the SMs: a relative figure, not the 2-GPU one). mkccl-perf -G / -R measure
// the same thing with one process per GPU; this tool exists because two processes on one GPU
// time-slice (no concurrent kernels without MPS) and their numbers mean nothing.
//
// Method (nccl-tests -G): per item, every rank: 3 eager warm-up calls; then 15 repetitions, each
// after a host barrier of the ranks, of 20 calls enqueued back to back between two CUDA events
// (eager); then the 20 calls captured once into one graph, replayed the same 15 times (graph).
// Inputs alternate between two buffer sets. Per-call time = event time / 20; the median over the
// repetitions per rank, the max over ranks. Registered rows: the auto rule (reg: in place only at
// blocks >= coll.direct_bytes) and the in-place path forced (reg_on: coll.direct=on), so that both
// sides of the cut are timed. Usage: graph_bench [out.json]; MKCCL_COMMIT names the
// commit in the JSON.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "mkccl.h"
#include "rank_threads.h"
#include "test_util.h"

using namespace mkccl::test;

namespace {

constexpr int kCalls = 20, kReps = 15, kWarm = 3;

struct Row {
  std::string op, note;
  size_t bytes = 0, M = 0, N = 0, K = 0;
  double eager = -1, graph = -1, regEager = -1, regGraph = -1, onEager = -1, onGraph = -1;
};

// A call of the item on a rank: set i of its buffers; reg: the registered buffers.
using Call = std::function<mkcclResult_t(int r, int set, bool reg, mkcclComm_t, cudaStream_t)>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

struct Bench {
  InProcessRanks* R;
  HostBarrier* bar;
  int n;

  // Per-call median (max over ranks) of eager and graph runs of `call`; -1 on failure.
  void time(const Call& call, bool reg, double* eagerUs, double* graphUs) {
    std::vector<double> e(n, -1), g(n, -1);
    std::vector<int> bad(n, 0);
    R->onEveryRank([&](int r) {
      mkcclComm_t c = R->comms[r];
      cudaStream_t s = R->streams[r];
      auto ok = [&](mkcclResult_t x) {
        if (x != mkcclSuccess && !bad[r]) {
          fprintf(stderr, "graph_bench: rank %d: %s\n", r, mkcclGetLastError(c));
          bad[r] = 1;
        }
      };
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      for (int i = 0; i < kWarm; ++i) ok(call(r, i & 1, reg, c, s));
      cudaStreamSynchronize(s);
      std::vector<double> te, tg;
      for (int k = 0; k < kReps; ++k) {
        bar->wait();
        cudaEventRecord(a, s);
        for (int i = 0; i < kCalls && !bad[r]; ++i) ok(call(r, i & 1, reg, c, s));
        cudaEventRecord(b, s);
        cudaStreamSynchronize(s);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        te.push_back(ms * 1000.0 / kCalls);
      }
      bar->wait();
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
      for (int i = 0; i < kCalls; ++i) ok(call(r, i & 1, reg, c, s));
      if (cudaStreamEndCapture(s, &graph) != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
        bad[r] = 1;
      bar->wait();
      if (exec) {
        cudaGraphLaunch(exec, s);  // warm-up (uploads the graph)
        cudaStreamSynchronize(s);
        for (int k = 0; k < kReps; ++k) {
          bar->wait();
          cudaEventRecord(a, s);
          cudaGraphLaunch(exec, s);
          cudaEventRecord(b, s);
          cudaStreamSynchronize(s);
          float ms = 0;
          cudaEventElapsedTime(&ms, a, b);
          tg.push_back(ms * 1000.0 / kCalls);
        }
      } else {
        for (int k = 0; k < kReps; ++k) bar->wait();
      }
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      mkcclResult_t async = mkcclSuccess;
      mkcclCommGetAsyncError(c, &async);
      if (async != mkcclSuccess) ok(async);
      e[r] = median(te);
      g[r] = median(tg);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    });
    bool failed = false;
    for (int r = 0; r < n; ++r) failed |= bad[r] != 0;
    *eagerUs = failed ? -1 : *std::max_element(e.begin(), e.end());
    *graphUs = failed ? -1 : *std::max_element(g.begin(), g.end());
  }
};

struct DevMem {
  void* p = nullptr;
  bool vmm = false;
  void* handle = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  if (gpuCount() < 1) {
    fprintf(stderr, "graph_bench: no GPU\n");
    return 0;
  }
  std::vector<int> devs = gpuCount() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
  const bool shared = gpusOf(devs) < int(devs.size());
  std::unique_ptr<SharedGpus> share(shared ? new SharedGpus(devs) : nullptr);
  std::unique_ptr<InProcessRanks> R(new InProcessRanks(devs));
  if (!R->ok()) return 1;
  const int n = R->size();
  HostBarrier bar(n);
  Bench B{R.get(), &bar, n};
  std::vector<Row> rows;
  const size_t maxBytes = 64ull << 20;
  // Per rank: two sets of (in, out) plain buffers and two sets of registered ones.
  struct RankBufs {
    void* in[2];
    void* out[2];
    void* regOut[2];
    void* regH[2];
    void* regIn[2];
    void* regInH[2];
    void* w[2];
  };
  std::vector<RankBufs> rb(n);
  R->onEveryRank([&](int r) {
    for (int i = 0; i < 2; ++i) {
      cudaMalloc(&rb[r].in[i], maxBytes);
      cudaMalloc(&rb[r].out[i], maxBytes);
      cudaMalloc(&rb[r].w[i], 2 * maxBytes);  // W of 8192 x 8192
      fillRandom(rb[r].in[i], maxBytes / 2, mkcclBfloat16, 1 + 2 * r + i, 1.0f, R->streams[r]);
      fillRandom(rb[r].w[i], maxBytes, mkcclBfloat16, 101 + 2 * r + i, 1.0f, R->streams[r]);
      rb[r].regOut[i] = nullptr;
      rb[r].regH[i] = nullptr;
      rb[r].regIn[i] = nullptr;
      rb[r].regInH[i] = nullptr;
      if (mkcclMemAlloc(&rb[r].regOut[i], maxBytes) != mkcclSuccess ||
          mkcclCommRegister(R->comms[r], rb[r].regOut[i], maxBytes, &rb[r].regH[i]) != mkcclSuccess ||
          mkcclMemAlloc(&rb[r].regIn[i], maxBytes) != mkcclSuccess ||
          mkcclCommRegister(R->comms[r], rb[r].regIn[i], maxBytes, &rb[r].regInH[i]) != mkcclSuccess)
        fprintf(stderr, "graph_bench: rank %d: registration: %s\n", r, mkcclGetLastError(R->comms[r]));
      else
        fillRandom(rb[r].regIn[i], maxBytes / 2, mkcclBfloat16, 1 + 2 * r + i, 1.0f, R->streams[r]);
    }
    cudaStreamSynchronize(R->streams[r]);
  });

  // A collective: unregistered, registered (auto rule), registered with the in-place path forced.
  auto tune = [&](const char* t) {
    R->onEveryRank([&](int r) {
      if (mkcclSetTuning(R->comms[r], t) != mkcclSuccess) fprintf(stderr, "graph_bench: tuning %s failed\n", t);
    });
  };
  auto coll = [&](const char* op, size_t bytes, const Call& call) {
    Row w;
    w.op = op;
    w.bytes = bytes;
    B.time(call, false, &w.eager, &w.graph);
    B.time(call, true, &w.regEager, &w.regGraph);
    tune("coll.direct=on");
    B.time(call, true, &w.onEager, &w.onGraph);
    tune("");
    rows.push_back(w);
  };
  for (size_t bytes : {size_t(8) << 10, size_t(64) << 10, size_t(512) << 10, size_t(1) << 20, size_t(2) << 20,
                       size_t(4) << 20, size_t(32) << 20}) {
    // bytes: AllReduce's buffer, AllGather's gathered output, ReduceScatter's and AllToAll's input.
    coll("allreduce", bytes, [&](int r, int i, bool reg, mkcclComm_t c, cudaStream_t s) {
      return mkcclAllReduce(reg ? rb[r].regIn[i] : rb[r].in[i], reg ? rb[r].regOut[i] : rb[r].out[i], bytes / 2,
                            mkcclBfloat16, mkcclSum, c, s);
    });
    coll("allgather", bytes, [&](int r, int i, bool reg, mkcclComm_t c, cudaStream_t s) {
      return mkcclAllGather(rb[r].in[i], reg ? rb[r].regOut[i] : rb[r].out[i], bytes / 2 / n, mkcclBfloat16, c, s);
    });
    coll("reducescatter", bytes, [&](int r, int i, bool reg, mkcclComm_t c, cudaStream_t s) {
      return mkcclReduceScatter(reg ? rb[r].regIn[i] : rb[r].in[i], rb[r].out[i], bytes / 2 / n, mkcclBfloat16,
                                mkcclSum, c, s);
    });
    coll("alltoall", bytes, [&](int r, int i, bool reg, mkcclComm_t c, cudaStream_t s) {
      return mkcclAllToAll(reg ? rb[r].regIn[i] : rb[r].in[i], rb[r].out[i], bytes / 2 / n, mkcclBfloat16, c, s);
    });
  }
  // The small-M regime of decoding: M = 16..256 rows, N and K 4096 and 8192, bf16, the auto plan.
  for (size_t NK : {size_t(4096), size_t(8192)})
    for (size_t M : {size_t(16), size_t(64), size_t(256)}) {
      Row a;
      a.op = "ag_gemm";
      a.M = M, a.N = NK, a.K = NK;
      B.time([&](int r, int i, bool, mkcclComm_t c, cudaStream_t s) {
        return mkcclAllGatherGemm(rb[r].in[i], rb[r].w[i], rb[r].out[i], nullptr, M, NK, NK, mkcclBfloat16, c, s);
      }, false, &a.eager, &a.graph);
      rows.push_back(a);
      Row b;
      b.op = "gemm_rs";
      b.M = M, b.N = NK, b.K = NK;
      B.time([&](int r, int i, bool, mkcclComm_t c, cudaStream_t s) {
        return mkcclGemmReduceScatter(rb[r].in[i], rb[r].w[i], rb[r].out[i], M, NK, NK, mkcclBfloat16, c, s);
      }, false, &b.eager, &b.graph);
      rows.push_back(b);
      Row d;
      d.op = "gemm_ar";
      d.M = M, d.N = NK, d.K = NK;
      B.time([&](int r, int i, bool, mkcclComm_t c, cudaStream_t s) {
        return mkcclGemmAllReduce(rb[r].in[i], rb[r].w[i], rb[r].out[i], M, NK, NK, mkcclBfloat16, c, s);
      }, false, &d.eager, &d.graph);
      rows.push_back(d);
    }

  R->onEveryRank([&](int r) {
    cudaStreamSynchronize(R->streams[r]);
    for (int i = 0; i < 2; ++i) {
      if (rb[r].regH[i]) mkcclCommDeregister(R->comms[r], rb[r].regH[i]);
      if (rb[r].regOut[i]) mkcclMemFree(rb[r].regOut[i]);
      if (rb[r].regInH[i]) mkcclCommDeregister(R->comms[r], rb[r].regInH[i]);
      if (rb[r].regIn[i]) mkcclMemFree(rb[r].regIn[i]);
      cudaFree(rb[r].in[i]);
      cudaFree(rb[r].out[i]);
      cudaFree(rb[r].w[i]);
    }
  });

  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("# graph_bench: %d ranks in one process on %s%s; per-call us (median of %d x %d calls, max over ranks)\n",
         n, prop.name, shared ? " (sharing ONE GPU: relative figures only)" : "", kReps, kCalls);
  printf("%-13s %10s %6s %6s %6s %10s %10s %8s %10s %10s %8s %10s %8s\n", "op", "bytes", "M", "N", "K", "eager",
         "graph", "e/g", "reg", "reg_graph", "unreg/reg", "reg_on", "unreg/on");
  for (const Row& w : rows)
    printf("%-13s %10zu %6zu %6zu %6zu %10.2f %10.2f %8.2f %10.2f %10.2f %8.2f %10.2f %8.2f\n", w.op.c_str(), w.bytes,
           w.M, w.N, w.K, w.eager, w.graph, w.graph > 0 ? w.eager / w.graph : 0.0, w.regEager, w.regGraph,
           w.regEager > 0 ? w.eager / w.regEager : 0.0, w.onEager, w.onEager > 0 ? w.eager / w.onEager : 0.0);
  if (argc > 1) {
    FILE* f = fopen(argv[1], "w");
    if (!f) return 1;
    const char* commit = getenv("MKCCL_COMMIT");
    time_t now = time(nullptr);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "{\n  \"tool\": \"graph_bench\",\n  \"device\": \"%s\",\n  \"ranks\": %d,\n  \"shared_gpu\": %s,\n", prop.name,
            n, shared ? "true" : "false");
    fprintf(f, "  \"commit\": \"%s\",\n  \"date\": \"%s\",\n", commit ? commit : "unknown", date);
    fprintf(f, "  \"method\": \"per-call us: median over %d repetitions of %d calls (eager: enqueued back to back; "
               "graph: the %d calls captured once, replayed), max over ranks; bf16; auto plans\",\n",
            kReps, kCalls, kCalls);
    fprintf(f, "  \"results\": [\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& w = rows[i];
      fprintf(f, "    {\"op\": \"%s\", \"bytes\": %zu, \"M\": %zu, \"N\": %zu, \"K\": %zu, \"eager_us\": %.3f, "
                 "\"graph_us\": %.3f, \"graph_speedup\": %.3f",
              w.op.c_str(), w.bytes, w.M, w.N, w.K, w.eager, w.graph, w.graph > 0 ? w.eager / w.graph : 0.0);
      if (w.regEager > 0)
        fprintf(f, ", \"reg_us\": %.3f, \"reg_graph_us\": %.3f, \"reg_speedup\": %.3f", w.regEager, w.regGraph,
                w.eager / w.regEager);
      if (w.onEager > 0)
        fprintf(f, ", \"reg_on_us\": %.3f, \"reg_on_graph_us\": %.3f, \"reg_on_speedup\": %.3f", w.onEager,
                w.onGraph, w.eager / w.onEager);
      fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
  }
  return 0;
}
