// perf::timeMedianUs, timeAlternating (perf.h): per-run CUDA events behind a spin kernel, median of
// the runs; timeAlternating interleaves the candidates in blocks so that clock drift hits all alike.
#include <stdio.h>
#include <algorithm>
#include <chrono>
#include <memory>
#include <stdlib.h>
#include <utility>
#include <vector>
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

// Holds the stream while the host enqueues the timed runs, so no run waits for the host.
__global__ void holdStream(unsigned long long ns) {
  if (threadIdx.x != 0) return;
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "mkccl-perf: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

std::string userTuning() {
  const char* t = getenv("MKCCL_TUNING");
  return t ? t : "";
}

ScopedTuning::ScopedTuning(mkcclComm_t comm, const std::string& extra) : comm_(comm) {
  const std::string base = userTuning();
  const std::string all = base.empty() ? extra : extra.empty() ? base : base + ";" + extra;
  ok_ = mkcclSetTuning(comm_, all.c_str()) == mkcclSuccess;
  if (!ok_) fprintf(stderr, "mkccl-perf: tuning \"%s\": %s\n", all.c_str(), mkcclGetLastError(nullptr));
}

ScopedTuning::~ScopedTuning() { mkcclSetTuning(comm_, userTuning().c_str()); }

double timeWithTuning(const std::string& extra, const std::function<void(int)>& launch, int warmup, int iters,
                      cudaStream_t stream, mkcclComm_t comm, bool* failed) {
  double us = -1;
  {
    const ScopedTuning scoped(comm, extra);
    if (scoped.ok()) us = timeMedianUs(launch, warmup, iters, stream);
  }
  mkcclResult_t async = mkcclSuccess;
  mkcclCommGetAsyncError(comm, &async);
  if (us < 0 || async != mkcclSuccess) *failed = true;
  return us;
}

double timeMedianUs(const std::function<void(int)>& launch, int warmup, int iters, cudaStream_t stream) {
  if (iters < 1) return -1;
  const auto h0 = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup; ++i) launch(i);
  const double hostUs =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() / std::max(1, warmup);
  if (!ok(cudaStreamSynchronize(stream), "warm-up")) return -1;

  std::vector<cudaEvent_t> ev(2 * (size_t)iters);
  for (auto& e : ev)
    if (!ok(cudaEventCreate(&e), "cudaEventCreate")) return -1;
  // Long enough for the host to enqueue every run (measured on the warm-up), bounded.
  const double holdUs = std::min(200000.0, std::max(50.0, 2.0 * (warmup ? hostUs : 20.0) * iters + 50.0));
  holdStream<<<1, 32, 0, stream>>>((unsigned long long)(holdUs * 1000.0));
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(ev[2 * i], stream);
    launch(warmup + i);
    cudaEventRecord(ev[2 * i + 1], stream);
  }
  double med = -1;
  if (ok(cudaStreamSynchronize(stream), "timed runs")) {
    std::vector<double> us(iters);
    for (int i = 0; i < iters; ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
      us[i] = ms * 1000.0;
    }
    std::sort(us.begin(), us.end());
    med = iters % 2 ? us[iters / 2] : 0.5 * (us[iters / 2 - 1] + us[iters / 2]);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  return med;
}

double timeGraphMedianUs(const std::function<void(int)>& launch, int calls, int warmup, int iters,
                         cudaStream_t stream) {
  if (iters < 1 || calls < 1) return -1;
  if (!ok(cudaStreamSynchronize(stream), "before the capture")) return -1;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture")) return -1;
  for (int i = 0; i < calls; ++i) launch(i);
  const bool captured = ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") &&
                        ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  if (graph) cudaGraphDestroy(graph);
  if (!captured) return -1;
  double med = -1;
  for (int i = 0; i < warmup; ++i) cudaGraphLaunch(exec, stream);
  if (ok(cudaStreamSynchronize(stream), "graph warm-up")) {
    std::vector<cudaEvent_t> ev(2 * (size_t)iters);
    for (auto& e : ev) cudaEventCreate(&e);
    holdStream<<<1, 32, 0, stream>>>((unsigned long long)std::min(200000.0, 20.0 * iters + 50.0) * 1000ull);
    for (int i = 0; i < iters; ++i) {
      cudaEventRecord(ev[2 * i], stream);
      cudaGraphLaunch(exec, stream);
      cudaEventRecord(ev[2 * i + 1], stream);
    }
    if (ok(cudaStreamSynchronize(stream), "graph replays")) {
      std::vector<double> us(iters);
      for (int i = 0; i < iters; ++i) {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
        us[i] = ms * 1000.0 / calls;
      }
      std::sort(us.begin(), us.end());
      med = iters % 2 ? us[iters / 2] : 0.5 * (us[iters / 2 - 1] + us[iters / 2]);
    }
    for (auto& e : ev) cudaEventDestroy(e);
  }
  cudaGraphExecDestroy(exec);
  return med;
}

bool timeEagerAndGraphUs(const std::function<void(int)>& launch, int calls, int warmup, int iters, int rounds,
                         cudaStream_t stream, double* eagerUs, double* graphUs) {
  *eagerUs = *graphUs = -1;
  if (iters < 1 || calls < 1 || rounds < 1) return false;
  if (!ok(cudaStreamSynchronize(stream), "before the capture")) return false;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture")) return false;
  for (int i = 0; i < calls; ++i) launch(i);
  const bool captured = ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") &&
                        ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  if (graph) cudaGraphDestroy(graph);
  if (!captured) return false;
  for (int i = 0; i < warmup; ++i) {
    cudaGraphLaunch(exec, stream);
    for (int j = 0; j < calls; ++j) launch(j);
  }
  bool good = ok(cudaStreamSynchronize(stream), "warm-up");
  const int per = std::max(1, iters / rounds);
  std::vector<double> eager, replay;
  std::vector<cudaEvent_t> ev(2 * (size_t)per);
  for (auto& e : ev) cudaEventCreate(&e);
  auto block = [&](bool useGraph, std::vector<double>* out) {
    holdStream<<<1, 32, 0, stream>>>((unsigned long long)std::min(200000.0, 20.0 * per * calls + 50.0) * 1000ull);
    for (int i = 0; i < per; ++i) {
      cudaEventRecord(ev[2 * i], stream);
      if (useGraph) cudaGraphLaunch(exec, stream);
      else
        for (int j = 0; j < calls; ++j) launch(j);
      cudaEventRecord(ev[2 * i + 1], stream);
    }
    if (!ok(cudaStreamSynchronize(stream), useGraph ? "graph replays" : "eager calls")) return false;
    for (int i = 0; i < per; ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
      out->push_back(ms * 1000.0 / calls);
    }
    return true;
  };
  for (int r = 0; good && r < rounds; ++r) good = block(false, &eager) && block(true, &replay);
  for (auto& e : ev) cudaEventDestroy(e);
  cudaGraphExecDestroy(exec);
  if (!good) return false;
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  *eagerUs = median(eager);
  *graphUs = median(replay);
  return true;
}

Candidate::Candidate(std::string n, std::function<void(int)> l) : name(std::move(n)), launch(std::move(l)) {}

Candidate::Candidate(std::string n, std::function<void(int)> l, mkcclComm_t c, std::string t)
    : name(std::move(n)), launch(std::move(l)), tuned(true), tuning(std::move(t)), comm(c) {}

std::string timingNote(int rounds) {
  return "timing: alternating, " + std::to_string(rounds) + (rounds == 1 ? " round" : " rounds");
}

bool timeAlternating(std::vector<Candidate>& cs, int warmup, int iters, int rounds, cudaStream_t stream) {
  for (Candidate& c : cs) c.us = -1, c.failed = false;
  if (iters < 1 || rounds < 1) return false;
  rounds = std::min(rounds, iters);
  const int per = iters / rounds, extra = iters % rounds;  // the first `extra` rounds run one more
  std::vector<cudaEvent_t> ev(2 * (size_t)(per + 1));
  bool good = true;
  for (auto& e : ev)
    if (good && !ok(cudaEventCreate(&e), "cudaEventCreate")) good = false, e = nullptr;
  auto destroy = [&]() {
    for (auto& e : ev)
      if (e) cudaEventDestroy(e);
  };
  if (!good) {
    destroy();
    return false;
  }
  // Runs fn (which ends with a stream synchronisation) under c's tuning; then c's communicator's
  // asynchronous error. On failure: c.failed, a message naming c.
  auto under = [&](Candidate& c, const char* what, const std::function<bool()>& fn) {
    bool done;
    if (c.tuned) {
      const ScopedTuning scoped(c.comm, c.tuning);
      done = scoped.ok() && fn();
    } else {
      done = fn();
    }
    if (done && c.comm) {
      mkcclResult_t async = mkcclSuccess;
      mkcclCommGetAsyncError(c.comm, &async);
      done = async == mkcclSuccess;
    }
    if (!done) {
      c.failed = true;
      fprintf(stderr, "mkccl-perf: %s: %s failed%s%s\n", c.name.c_str(), what, c.tuned && !c.tuning.empty() ? ", tuning " : "",
              c.tuned ? c.tuning.c_str() : "");
    }
    return done;
  };
  std::vector<double> hostUs(cs.size(), 20.0);  // the host's enqueue time per run (warm-up), for the hold
  std::vector<std::vector<double>> runs(cs.size());
  for (size_t ci = 0; good && ci < cs.size(); ++ci) {
    Candidate& c = cs[ci];
    good = under(c, "warm-up", [&]() {
      if (c.before) c.before();
      const auto h0 = std::chrono::steady_clock::now();
      for (int i = 0; i < warmup; ++i) c.launch(i);
      if (warmup > 0)
        hostUs[ci] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() / warmup;
      return ok(cudaStreamSynchronize(stream), "warm-up");
    });
  }
  for (int r = 0; good && r < rounds; ++r) {
    const int n = per + (r < extra ? 1 : 0);
    for (size_t ci = 0; good && ci < cs.size(); ++ci) {
      Candidate& c = cs[ci];
      std::vector<double>& out = runs[ci];
      good = under(c, "timed runs", [&]() {
        if (c.before) c.before();
        // Long enough for the host to enqueue the block (as in timeMedianUs), bounded.
        const double holdUs = std::min(200000.0, std::max(50.0, 2.0 * hostUs[ci] * n + 50.0));
        holdStream<<<1, 32, 0, stream>>>((unsigned long long)(holdUs * 1000.0));
        const int first = warmup + (int)out.size();
        for (int i = 0; i < n; ++i) {
          cudaEventRecord(ev[2 * i], stream);
          c.launch(first + i);
          cudaEventRecord(ev[2 * i + 1], stream);
        }
        if (!ok(cudaStreamSynchronize(stream), "timed runs")) return false;
        for (int i = 0; i < n; ++i) {
          float ms = 0;
          if (!ok(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime")) return false;
          out.push_back(ms * 1000.0);
        }
        return true;
      });
    }
  }
  destroy();
  if (!good) return false;
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    std::vector<double>& v = runs[ci];
    std::sort(v.begin(), v.end());
    const size_t m = v.size();
    cs[ci].us = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
  }
  return true;
}

}  // namespace perf
}  // namespace mkccl
