// mkccl-perf gemm_rs_fp8 / gemm_ar_fp8: C = Σ_r (A_r sA_r) . (W_r sW_r)^T with e4m3 inputs and
// per-tensor scales that differ per rank, K split over the ranks (-k is the whole K),
// ReduceScatter'd (C: M/ws rows per rank) or AllReduce'd; C bf16 (-d fp16: fp16). In the same run:
//   time        mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8 (the route the library picks)
//   baseline    cuBLASLt's fp8 GEMM with per-tensor scales and CUBLASLT_MATMUL_DESC_FAST_ACCUM (the
//               accumulation our per-tensor kernel does) into a 16-bit partial, then NCCL
//               ReduceScatter / AllReduce of it ("cublaslt+nccl")
//   extras      gemm_alone_us (cuBLASLt alone), comm_alone_us (NCCL alone), floor_us, floor_ratio
//               = time / floor, seq_us / fused_us / fused_other_push_us (forced: our sequential
//               route, the fused kernel, the fused kernel with the push that is not the default),
//               rs_ag_us (AllReduce, M divisible by the ranks), tflops, speedup
// Every candidate is timed in alternating blocks (--rounds, perf.h timeAlternating), so the GPU's
// clock drift weighs on ours and the baselines alike. Correctness: ours against the baseline's C
// on input set 0 (2e-2 of max |C|; NaN counts: C is poisoned). Inputs rotate through several sets.
// Every number is the max over ranks. Written without a GPU: not yet run.
// gemm_rs_fp8_block / gemm_ar_fp8_block: the same with DeepSeek-V3 block scales (mkcclFp8ScaleBlock:
// each rank's [M][ceil(K_r/128)] and [ceil(N/128)][ceil(K_r/128)]) holding the per-tensor values in
// every block, so that the per-tensor baseline computes the same C. Not yet run either.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <algorithm>
#include <cmath>
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

int runShape(const Shape& s, const Args& a, Env& env, cublasLtHandle_t lt, uint64_t seed, bool allReduce,
             bool block) {
  const char* name = block ? (allReduce ? "gemm_ar_fp8_block" : "gemm_rs_fp8_block")
                           : (allReduce ? "gemm_ar_fp8" : "gemm_rs_fp8");
  const mkcclDataType_t t = a.dtype == mkcclFloat16 ? mkcclFloat16 : mkcclBfloat16;
  const int ws = env.nranks;
  const size_t M = s.m, N = s.n, K = s.k;
  if (M == 0 || N == 0 || K % (16ull * ws) != 0 || N % 8 != 0 || (!allReduce && M % ws != 0) || M > INT32_MAX ||
      N > INT32_MAX) {
    if (env.rank == 0)
      fprintf(stderr, "%s: shape %zux%zux%zu: need N a multiple of 8, K of 16 x ranks (%d)%s\n", name, M, N, K, ws,
              allReduce ? "" : ", M of the ranks");
    return 2;
  }
  const size_t Kr = K / ws, cRows = allReduce ? M : M / ws, es = 2;
  const size_t setBytes = (M + N) * Kr;
  const int sets = static_cast<int>(std::max<size_t>(2, std::min<size_t>(8, (256ull << 20) / setBytes + 1)));
  std::vector<DevBuf> A(sets), W(sets);
  DevBuf C, P, Cb, sA, sW, bA, bW;
  const size_t kb = (Kr + 127) / 128, nA = M * kb, nW = (N + 127) / 128 * kb;  // block scales
  for (int i = 0; i < sets; ++i)
    if (!A[i].alloc(M * Kr, name, "A") || !W[i].alloc(N * Kr, name, "W")) return 1;
  if (!C.alloc(cRows * N * es, name, "C") || !P.alloc(M * N * es, name, "the baseline's partial") ||
      !Cb.alloc(cRows * N * es, name, "the baseline's output") || !sA.alloc(4, name, "sA") || !sW.alloc(4, name, "sW"))
    return 1;
  if (block && (!bA.alloc(nA * 4, name, "block sA") || !bW.alloc(nW * 4, name, "block sW"))) return 1;
  for (int i = 0; i < sets; ++i) {
    fillInput(A[i].p, M * Kr, mkcclFloat8e4m3, seed + 2 * i, env.rank, 0, env.stream);
    fillInput(W[i].p, N * Kr, mkcclFloat8e4m3, seed + 2 * i + 1, env.rank, 0, env.stream);
  }
  // Scales that differ per rank: each partial is scaled before the reduction.
  const float scaleA = 0.75f * (1.f + 0.125f * float(env.rank)), scaleW = 1.5f;
  // On env.stream (non-blocking): a pageable cudaMemcpy may return before its DMA lands, and the
  // legacy stream does not order env.stream.
  const std::vector<float> blockA(block ? nA : 0, scaleA), blockW(block ? nW : 0, scaleW);
  if (!cudaOk(name, cudaMemcpyAsync(sA.p, &scaleA, 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
      !cudaOk(name, cudaMemcpyAsync(sW.p, &scaleW, 4, cudaMemcpyHostToDevice, env.stream), "scales") ||
      (block && !cudaOk(name, cudaMemcpyAsync(bA.p, blockA.data(), nA * 4, cudaMemcpyHostToDevice, env.stream),
                        "scales")) ||
      (block && !cudaOk(name, cudaMemcpyAsync(bW.p, blockW.data(), nW * 4, cudaMemcpyHostToDevice, env.stream),
                        "scales")) ||
      !cudaOk(name, cudaStreamSynchronize(env.stream), "fill"))
    return 1;
  const mkcclFp8Scales_t scales =
      block ? mkcclFp8Scales_t MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleBlock, static_cast<float*>(bA.p),
                                                     static_cast<float*>(bW.p))
            : mkcclFp8Scales_t MKCCL_FP8_SCALES_INIT(mkcclFp8ScaleTensor, static_cast<float*>(sA.p),
                                                     static_cast<float*>(sW.p));

  LtFp8Gemm gemm;
  const bool haveLt = a.baseline && lt &&
                      gemm.init(lt, M, N, Kr, static_cast<float*>(sA.p), static_cast<float*>(sW.p), /*fastAccum=*/true,
                                t == mkcclFloat16 ? CUDA_R_16F : CUDA_R_16BF);
  if (a.baseline && !haveLt) fprintf(stderr, "%s: no cuBLASLt fp8 algorithm for %zux%zux%zu\n", name, M, N, Kr);
  const bool nccl = haveLt && env.nccl != nullptr && env.ncclComm != nullptr;
  const Nccl* nc = env.nccl;
  const ncclComm_t ncomm = static_cast<ncclComm_t>(env.ncclComm);
  bool failed = false;
  mkcclResult_t firstErr = mkcclSuccess;
  auto ours = [&](int i) {
    const int k = i % sets;
    const mkcclResult_t e =
        allReduce ? mkcclGemmAllReduceFp8(A[k].p, W[k].p, C.p, M, N, Kr, &scales, t, env.comm, env.stream)
                  : mkcclGemmReduceScatterFp8(A[k].p, W[k].p, C.p, M, N, Kr, &scales, t, env.comm, env.stream);
    if (e != mkcclSuccess && firstErr == mkcclSuccess) firstErr = e;
  };
  auto lt8 = [&](int i) {
    if (!gemm.run(A[i % sets].p, W[i % sets].p, P.p, env.stream)) failed = true;
  };
  // The 16-bit partial reduced (AllReduce in place), by NCCL, else ours.
  auto coll = [&]() {
    int e = 0;
    if (nccl)
      e = allReduce ? nc->allReduce(P.p, P.p, M * N, ncclType(t), ncclOp(mkcclSum), ncomm, env.stream)
                    : nc->reduceScatter(P.p, Cb.p, cRows * N, ncclType(t), ncclOp(mkcclSum), ncomm, env.stream);
    else
      e = allReduce ? mkcclAllReduce(P.p, P.p, M * N, t, mkcclSum, env.comm, env.stream)
                    : mkcclReduceScatter(P.p, Cb.p, cRows * N, t, mkcclSum, env.comm, env.stream);
    if (e != 0) failed = true;
  };

  Result r;
  r.op = name;
  r.worldSize = ws;
  r.dtype = std::string("e4m3->") + dtypeName(t);
  r.hasShape = true;
  r.shape = s;
  r.bytes = M * N * es;  // the partial reduced
  r.count = M * N;

  if (a.check && haveLt) {
    cudaMemsetAsync(C.p, 0xff, cRows * N * es, env.stream);
    ours(0);
    lt8(0);
    coll();
    if (firstErr != mkcclSuccess || failed || !cudaOk(name, cudaStreamSynchronize(env.stream), "check")) {
      fprintf(stderr, "%s: rank %d: the checked run failed: %s\n", name, env.rank, mkcclGetLastError(env.comm));
      return 1;
    }
    const void* refPtr = allReduce ? P.p : Cb.p;
    std::vector<uint16_t> got(cRows * N), ref(cRows * N);
    if (!cudaOk(name, cudaMemcpy(got.data(), C.p, got.size() * 2, cudaMemcpyDeviceToHost), "copy") ||
        !cudaOk(name, cudaMemcpy(ref.data(), refPtr, ref.size() * 2, cudaMemcpyDeviceToHost), "copy"))
      return 1;
    double refMax = 1e-30, errMax = 0;
    for (uint16_t v : ref) refMax = std::max(refMax, std::fabs(halfToDouble(v, t)));
    long long wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::fabs(halfToDouble(got[i], t) - halfToDouble(ref[i], t));
      if (!(d <= 2e-2 * refMax)) ++wrong;
      if (d == d) errMax = std::max(errMax, d);
    }
    r.maxRelErr = errMax / refMax;
    r.wrong = wrong;
  }

  const std::string key = allReduce ? "gemm_ar." : "gemm_rs.";
  auto forced = [&](const char* plan, const char* push) {
    std::string extra = key + "plan=" + plan;
    if (push) extra += ";" + key + "push=" + push;
    return extra;
  };
  // The push that is not the rule's default (ops/gemm_rs/plan.cu).
  const std::string defPush = ws == 2 ? "ce" : (allReduce && ws >= 4 ? "bulk" : "team");
  const char* otherPush = defPush == "ce" ? "team" : "ce";
  // ours, baseline, gemm alone, comm alone, sequential, fused, fused other push, rs_ag
  double v[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  std::vector<Candidate> cand;
  std::vector<double*> into;
  auto add = [&](double* dst, Candidate c) {
    cand.push_back(std::move(c));
    into.push_back(dst);
  };
  add(&v[0], Candidate(name, ours, env.comm, ""));
  add(&v[4], Candidate(std::string(name) + " sequential", ours, env.comm, forced("sequential", nullptr)));
  add(&v[5], Candidate(std::string(name) + " fused", ours, env.comm, forced("fused", nullptr)));
  add(&v[6], Candidate(std::string(name) + " fused, other push", ours, env.comm, forced("fused", otherPush)));
  if (allReduce && M % ws == 0)
    add(&v[7], Candidate(std::string(name) + " rs_ag", ours, env.comm, forced("rs_ag", nullptr)));
  if (haveLt) {
    add(&v[2], Candidate("cuBLASLt fp8 alone", lt8));
    add(&v[3], Candidate(nccl ? "NCCL alone" : "our collective alone", [&](int) { coll(); }));
    if (nccl)
      add(&v[1], Candidate("cuBLASLt fp8+NCCL", [&](int i) {
            lt8(i);
            coll();
          }));
  }
  const bool timed = timeAlternating(cand, a.warmup, a.iters, a.rounds, env.stream);
  for (size_t i = 0; i < cand.size(); ++i) *into[i] = cand[i].us;
  if (!timed || failed || firstErr != mkcclSuccess || v[0] < 0) {
    fprintf(stderr, "%s: rank %d: %zux%zux%zu: %s%s\n", name, env.rank, M, N, K, mkcclGetLastError(env.comm),
            failed ? " (the baseline failed)" : "");
    return 1;
  }
  if (!maxOverRanks(name, v, 8)) return 1;
  r.timeUs = v[0];
  r.extra["seq_us"] = v[4];
  r.extra["fused_us"] = v[5];
  r.extra["fused_other_push_us"] = v[6];
  if (v[7] > 0) r.extra["rs_ag_us"] = v[7];
  r.extra["tflops"] = 2.0 * M * N * K / (v[0] * 1e-6) / 1e12;
  if (nccl) {
    r.baseline = "cublaslt+nccl";
    r.baselineTimeUs = v[1];
    r.extra["speedup"] = v[1] / v[0];
  }
  setFloor(&r, v[0], v[2], v[3]);
  const std::string tuning = userTuning();
  r.note = "tuning " + (tuning.empty() ? std::string("(none)") : tuning) +
           (nccl ? "" : ", comm_alone by our collective (no NCCL), no baseline") + ", " + std::to_string(sets) +
           " input sets, other push " + otherPush + ", " + timingNote(a.rounds);
  env.emit(r);
  return 0;
}

int runAll(const Args& a, Env& env, bool allReduce, bool block) {
  std::vector<Shape> shapes = a.shapes;
  if (shapes.empty()) shapes = {{8192, 8192, 8192}, {16384, 8192, 8192}, {4096, 8192, 8192}, {8192, 8192, 4096}};
  cublasLtHandle_t lt = nullptr;
  if (a.baseline && cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "%s: cublasLtCreate failed\n", allReduce ? "gemm_ar_fp8" : "gemm_rs_fp8");
    return 1;
  }
  uint64_t seed = a.seed ? a.seed : 0x5eed8000ull + 977ull * uint64_t(time(nullptr));  // fresh per run
  int rc = 0;
  for (const Shape& s : shapes)
    if ((rc = runShape(s, a, env, lt, seed += 1000, allReduce, block)) != 0) break;
  if (lt) cublasLtDestroy(lt);
  return rc;
}

int runGemmRsFp8(const Args& a, Env& env, std::vector<Result>*) { return runAll(a, env, false, false); }
int runGemmArFp8(const Args& a, Env& env, std::vector<Result>*) { return runAll(a, env, true, false); }
int runGemmRsFp8Block(const Args& a, Env& env, std::vector<Result>*) { return runAll(a, env, false, true); }
int runGemmArFp8Block(const Args& a, Env& env, std::vector<Result>*) { return runAll(a, env, true, true); }

}  // namespace

MKCCL_PERF_SHAPE_OP("gemm_rs_fp8", runGemmRsFp8,
                    "GEMM + ReduceScatter with e4m3 inputs and per-tensor scales per rank (mkcclGemmReduceScatterFp8; "
                    "K split over ranks, -k is the whole K; C bf16, -d fp16 for fp16) against cuBLASLt's fp8 GEMM "
                    "(fast accumulation) then NCCL ReduceScatter, each alone, floor_ratio and each route forced.");
MKCCL_PERF_SHAPE_OP("gemm_ar_fp8", runGemmArFp8,
                    "GEMM + AllReduce with e4m3 inputs and per-tensor scales per rank (mkcclGemmAllReduceFp8), as "
                    "gemm_rs_fp8 with NCCL AllReduce; rs_ag forced too where M divides by the ranks.");
MKCCL_PERF_SHAPE_OP("gemm_rs_fp8_block", runGemmRsFp8Block,
                    "gemm_rs_fp8 with DeepSeek-V3 block scales per rank (mkcclFp8ScaleBlock, the per-tensor values in "
                    "every block; the baseline stays cuBLASLt's per-tensor fp8 GEMM, fast accumulation).");
MKCCL_PERF_SHAPE_OP("gemm_ar_fp8_block", runGemmArFp8Block,
                    "gemm_ar_fp8 with DeepSeek-V3 block scales per rank (mkcclFp8ScaleBlock, the per-tensor values in "
                    "every block; the baseline stays cuBLASLt's per-tensor fp8 GEMM, fast accumulation).");

}  // namespace perf
}  // namespace mkccl
