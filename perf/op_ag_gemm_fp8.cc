// mkccl-perf ag_gemm_fp8: C[M, N] (bf16) = (AllGather(A) sA) . (W sW)^T with e4m3 inputs and
// per-tensor scales, each rank holding A_r[M/ws, K] and its own W, measured in one run as
//   time        our mkcclAllGatherGemmFp8 (the plan the library picks)
//   baseline    NCCL AllGather of the e4m3 bytes then cuBLASLt's fp8 GEMM with per-tensor scales
//               and CUBLASLT_MATMUL_DESC_FAST_ACCUM (the accumulation our per-tensor kernel does)
//               ("nccl+cublaslt")
//   extras      gemm_alone_us (cuBLASLt alone), comm_alone_us (NCCL AllGather alone), floor_us,
//               floor_ratio = time / floor, fused_us / fused_side_us / sequential_us / ce_us (each
//               plan forced), tflops, speedup
// Correctness: ours against the baseline's C on input set 0 (2e-2 of max |C|; NaN counts: C is
// poisoned). Inputs rotate through several sets (beyond L2). Every number is the max over ranks.
// ag_gemm_fp8_block: the same with DeepSeek-V3 block scales (mkcclFp8ScaleBlock: each rank's
// shard's [M/ws][ceil(K/128)], W's [ceil(N/128)][ceil(K/128)]) holding the per-tensor values in
// every block, so that the per-tensor baseline computes the same C. Not yet run.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>
#include "coll_data.h"
#include "nccl_loader.h"
#include "op_util.h"
#include "lt_fp8.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

int runShape(const Shape& s, const Args& a, Env& env, cublasLtHandle_t lt, uint64_t seed, bool block) {
  const char* kOp = block ? "ag_gemm_fp8_block" : "ag_gemm_fp8";
  const int ws = env.nranks;
  const size_t M = s.m, N = s.n, K = s.k;
  if (M == 0 || N == 0 || K == 0 || M % ws != 0 || N % 8 != 0 || K % 16 != 0 || M > INT32_MAX || N > INT32_MAX ||
      K > INT32_MAX) {
    if (env.rank == 0)
      fprintf(stderr, "%s: shape %zux%zux%zu: need M divisible by %d ranks, N a multiple of 8, K of 16\n", kOp, M, N,
              K, ws);
    return 2;
  }
  const size_t m = M / ws;
  const size_t setBytes = (m + N) * K;
  const int sets = static_cast<int>(std::max<size_t>(2, std::min<size_t>(8, (256ull << 20) / setBytes + 1)));
  std::vector<DevBuf> A(sets), W(sets);
  DevBuf C, G, R, sA, sW, bA, bW;
  const size_t kb = (K + 127) / 128, nA = m * kb, nW = (N + 127) / 128 * kb;  // block scales
  for (int i = 0; i < sets; ++i)
    if (!A[i].alloc(m * K, kOp, "A") || !W[i].alloc(N * K, kOp, "W")) return 1;
  if (!C.alloc(M * N * 2, kOp, "C") || !G.alloc(M * K, kOp, "G") || !R.alloc(M * N * 2, kOp, "R") ||
      !sA.alloc(4, kOp, "sA") || !sW.alloc(4, kOp, "sW"))
    return 1;
  if (block && (!bA.alloc(nA * 4, kOp, "block sA") || !bW.alloc(nW * 4, kOp, "block sW"))) return 1;
  for (int i = 0; i < sets; ++i) {
    fillInput(A[i].p, m * K, mkcclFloat8e4m3, seed + 2 * i, env.rank, 0, env.stream);
    fillInput(W[i].p, N * K, mkcclFloat8e4m3, seed + 2 * i + 1, env.rank, 0, env.stream);
  }
  const float scaleA = 0.75f, scaleW = 1.5f;  // sA the same on every rank (the API's rule)
  // On env.stream (non-blocking): a pageable cudaMemcpy may return before its DMA lands, and the
  // legacy stream does not order env.stream.
  const std::vector<float> blockA(block ? nA : 0, scaleA), blockW(block ? nW : 0, scaleW);
  if (!cudaOk(kOp, cudaMemcpyAsync(sA.p, &scaleA, 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
      !cudaOk(kOp, cudaMemcpyAsync(sW.p, &scaleW, 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
      (block && !cudaOk(kOp, cudaMemcpyAsync(bA.p, blockA.data(), nA * 4, cudaMemcpyHostToDevice, env.stream),
                        "scales")) ||
      (block && !cudaOk(kOp, cudaMemcpyAsync(bW.p, blockW.data(), nW * 4, cudaMemcpyHostToDevice, env.stream),
                        "scales")) ||
      !cudaOk(kOp, cudaStreamSynchronize(env.stream), "fill"))
    return 1;
  const mkcclFp8Scales_t scales =
      block ? mkcclFp8Scales_t MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleBlock, static_cast<float*>(bA.p),
                                                     static_cast<float*>(bW.p))
            : mkcclFp8Scales_t MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, static_cast<float*>(sA.p),
                                                     static_cast<float*>(sW.p));

  LtFp8Gemm gemm;
  const bool haveLt = a.baseline && lt && gemm.init(lt, M, N, K, static_cast<float*>(sA.p), static_cast<float*>(sW.p),
                                                   /*fastAccum=*/true);
  if (a.baseline && !haveLt) fprintf(stderr, "%s: no cuBLASLt fp8 algorithm for %zux%zux%zu\n", kOp, M, N, K);
  const bool nccl = haveLt && env.nccl != nullptr && env.ncclComm != nullptr;
  const Nccl* nc = env.nccl;
  const ncclComm_t ncomm = static_cast<ncclComm_t>(env.ncclComm);
  bool failed = false;
  auto gather = [&](int k) {  // the e4m3 bytes (NCCL, else ours)
    if (nccl) {
      if (nc->allGather(A[k].p, G.p, m * K, ncclType(mkcclUint8), ncomm, env.stream) != 0) failed = true;
    } else if (mkcclAllGather(A[k].p, G.p, m * K, mkcclUint8, env.comm, env.stream) != mkcclSuccess) {
      failed = true;
    }
  };
  auto ours = [&](int i) {
    const int k = i % sets;
    if (mkcclAllGatherGemmFp8(A[k].p, W[k].p, C.p, nullptr, M, N, K, &scales, mkcclBfloat16, env.comm,
                              env.stream) != mkcclSuccess)
      failed = true;
  };

  Result r;
  r.op = kOp;
  r.worldSize = ws;
  r.dtype = "e4m3";
  r.hasShape = true;
  r.shape = s;
  r.bytes = M * K;  // the gathered A
  r.count = M * N;

  if (a.check && haveLt) {
    cudaMemsetAsync(C.p, 0xff, M * N * 2, env.stream);
    ours(0);
    gather(0);
    if (!gemm.run(G.p, W[0].p, R.p, env.stream)) failed = true;
    if (failed || !cudaOk(kOp, cudaStreamSynchronize(env.stream), "check")) {
      fprintf(stderr, "%s: rank %d: the checked run failed: %s\n", kOp, env.rank, mkcclGetLastError(env.comm));
      return 1;
    }
    std::vector<uint16_t> got(M * N), ref(M * N);
    if (!cudaOk(kOp, cudaMemcpy(got.data(), C.p, M * N * 2, cudaMemcpyDeviceToHost), "copy") ||
        !cudaOk(kOp, cudaMemcpy(ref.data(), R.p, M * N * 2, cudaMemcpyDeviceToHost), "copy"))
      return 1;
    double refMax = 1e-30, errMax = 0;
    for (size_t i = 0; i < M * N; ++i) refMax = std::max(refMax, std::fabs(halfToDouble(ref[i], mkcclBfloat16)));
    long long wrong = 0;
    for (size_t i = 0; i < M * N; ++i) {
      const double d = std::fabs(halfToDouble(got[i], mkcclBfloat16) - halfToDouble(ref[i], mkcclBfloat16));
      if (!(d <= 2e-2 * refMax)) ++wrong;
      if (d == d) errMax = std::max(errMax, d);
    }
    r.maxRelErr = errMax / refMax;
    r.wrong = wrong;
  }

  auto timeOurs = [&](const std::string& extra) {
    return timeWithTuning(extra, ours, a.warmup, a.iters, env.stream, env.comm, &failed);
  };
  const double oursUs = timeOurs("");
  const double fusedUs = timeOurs("ag_gemm.plan=fused");
  const double sideUs = timeOurs("ag_gemm.plan=fused;ag_gemm.comm_ctas=0");
  const double seqUs = timeOurs("ag_gemm.plan=sequential");
  const double ceUs = timeOurs("ag_gemm.plan=ce");
  if (failed) {
    fprintf(stderr, "%s: rank %d: %zux%zux%zu: %s\n", kOp, env.rank, M, N, K, mkcclGetLastError(env.comm));
    return 1;
  }
  double baseUs = -1, gemmUs = -1, commUs = -1;
  if (haveLt) {
    gemmUs = timeMedianUs(
        [&](int i) {
          if (!gemm.run(G.p, W[i % sets].p, R.p, env.stream)) failed = true;
        },
        a.warmup, a.iters, env.stream);
    commUs = timeMedianUs([&](int i) { gather(i % sets); }, a.warmup, a.iters, env.stream);
    if (nccl)
      baseUs = timeMedianUs(
          [&](int i) {
            gather(i % sets);
            if (!gemm.run(G.p, W[i % sets].p, R.p, env.stream)) failed = true;
          },
          a.warmup, a.iters, env.stream);
    if (failed || !cudaOk(kOp, cudaStreamSynchronize(env.stream), "baseline")) {
      fprintf(stderr, "%s: rank %d: the baseline failed\n", kOp, env.rank);
      return 1;
    }
  }
  std::vector<double> v = {oursUs, fusedUs, seqUs, baseUs, gemmUs, commUs, sideUs, ceUs};
  if (!maxOverRanks(kOp, v.data(), v.size())) return 1;
  r.timeUs = v[0];
  r.extra["fused_us"] = v[1];
  r.extra["sequential_us"] = v[2];
  r.extra["fused_side_us"] = v[6];
  r.extra["ce_us"] = v[7];
  r.extra["tflops"] = 2.0 * M * N * K / (v[0] * 1e-6) / 1e12;
  if (nccl) {
    r.baseline = "nccl+cublaslt";
    r.baselineTimeUs = v[3];
    r.extra["speedup"] = v[3] / v[0];
  }
  setFloor(&r, v[0], v[4], v[5]);
  const std::string tuning = userTuning();
  r.note = "tuning " + (tuning.empty() ? std::string("(none)") : tuning) +
           (nccl ? "" : ", comm_alone by mkcclAllGather (no NCCL)") + ", " + std::to_string(sets) + " input sets";
  env.emit(r);
  return 0;
}

int runAll(const Args& a, Env& env, bool block) {
  std::vector<Shape> shapes = a.shapes;
  if (shapes.empty()) shapes = {{8192, 8192, 8192}, {8192, 2048, 8192}, {4096, 8192, 8192}, {2048, 8192, 8192}};
  cublasLtHandle_t lt = nullptr;
  if (a.baseline && cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "%s: cublasLtCreate failed\n", block ? "ag_gemm_fp8_block" : "ag_gemm_fp8");
    return 1;
  }
  uint64_t seed = a.seed;
  int rc = 0;
  for (const Shape& s : shapes)
    if ((rc = runShape(s, a, env, lt, seed += 1000, block)) != 0) break;
  if (lt) cublasLtDestroy(lt);
  return rc;
}

int runAgGemmFp8(const Args& a, Env& env, std::vector<Result>*) { return runAll(a, env, false); }
int runAgGemmFp8Block(const Args& a, Env& env, std::vector<Result>*) { return runAll(a, env, true); }

}  // namespace

MKCCL_PERF_SHAPE_OP("ag_gemm_fp8", runAgGemmFp8,
                    "AllGather + GEMM with e4m3 inputs and per-tensor scales (mkcclAllGatherGemmFp8, bf16 C) against "
                    "NCCL AllGather of the e4m3 bytes then cuBLASLt's fp8 GEMM (fast accumulation), with each alone, "
                    "floor_ratio and each plan forced. -m M -n N -k K or --shapes MxNxK,...");
MKCCL_PERF_SHAPE_OP("ag_gemm_fp8_block", runAgGemmFp8Block,
                    "ag_gemm_fp8 with DeepSeek-V3 block scales (mkcclFp8ScaleBlock, the per-tensor values in every "
                    "block; the baseline stays cuBLASLt's per-tensor fp8 GEMM, fast accumulation).");

}  // namespace perf
}  // namespace mkccl
