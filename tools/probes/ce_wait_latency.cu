// One-off probe (docs/GEMM_RS_AR.md, "copy engines for the partials"): how late does a copy stream
// that waits (cuStreamWaitValue64) for words a running kernel writes start its copies?
// Build: nvcc -O2 -std=c++17 -arch=sm_90a tools/probes/ce_wait_latency.cu -lcuda -o ce_wait_latency
// Run:   ./ce_wait_latency <words> <period us> <copy KiB per word> <streams> <busy CTAs> [peer GPU]
// A one-warp kernel writes word i (release, system scope) at t0 + 500 us + i·period; each copy stream
// waits for its words in order, copies <KiB> after each (to the peer GPU if given) and records an
// event. Printed: per word, the event's time after t0 minus the word's time (median of 15 runs).
// <busy CTAs> more CTAs spin beside the signaller (an SM-filling kernel holds the GPU meanwhile).
// The kernel is launched before the waits are enqueued (the driver does not see the waits'
// dependency on it; enqueued first, a wait can hold the launch behind it: the first version hung),
// and its first word comes 500 us after its start, later than the host's enqueueing.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); exit(1);} } while (0)
#define CU(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { printf("%s:%d CUresult %d\n", __FILE__, __LINE__, (int)r); exit(1);} } while (0)

__device__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

constexpr uint64_t kLeadNs = 500000;

__global__ void signaller(uint64_t* words, int n, uint64_t periodNs, uint64_t value, int busyUntilWord) {
  const uint64_t t0 = now() + kLeadNs - periodNs;
  if (blockIdx.x != 0) {  // busy CTAs: hold their SMs until the last word
    while (now() < t0 + periodNs * (busyUntilWord + 1)) {}
    return;
  }
  if (threadIdx.x != 0) return;
  for (int i = 0; i < n; ++i) {
    while (now() < t0 + periodNs * (i + 1)) {}
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(words + i), "l"(value) : "memory");
  }
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 16;
  const double periodUs = argc > 2 ? atof(argv[2]) : 25;
  const size_t kib = argc > 3 ? atoi(argv[3]) : 0;
  const int ns = argc > 4 ? atoi(argv[4]) : 1;
  const int busy = argc > 5 ? atoi(argv[5]) : 0;
  const int peer = argc > 6 ? atoi(argv[6]) : -1;
  CK(cudaSetDevice(0));
  if (peer >= 0) CK(cudaDeviceEnablePeerAccess(peer, 0));
  uint64_t* words; CK(cudaMalloc(&words, n * sizeof(uint64_t))); CK(cudaMemset(words, 0, n * sizeof(uint64_t)));
  char *src = nullptr, *dst = nullptr;
  const size_t bytes = kib << 10;
  if (bytes) {
    CK(cudaMalloc(&src, bytes * n));
    if (peer >= 0) { CK(cudaSetDevice(peer)); CK(cudaMalloc(&dst, bytes * n)); CK(cudaSetDevice(0)); }
    else CK(cudaMalloc(&dst, bytes * n));
  }
  cudaStream_t main; CK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  std::vector<cudaStream_t> cs(ns);
  for (auto& st : cs) CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t start; CK(cudaEventCreate(&start));
  std::vector<cudaEvent_t> ev(n);
  for (auto& evt : ev) CK(cudaEventCreate(&evt));
  std::vector<std::vector<float>> late(n);
  for (int run = 1; run <= 15; ++run) {
    CK(cudaEventRecord(start, main));
    signaller<<<1 + busy, 32, 0, main>>>(words, n, (uint64_t)(periodUs * 1000), run, n);
    for (int s = 0; s < ns; ++s) CK(cudaStreamWaitEvent(cs[s], start, 0));
    for (int i = 0; i < n; ++i) {
      cudaStream_t s = cs[i % ns];
      CU(cuStreamWaitValue64(s, (CUdeviceptr)(words + i), run, CU_STREAM_WAIT_VALUE_GEQ));
      if (bytes) CK(cudaMemcpyAsync(dst + i * bytes, src + i * bytes, bytes, cudaMemcpyDeviceToDevice, s));
      CK(cudaEventRecord(ev[i], s));
    }
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < n; ++i) {
      float ms; CK(cudaEventElapsedTime(&ms, start, ev[i]));
      late[i].push_back(ms * 1000 - kLeadNs / 1000.0 - periodUs * i);
    }
  }
  printf("words %d period %.0f us copy %zu KiB streams %d busy CTAs %d peer %d: event after word (us, median):", n, periodUs, kib, ns, busy, peer);
  for (int i = 0; i < n; ++i) { std::sort(late[i].begin(), late[i].end()); printf(" %.1f", late[i][late[i].size() / 2]); }
  printf("\n");
  return 0;
}
