// Capture one call per rank into a CUDA graph and replay it with new inputs, for the fused ops'
// GPU tests (fused_args_test, ag_gemm_fp8_test, gemm_rs_fp8_test). Header-only.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <string>
#include <vector>
#include "mkccl.h"
#include "rank_threads.h"

namespace mkccl {
namespace test {

inline void expectNoAsyncError(mkcclComm_t comm) {
  mkcclResult_t async = mkcclSuccess;
  EXPECT_EQ(mkcclSuccess, mkcclCommGetAsyncError(comm, &async));
  EXPECT_EQ(mkcclSuccess, async) << mkcclGetLastError(comm);
}

// Each rank captures one call into a CUDA graph (after one eager call: plans made, scratch grown)
// and replays it with new inputs in the same buffers, every replay followed by an eager call of the
// same op on the same communicator; each replay's and each eager call's output against the
// reference. Call `call(r, stream)` on rank r; `refill(r, round)` puts round's inputs in place;
// `check(round, what)` compares every rank's outputs.
template <class Call, class Refill, class Check>
void captureAndReplay(InProcessRanks& w, Call call, Refill refill, Check check, int rounds) {
  const int ws = w.size();
  HostBarrier bar(ws);
  std::vector<cudaGraphExec_t> exec(ws, nullptr);
  std::vector<std::string> err(ws);
  w.onEveryRank([&](int r) {
    cudaStream_t s = w.streams[r];
    if (!refill(r, 0)) err[r] = "refill";
    bar.wait();
    mkcclResult_t res = call(r, s);  // eager first
    if (res != mkcclSuccess) err[r] = std::string("eager: ") + mkcclGetLastError(w.comms[r]);
    cudaStreamSynchronize(s);
    bar.wait();
    cudaGraph_t g = nullptr;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) err[r] = "begin capture";
    res = call(r, s);
    const cudaError_t e = cudaStreamEndCapture(s, &g);
    if (res != mkcclSuccess) err[r] = std::string("captured call: ") + mkcclGetLastError(w.comms[r]);
    if (e != cudaSuccess || g == nullptr || cudaGraphInstantiate(&exec[r], g, 0) != cudaSuccess)
      err[r] = "capture / instantiate";
    if (g) cudaGraphDestroy(g);
  });
  for (int r = 0; r < ws; ++r) ASSERT_EQ("", err[r]) << "rank " << r;
  for (int round = 1; round <= rounds; ++round) {
    for (int pass = 0; pass < 2; ++pass) {  // the replay, then an eager call
      w.onEveryRank([&](int r) {
        if (!refill(r, round * 2 + pass)) err[r] = "refill";
        bar.wait();  // every rank's inputs in place before any call reads them
        if (pass == 0 && cudaGraphLaunch(exec[r], w.streams[r]) != cudaSuccess) err[r] = "graph launch";
        if (pass == 1 && call(r, w.streams[r]) != mkcclSuccess) err[r] = mkcclGetLastError(w.comms[r]);
        if (cudaStreamSynchronize(w.streams[r]) != cudaSuccess) err[r] = "stream";
        bar.wait();
      });
      for (int r = 0; r < ws; ++r) {
        ASSERT_EQ("", err[r]) << "rank " << r << ", round " << round;
        expectNoAsyncError(w.comms[r]);
      }
      cudaSetDevice(w.devs[0]);
      check(round * 2 + pass, std::string(pass ? "eager" : "replay") + " round " + std::to_string(round));
    }
  }
  for (cudaGraphExec_t x : exec) cudaGraphExecDestroy(x);
}

}  // namespace test
}  // namespace mkccl
