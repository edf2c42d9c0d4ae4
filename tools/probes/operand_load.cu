// One-off probe (src/kernels/gemm/README.md, "Row pitches that are not a multiple of 128 bytes"):
// how fast does an SM stream GEMM operand tiles (128 rows x 64 bf16, the 128-byte swizzle) into
// shared memory when the row pitch is not a multiple of 128 bytes, by TMA against cp.async?
// Build: nvcc -O2 -std=c++17 -arch=sm_90a tools/probes/operand_load.cu -lcuda -o operand_load_probe
// Run:   ./operand_load_probe [rows] [reps]
// Each CTA (one per SM) streams 128 x 64 boxes of a [rows, K] bf16 matrix through a ring of 8
// shared-memory stages: by TMA (one thread, 128-byte swizzle, the engine's map) or by cp.async
// (128 threads, 16 bytes each, the same swizzled layout, one mbarrier arrival per thread). CTA c
// streams row block c mod (row blocks), every k-block, `reps` times over. Printed: GB/s of boxes
// landed for K = 4096 (8192-byte rows), 4104 (8208: 16 bytes past a multiple of 128) and 4160
// (8320), with 2048 rows (16 row blocks, each read by ~8 CTAs at once: L2) and `rows` rows (a row
// block per CTA: HBM). No compute: this times the load path alone.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("%s:%d CUresult %d\n", __FILE__, __LINE__, (int)r_); exit(1);} } while (0)

constexpr int kStages = 8, kBoxRows = 128, kBoxBytes = kBoxRows * 128, kThreads = 128;

__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

template <bool kTma>
__global__ void __launch_bounds__(kThreads, 1)
    stream(const __grid_constant__ CUtensorMap map, const char* base, int64_t pitch, int rows, int kBlocks, int reps,
           int64_t kBytes, unsigned long long* sink) {
  extern __shared__ __align__(1024) uint8_t raw[];
  uint8_t* tiles = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) uint64_t full[kStages];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(&full[s])), "r"(kTma ? 1 : kThreads));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int rowBlocks = (rows + kBoxRows - 1) / kBoxRows;
  uint32_t stage = 0, phase = 0;
  int64_t issued = 0;
  const int rb = blockIdx.x % rowBlocks;
  for (int rep = 0; rep < reps; ++rep)
      for (int kb = 0; kb < kBlocks; ++kb) {
        const uint32_t bar = smem(&full[stage]);
        if (issued >= kStages) wait(bar, phase ^ 1u);  // the stage's previous box has landed
        const uint32_t dst = smem(tiles + stage * kBoxBytes);
        if constexpr (kTma) {
          if (threadIdx.x == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(kBoxBytes) : "memory");
            asm volatile(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                "l"(&map), "r"(kb * 64), "r"(rb * kBoxRows), "r"(bar)
                : "memory");
          }
        } else {
          // 1024 chunks of 16 bytes: thread t takes chunk t % 8 of rows t / 8, t / 8 + 16, ...
          const int chunk = threadIdx.x % 8;
          const int64_t kOff = int64_t(kb) * 128 + chunk * 16;
#pragma unroll
          for (int i = 0; i < kBoxRows / 16; ++i) {
            const int r = threadIdx.x / 8 + 16 * i;
            const int row = rb * kBoxRows + r;
            const bool ok = row < rows && kOff < kBytes;
            const char* src = base + (ok ? int64_t(row) * pitch + kOff : 0);
            const uint32_t to = dst + r * 128 + ((chunk ^ (r & 7)) << 4);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(src), "r"(ok ? 16 : 0) : "memory");
          }
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
        }
        ++issued;
        if (++stage == kStages) { stage = 0; phase ^= 1u; }
      }
  // Drain: every stage's last box has landed.
  for (int s = 0; s < kStages && s < issued; ++s) {
    const int64_t last = issued - 1 - s;
    const uint32_t st = uint32_t(last % kStages), ph = uint32_t((last / kStages) & 1);
    wait(smem(&full[st]), ph);
  }
  if (threadIdx.x == 0 && sink) atomicAdd(sink, tiles[threadIdx.x]);
}

int main(int argc, char** argv) {
  const int bigRows = argc > 1 ? atoi(argv[1]) : 16384;
  const int reps = argc > 2 ? atoi(argv[2]) : 4;
  CK(cudaSetDevice(0));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t smemBytes = kStages * kBoxBytes + 1024;
  CK(cudaFuncSetAttribute(stream<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smemBytes));
  CK(cudaFuncSetAttribute(stream<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smemBytes));
  unsigned long long* sink;
  CK(cudaMalloc(&sink, 8));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("%-6s %-6s %-8s %-8s %10s\n", "rows", "K", "pitch", "path", "GB/s");
  for (int rows : {2048, bigRows})
    for (int K : {4096, 4104, 4160}) {
      const int64_t pitch = int64_t(K) * 2;
      char* buf;
      CK(cudaMalloc(&buf, size_t(rows) * pitch));
      CK(cudaMemset(buf, 1, size_t(rows) * pitch));
      CUtensorMap map;
      const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)};
      const cuuint64_t strides[1] = {cuuint64_t(pitch)};
      const cuuint32_t box[2] = {64, kBoxRows}, es[2] = {1, 1};
      CU(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, buf, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      const int kBlocks = (K + 63) / 64;
      const int r = reps;
      for (int path = 0; path < 2; ++path) {
        std::vector<float> ms;
        for (int it = 0; it < 7; ++it) {
          CK(cudaEventRecord(e0));
          if (path == 0)
            stream<true><<<sms, kThreads, smemBytes>>>(map, buf, pitch, rows, kBlocks, r, pitch, sink);
          else
            stream<false><<<sms, kThreads, smemBytes>>>(map, buf, pitch, rows, kBlocks, r, pitch, sink);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float t = 0;
          CK(cudaEventElapsedTime(&t, e0, e1));
          ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double bytes = double(r) * sms * kBlocks * kBoxBytes;
        printf("%-6d %-6d %-8lld %-8s %10.0f\n", rows, K, (long long)pitch, path == 0 ? "tma" : "cp.async",
               bytes / (ms[3] * 1e-3) / 1e9);
      }
      CK(cudaFree(buf));
    }
  return 0;
}
