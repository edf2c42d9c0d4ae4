// One-off probe (docs/AG_GEMM.md, the ce plan): can copy engines carry an AllGather at NVLink rate while a GEMM runs on every SM?
// Build: nvcc -O2 -std=c++17 -arch=sm_90a tools/probes/ce_overlap.cu -lcublas -lcuda -o ce_overlap
// Run:   ./ce_overlap <gpus> <N> <chunks> <streams per peer> <1: writes without memory barrier> <1: pull>
//        (pull: each receiver's own copy engines read the peers' shards; default: the sender's write them;
//         streams per peer 0: one stream per GPU carries every peer's copies, one after another)
//        <1: ring> (ring: every GPU sends the same ws-1 shards' bytes to one neighbour, g+1, instead of
//         one shard to each peer: the traffic of a ring ReduceScatter) <1: no flag writes between chunks>
// Times (host clock, median of 25) a copy-engine AllGather of M=8192 x K=8192 bf16 shards, cuBLAS
// on each GPU, and both at once. Host-enqueue time is inside the numbers (many chunks: pessimistic;
// a version whose streams first waited for a host-mapped gate word hung on 4xH200).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <chrono>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
int main(int argc, char** argv) {
  int ws = 0; CK(cudaGetDeviceCount(&ws));
  if (argc > 1) ws = atoi(argv[1]);
  const size_t M = 8192, N = argc > 2 ? atoi(argv[2]) : 2048, K = 8192;
  const size_t shard = M / ws * K * 2;
  const int chunks = argc > 3 ? atoi(argv[3]) : 1;
  const int nsp = argc > 4 ? atoi(argv[4]) : 1;          // streams per peer
  const unsigned wflags = argc > 5 && atoi(argv[5]) ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER : 0;
  const bool pull = argc > 6 && atoi(argv[6]);
  const bool ring = argc > 7 && atoi(argv[7]);
  const bool noFlags = argc > 8 && atoi(argv[8]);
  std::vector<char*> A(ws), G(ws), W(ws), C(ws);
  std::vector<uint64_t*> flags(ws);
  std::vector<cublasHandle_t> h(ws);
  std::vector<cudaStream_t> gs(ws);
  std::vector<std::vector<cudaStream_t>> cs(ws, std::vector<cudaStream_t>(ws * 4));
  for (int g = 0; g < ws; ++g) {
    CK(cudaSetDevice(g));
    for (int q = 0; q < ws; ++q) if (q != g) CK(cudaDeviceEnablePeerAccess(q, 0));
    CK(cudaMalloc(&A[g], shard)); CK(cudaMalloc(&G[g], M * K * 2)); CK(cudaMalloc(&W[g], N * K * 2)); CK(cudaMalloc(&C[g], M * N * 2));
    CK(cudaMalloc(&flags[g], 4096));
    CK(cudaMemset(A[g], 0x11, shard)); CK(cudaMemset(W[g], 0x11, N * K * 2)); CK(cudaMemset(G[g], 0x11, M * K * 2));
    cublasCreate(&h[g]);
    CK(cudaStreamCreateWithFlags(&gs[g], cudaStreamNonBlocking));
    cublasSetStream(h[g], gs[g]);
    for (int q = 0; q < ws * 4; ++q) CK(cudaStreamCreateWithFlags(&cs[g][q], cudaStreamNonBlocking));
  }
  uint64_t iter = 0;
  auto copies = [&]() {
    ++iter;
    for (int g = 0; g < ws; ++g) {   // g: the GPU whose engines copy
      CK(cudaSetDevice(g));
      for (int q = 0; q < ws; ++q) {
        if (q == g) continue;
        // ring: piece q of the ws-1 goes to the one neighbour (pull: comes from it), at slot q.
        const int peer = ring ? (pull ? (g + ws - 1) % ws : (g + 1) % ws) : q;
        const int src = pull ? peer : g, dst = pull ? g : peer;
        const size_t per = shard / chunks;
        for (int c = 0; c < chunks; ++c) {
          cudaStream_t st = nsp == 0 ? cs[g][0] : cs[g][q * 4 + c % nsp];
          CK(cudaMemcpyAsync(G[dst] + (ring ? q : src) * shard + c * per, A[src] + c * per, per, cudaMemcpyDeviceToDevice, st));
          if (chunks > 1 && !noFlags) cuStreamWriteValue64(st, (CUdeviceptr)(flags[dst] + (ring ? q : src) * 64 + c), iter, wflags);
        }
      }
    }
  };
  auto gemm = [&]() {
    for (int g = 0; g < ws; ++g) {
      CK(cudaSetDevice(g));
      const float one = 1, zero = 0;
      cublasGemmEx(h[g], CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W[g], CUDA_R_16BF, K, G[g], CUDA_R_16BF, K, &zero,
                   C[g], CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
  };
  auto sync = [&]() { for (int g = 0; g < ws; ++g) { CK(cudaSetDevice(g)); CK(cudaDeviceSynchronize()); } };
  auto timeIt = [&](auto f) {
    std::vector<double> t;
    for (int i = 0; i < 25; ++i) {
      sync();
      auto t0 = std::chrono::steady_clock::now();
      f();
      sync();
      t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double tc = timeIt(copies), tg = timeIt(gemm), tb = timeIt([&] { copies(); gemm(); });
  printf("%s%s streams/peer %d nobarrier %d noflags %d ", ring ? "ring " : "", pull ? "pull" : "push", nsp, wflags != 0, noFlags);
  printf("ws %d  %zux%zux%zu  chunks %d  shard %zu MiB: CE allgather %.1f us (%.0f GB/s out per GPU), gemm %.1f us, both %.1f us (floor ratio %.3f)\n",
         ws, M, N, K, chunks, shard >> 20, tc, shard * (ws - 1) / tc / 1e3, tg, tb, tb / std::max(tc, tg));
  return 0;
}
