// mkccl-perf gemm_fp8: C[M, N] (bf16) = (A[M, K] sA) . (W[N, K] sW)^T with e4m3 inputs on one GPU:
// ours with per-tensor scales and with DeepSeek-V3 block scales (mkcclGemmFp8) against cuBLASLt's
// fp8 GEMM with per-tensor scales (A/B_SCALE_POINTER, e4m3 in, bf16 out, fp32 compute, "TN"), in
// the same run on the same buffers. cuBLASLt is timed twice: with CUBLASLT_MATMUL_DESC_FAST_ACCUM
// (accumulation left in the tensor cores, as our per-tensor kernel does) and without (its default,
// promoted accumulation). Each row's baseline is the faster of the two; both are in `extra`.
// Correctness: every row against cuBLASLt's promoted result on input set 0 (the block-scaled row
// with the per-tensor values in every block, so that the two must agree). The four are timed in
// alternating blocks (--rounds, perf.h timeAlternating).
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>
#include "coll_data.h"
#include "op_util.h"
#include "lt_fp8.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

constexpr const char* kOp = "gemm_fp8";
constexpr double kPeakTflops = 1979;  // H100/H200 SXM dense fp8

// Elements of `ours` that differ from `ref` by more than 2e-2 of max |ref| (NaN counts).
long long countWrong(const std::vector<uint16_t>& ours, const std::vector<uint16_t>& ref, double* maxRelErr) {
  double refMax = 0, errMax = 0;
  for (uint16_t v : ref) refMax = std::max(refMax, std::fabs(halfToDouble(v, mkcclBfloat16)));
  refMax = std::max(refMax, 1e-30);
  long long wrong = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double d = std::fabs(halfToDouble(ours[i], mkcclBfloat16) - halfToDouble(ref[i], mkcclBfloat16));
    if (!(d <= 2e-2 * refMax)) ++wrong;
    if (d == d) errMax = std::max(errMax, d);
  }
  *maxRelErr = errMax / refMax;
  return wrong;
}

int runGemmFp8(const Args& args, Env& env, std::vector<Result>* results) {
  std::vector<Shape> shapes = args.shapes;
  if (shapes.empty())
    shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 8192, 4096}, {8192, 7168, 2048},
              {4096, 2112, 7168}, {1000, 4104, 4112}, {2049, 1544, 1040}};
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "gemm_fp8: cublasLtCreate failed\n");
    return 1;
  }
  int rc = 0;
  for (const Shape& s : shapes) {
    const size_t M = s.m, N = s.n, K = s.k;
    if (M == 0 || N == 0 || K == 0 || K % 16 != 0 || N % 8 != 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) {
      fprintf(stderr, "gemm_fp8: shape %zux%zux%zu: need M, N, K >= 1, K a multiple of 16, N of 8\n", M, N, K);
      rc = 1;
      break;
    }
    const size_t setBytes = (M + N) * K;
    const int nsets = static_cast<int>(std::max<size_t>(2, std::min<size_t>(8, (256ull << 20) / setBytes + 1)));
    const size_t kb = (K + 127) / 128, nb = (N + 127) / 128;
    std::vector<DevBuf> A(nsets), W(nsets);
    DevBuf C, R, sA, sW, bA, bW;
    for (int i = 0; i < nsets; ++i)
      if (!A[i].alloc(M * K, kOp, "A") || !W[i].alloc(N * K, kOp, "W")) return 1;
    if (!C.alloc(M * N * 2, kOp, "C") || !R.alloc(M * N * 2, kOp, "R") || !sA.alloc(4, kOp, "sA") ||
        !sW.alloc(4, kOp, "sW") || !bA.alloc(M * kb * 4, kOp, "block sA") || !bW.alloc(nb * kb * 4, kOp, "block sW"))
      return 1;
    const uint64_t seed = args.seed ? args.seed : std::random_device{}();
    for (int i = 0; i < nsets; ++i) {
      fillInput(A[i].p, M * K, mkcclFloat8e4m3, seed + 2 * i, 0, 0, env.stream);
      fillInput(W[i].p, N * K, mkcclFloat8e4m3, seed + 2 * i + 1, 0, 0, env.stream);
    }
    // Scales that are not 1; the block scales hold the same values in every block.
    const float scaleA = 0.75f, scaleW = 1.5f;
    std::vector<float> hA(M * kb, scaleA), hW(nb * kb, scaleW);
    // On env.stream (non-blocking): a pageable cudaMemcpy may return before its DMA lands, and the
    // legacy stream does not order env.stream.
    if (!cudaOk(kOp, cudaMemcpyAsync(sA.p, &scaleA, 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
        !cudaOk(kOp, cudaMemcpyAsync(sW.p, &scaleW, 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
        !cudaOk(kOp, cudaMemcpyAsync(bA.p, hA.data(), hA.size() * 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
        !cudaOk(kOp, cudaMemcpyAsync(bW.p, hW.data(), hW.size() * 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
        !cudaOk(kOp, cudaStreamSynchronize(env.stream), "fill"))
      return 1;
    const double flop = 2.0 * M * N * K;
    bool failed = false;

    LtFp8Gemm ltFast, ltPromoted;
    const bool haveLt = args.baseline &&
                        ltFast.init(lt, M, N, K, static_cast<float*>(sA.p), static_cast<float*>(sW.p), true) &&
                        ltPromoted.init(lt, M, N, K, static_cast<float*>(sA.p), static_cast<float*>(sW.p), false);
    if (args.baseline && !haveLt) fprintf(stderr, "gemm_fp8: no cuBLASLt fp8 algorithm for %zux%zux%zu\n", M, N, K);
    std::vector<uint16_t> ref;
    if (haveLt) {
      if (!ltPromoted.run(A[0].p, W[0].p, R.p, env.stream)) {
        fprintf(stderr, "gemm_fp8: cublasLtMatmul failed\n");
        return 1;
      }
      ref.resize(M * N);
      if (!cudaOk(kOp, cudaMemcpy(ref.data(), R.p, M * N * 2, cudaMemcpyDeviceToHost), "copy")) return 1;
    }

    // Ours with per-tensor and with block scales: each checked (poisoned C) against cuBLASLt's
    // promoted result on set 0.
    const mkcclFp8Scales_t scalesTensor MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, static_cast<float*>(sA.p),
                                                              static_cast<float*>(sW.p));
    const mkcclFp8Scales_t scalesBlock MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleBlock, static_cast<float*>(bA.p),
                                                             static_cast<float*>(bW.p));
    Result rows[2];
    for (int b = 0; b < 2; ++b) {
      const bool block = b == 1;
      Result& r = rows[b];
      r.op = block ? "gemm_fp8_block" : "gemm_fp8_tensor";
      r.worldSize = 1;
      r.dtype = "e4m3";
      r.hasShape = true;
      r.shape = s;
      r.bytes = setBytes + M * N * 2;
      r.count = M * N;
      if (!cudaOk(kOp, cudaMemsetAsync(C.p, 0xFF, M * N * 2, env.stream), "poison")) return 1;
      if (mkcclGemmFp8(A[0].p, W[0].p, C.p, M, N, K, block ? &scalesBlock : &scalesTensor, mkcclBfloat16,
                       env.stream) != mkcclSuccess) {
        fprintf(stderr, "gemm_fp8: mkcclGemmFp8 failed: %s\n", mkcclGetLastError(nullptr));
        return 1;
      }
      if (!ref.empty()) {
        if (!cudaOk(kOp, cudaStreamSynchronize(env.stream), "check")) return 1;
        std::vector<uint16_t> ours(M * N);
        if (!cudaOk(kOp, cudaMemcpy(ours.data(), C.p, M * N * 2, cudaMemcpyDeviceToHost), "copy")) return 1;
        r.wrong = countWrong(ours, ref, &r.maxRelErr);
      }
    }

    // Ours (both scale kinds) and cuBLASLt (both accumulations) timed in alternating blocks
    // (perf.h: timeAlternating).
    auto oursRun = [&](const mkcclFp8Scales_t* sc) {
      return [&, sc](int i) {
        const int k = i % nsets;
        if (mkcclGemmFp8(A[k].p, W[k].p, C.p, M, N, K, sc, mkcclBfloat16, env.stream) != mkcclSuccess) failed = true;
      };
    };
    auto ltRun = [&](const LtFp8Gemm* g) {
      return [&, g](int i) {
        if (!g->run(A[i % nsets].p, W[i % nsets].p, R.p, env.stream)) failed = true;
      };
    };
    std::vector<Candidate> cand;
    cand.emplace_back("gemm_fp8 per-tensor", oursRun(&scalesTensor));
    cand.emplace_back("gemm_fp8 block", oursRun(&scalesBlock));
    if (haveLt) {
      cand.emplace_back("cuBLASLt fp8 fast accumulation", ltRun(&ltFast));
      cand.emplace_back("cuBLASLt fp8", ltRun(&ltPromoted));
    }
    if (!timeAlternating(cand, args.warmup, args.iters, args.rounds, env.stream) || failed) {
      fprintf(stderr, "gemm_fp8: %zux%zux%zu: failed while timing: %s\n", M, N, K, mkcclGetLastError(nullptr));
      return 1;
    }
    const double fastUs = haveLt ? cand[2].us : -1, promotedUs = haveLt ? cand[3].us : -1;

    for (int b = 0; b < 2; ++b) {
      const bool block = b == 1;
      Result& r = rows[b];
      r.timeUs = cand[b].us;
      r.extra["tflops"] = flop / (r.timeUs * 1e-6) / 1e12;
      r.extra["peak_fraction"] = r.extra["tflops"] / kPeakTflops;
      if (haveLt) {
        const double baseUs = std::min(fastUs, promotedUs);
        r.baseline = fastUs <= promotedUs ? "cublaslt_fp8_fast_accum" : "cublaslt_fp8";
        r.baselineTimeUs = baseUs;
        r.extra["baseline_tflops"] = flop / (baseUs * 1e-6) / 1e12;
        r.extra["speedup"] = baseUs / r.timeUs;
        r.extra["cublaslt_fast_accum_tflops"] = flop / (fastUs * 1e-6) / 1e12;
        r.extra["cublaslt_promoted_tflops"] = flop / (promotedUs * 1e-6) / 1e12;
      }
      const std::string tuning = userTuning();
      r.note = std::string(block ? "block scales" : "per-tensor scales") +
               (tuning.empty() ? "" : ", tuning " + tuning) + ", " + std::to_string(nsets) + " input sets, " +
               timingNote(args.rounds);
      if (!cudaOk(kOp, cudaStreamSynchronize(env.stream), "sync")) return 1;
      results->push_back(r);
    }
  }
  cublasLtDestroy(lt);
  return rc;
}

}  // namespace

MKCCL_PERF_SHAPE_OP("gemm_fp8", runGemmFp8,
              "e4m3 GEMM C[M,N] (bf16) = (A sA) . (W sW)^T on one GPU: ours with per-tensor and with block "
              "(1x128 / 128x128) scales against cuBLASLt fp8 (per-tensor scales, with and without fast "
              "accumulation). -m M -n N -k K or --shapes MxNxK,... (K a multiple of 16); MKCCL_TUNING "
              "gemm.variant forces a tile configuration");

}  // namespace perf
}  // namespace mkccl
