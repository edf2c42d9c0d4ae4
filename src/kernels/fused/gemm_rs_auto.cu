// The auto plan of GEMM+RS/AR checked by timing (the rule: gemm_rs_trial.h): per communicator and
// shape, the trial's state, its CUDA events, and the collective decision.
#include <cuda_runtime.h>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>
#include "kernels/fused/gemm_rs_host.cuh"
#include "kernels/fused/gemm_rs_trial.h"
#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/log.h"

namespace mkccl {
namespace rs {

namespace {

// Shapes whose model estimate is below this keep the model's plan: both plans are then short and
// latency-bound, and a trial's host wait would cost more than a wrong guess.
constexpr double kMinTrialUs = 30;
// Trials per communicator (the same count on every rank: every rank makes the same calls); later
// shapes keep the model's plan.
constexpr int kMaxTrialsPerComm = 64;

struct TrialEntry {
  PlanTrial trial;
  cudaEvent_t start[PlanTrial::kCalls] = {};
  cudaEvent_t end[PlanTrial::kCalls] = {};
};

// (bootstrap token, rank): a communicator, also across address reuse; then the shape.
using CommKey = std::tuple<uint64_t, int>;
using ShapeKey = std::tuple<int, int64_t, int64_t, int64_t, int>;

std::mutex gMu;
std::map<CommKey, std::map<ShapeKey, std::unique_ptr<TrialEntry>>> gTrials;

// The entry of (comm, shape), created on first use; null once the comm has used up its trials.
TrialEntry* entryFor(const mkcclComm* comm, const ShapeKey& shape, bool modelFused) {
  std::lock_guard<std::mutex> lock(gMu);
  auto& shapes = gTrials[CommKey(comm->bootstrap->token(), comm->rank)];
  auto it = shapes.find(shape);
  if (it != shapes.end()) return it->second.get();
  if (int(shapes.size()) >= kMaxTrialsPerComm) return nullptr;
  auto e = std::make_unique<TrialEntry>();
  e->trial = PlanTrial(modelFused);
  TrialEntry* p = e.get();
  shapes.emplace(shape, std::move(e));
  return p;
}

// Waits for the trial calls' times, exchanges them, decides (every rank alike).
mkcclResult_t decide(mkcclComm* comm, TrialEntry& e, const char* name, const ShapeKey& shape) {
  for (int i = 0; i < PlanTrial::kCalls; ++i) {
    float ms = -1;
    if (e.start[i] != nullptr && e.end[i] != nullptr && cudaEventSynchronize(e.end[i]) == cudaSuccess &&
        cudaEventElapsedTime(&ms, e.start[i], e.end[i]) == cudaSuccess)
      e.trial.record(i, double(ms) * 1000.0);
    if (e.start[i] != nullptr) cudaEventDestroy(e.start[i]);
    if (e.end[i] != nullptr) cudaEventDestroy(e.end[i]);
    e.start[i] = e.end[i] = nullptr;
  }
  cudaGetLastError();  // a failed timing is not this call's error: the trial keeps the model's plan
  std::vector<double> all(2 * size_t(comm->nranks));
  e.trial.local(&all[2 * size_t(comm->rank)]);
  const mkcclResult_t res = comm->bootstrap->allGather(all.data(), 2 * sizeof(double));
  if (res != mkcclSuccess) {
    e.trial.giveUp();
    return res;
  }
  e.trial.decide(all.data(), comm->nranks);
  MKCCL_INFO("%s %lldx%lldx%lld: timed plans (slowest rank's best call): fused %.0f us, sequential %.0f us; "
             "the model chose %s; keeping %s",
             name, (long long)std::get<1>(shape), (long long)std::get<2>(shape), (long long)std::get<3>(shape),
             e.trial.worst(true), e.trial.worst(false), e.trial.modelFused() ? "fused" : "sequential",
             e.trial.choice() ? "fused" : "sequential");
  return mkcclSuccess;
}

}  // namespace

mkcclResult_t autoPlanBegin(mkcclComm* comm, cudaStream_t stream, const char* name, int mode, int64_t M, int64_t N,
                            int64_t K, mkcclDataType_t t, bool modelFused, double modelUs, AutoCall* call) {
  *call = AutoCall{};
  call->fused = modelFused;
  if (modelUs < kMinTrialUs) return mkcclSuccess;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    cudaGetLastError();
    return mkcclSuccess;
  }
  if (capture != cudaStreamCaptureStatusNone) return mkcclSuccess;  // no host waits inside a graph
  const ShapeKey shape(mode, M, N, K, int(t));
  TrialEntry* e = entryFor(comm, shape, modelFused);
  if (e == nullptr) return mkcclSuccess;
  if (e->trial.readyToDecide()) MKCCL_CHECK(decide(comm, *e, name, shape));
  int index = -1;
  call->fused = e->trial.next(&index);
  if (index < 0) return mkcclSuccess;
  call->trial = e;
  call->index = index;
  // A call whose events cannot be made still counts (autoPlanEnd): every rank must stay in step.
  if (cudaEventCreate(&e->start[index]) != cudaSuccess || cudaEventCreate(&e->end[index]) != cudaSuccess ||
      cudaEventRecord(e->start[index], stream) != cudaSuccess)
    cudaGetLastError();
  return mkcclSuccess;
}

void autoPlanEnd(const AutoCall& call, cudaStream_t stream) {
  if (call.trial == nullptr) return;
  TrialEntry* e = static_cast<TrialEntry*>(call.trial);
  if (e->end[call.index] != nullptr && cudaEventRecord(e->end[call.index], stream) != cudaSuccess) cudaGetLastError();
  e->trial.launched();
}

}  // namespace rs
}  // namespace mkccl
