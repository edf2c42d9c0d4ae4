// mkccl-perf gemm_rs / gemm_ar: C = sum over ranks of A_r . W_r^T, K split over the ranks
// (-k is the whole K), ReduceScatter'd (C: M/ws rows per rank) or AllReduce'd. In the same run:
//   ours             mkcclGemmReduceScatter / mkcclGemmAllReduce (the plan the tuner's rule picks,
//                    src/ops/gemm_rs/rule.h, or MKCCL_TUNING's gemm_rs.plan / gemm_ar.plan)
//   baseline         cuBLAS (bf16 out) then NCCL ReduceScatter / AllReduce
//   gemm_alone_us    cuBLAS alone;  comm_alone_us: the NCCL collective alone (the same buffer)
//   floor_us         the larger of the two; floor_ratio = ours / floor
//   seq_us           our sequential plan (GEMM engine, then our collective), forced
//   fused_us         our fused plan, forced (the two show what the auto plan chose from)
//   fused_other_push_us  the fused plan with another way of sending partials (push): the team
//                    where the copy engines are the default, else the copy engines; the note names it
//   rs_ag_us         gemm_ar, M divisible by the ranks: the fused ReduceScatter then our AllGather, forced
// Inputs rotate over several sets; every number is the max over ranks of the ranks' medians (the
// same on every rank). The result is checked against cuBLAS (fp32 out) + a fp32 ReduceScatter /
// AllReduce (NCCL's if loaded, else ours), tolerance 1e-2 of the largest magnitude.
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "coll_data.h"
#include "launch/launch.h"
#include "nccl_loader.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

struct DevBuf {
  void* p = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  bool alloc(size_t bytes, const char* what) {
    if (cudaMalloc(&p, std::max<size_t>(bytes, 16)) == cudaSuccess) return true;
    fprintf(stderr, "gemm_rs: cannot allocate %zu bytes for %s\n", bytes, what);
    p = nullptr;
    return false;
  }
};

bool cudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "gemm_rs: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

cublasStatus_t cublasGemm(cublasHandle_t h, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                          mkcclDataType_t in, cudaDataType_t out) {
  // Row-major C[M,N] = A[M,K] W[N,K]^T is column-major C^T[N,M] = W (as K x N, transposed) . A^T.
  const cudaDataType_t ct = in == mkcclBfloat16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one,
                      W, ct, static_cast<int>(K), A, ct, static_cast<int>(K), &zero, C, out, static_cast<int>(N),
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// The max over ranks of each value (every rank gets the same numbers).
bool maxOverRanks(double* v, int n) {
  const launch::World& w = launch::world();
  std::vector<double> all(size_t(n) * w.nranks);
  std::string err;
  if (launch::worldAllGather(v, sizeof(double) * n, all.data(), &err) != 0) {
    fprintf(stderr, "gemm_rs: combining over ranks: %s\n", err.c_str());
    return false;
  }
  for (int r = 0; r < w.nranks; ++r)
    for (int i = 0; i < n; ++i) v[i] = std::max(v[i], all[size_t(r) * n + i]);
  return true;
}

float toFloat(uint16_t v, mkcclDataType_t t) {
  if (t == mkcclBfloat16) {
    const uint32_t u = uint32_t(v) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  // fp16 -> float by hand (host code, no cuda_fp16 dependence)
  const uint32_t s = (v >> 15) & 1, e = (v >> 10) & 31, m = v & 1023;
  float f;
  if (e == 0) f = std::ldexp(float(m), -24);
  else if (e == 31) f = m ? NAN : INFINITY;
  else f = std::ldexp(float(m + 1024), int(e) - 25);
  return s ? -f : f;
}

int runGemmReduce(const Args& a, Env& env, std::vector<Result>* results, bool allReduce) {
  const char* name = allReduce ? "gemm_ar" : "gemm_rs";
  const mkcclDataType_t t = a.dtype;
  if (t != mkcclBfloat16 && t != mkcclFloat16) {
    fprintf(stderr, "%s: -d must be bf16 or fp16\n", name);
    return 1;
  }
  std::vector<Shape> shapes = a.shapes;
  if (shapes.empty()) shapes = {{8192, 8192, 8192}, {16384, 8192, 8192}, {4096, 8192, 8192}, {8192, 8192, 4096}};
  if (!env.cublas || cublasSetStream(env.cublas, env.stream) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "%s: cuBLAS unavailable\n", name);
    return 1;
  }
  const int ws = env.nranks;
  const std::string key = allReduce ? "gemm_ar." : "gemm_rs.";
  const uint64_t seed = a.seed ? a.seed : 0x5eed0000ull + 977ull * (uint64_t)time(nullptr);
  for (const Shape& s : shapes) {
    const size_t M = s.m, N = s.n, K = s.k;
    if (M == 0 || N == 0 || K % (8ull * ws) != 0 || N % 8 != 0 || (!allReduce && M % ws != 0) || M > INT32_MAX ||
        N > INT32_MAX) {
      fprintf(stderr, "%s: shape %zux%zux%zu: need N a multiple of 8, K of 8 x ranks (%d)%s\n", name, M, N, K, ws,
              allReduce ? "" : ", M of the ranks");
      return 1;
    }
    const size_t Kr = K / ws, es = 2;
    const size_t cRows = allReduce ? M : M / ws;
    const size_t setBytes = (M + N) * Kr * es;
    const int nsets = int(std::max<size_t>(2, std::min<size_t>(6, (256ull << 20) / setBytes + 1)));
    std::vector<DevBuf> A(nsets), W(nsets);
    DevBuf C, P, Cb, R32, P32;
    for (int i = 0; i < nsets; ++i)
      if (!A[i].alloc(M * Kr * es, "A") || !W[i].alloc(N * Kr * es, "W")) return 1;
    if (!C.alloc(cRows * N * es, "C") || !P.alloc(M * N * es, "the baseline's partial") ||
        !Cb.alloc(cRows * N * es, "the baseline's output"))
      return 1;
    for (int i = 0; i < nsets; ++i) {
      fillInput(A[i].p, M * Kr, t, seed + 2 * i, env.rank, 0, env.stream);
      fillInput(W[i].p, N * Kr, t, seed + 2 * i + 1, env.rank, 0, env.stream);
    }
    if (!cudaOk(cudaStreamSynchronize(env.stream), "fill")) return 1;
    auto ours = [&](int i) {
      const int k = i % nsets;
      return allReduce ? mkcclGemmAllReduce(A[k].p, W[k].p, C.p, M, N, Kr, t, env.comm, env.stream)
                       : mkcclGemmReduceScatter(A[k].p, W[k].p, C.p, M, N, Kr, t, env.comm, env.stream);
    };

    Result r;
    r.op = name;
    r.worldSize = ws;
    r.dtype = dtypeName(t);
    r.hasShape = true;
    r.shape = s;
    r.bytes = M * N * es;
    r.count = M * N;

    // Correctness on set 0: ours (poisoned output) against cuBLAS fp32 + an fp32 collective.
    if (a.check) {
      if (!cudaOk(cudaMemsetAsync(C.p, 0xff, cRows * N * es, env.stream), "poison")) return 1;
      if (ours(0) != mkcclSuccess) {
        fprintf(stderr, "%s: rank %d: %s\n", name, env.rank, mkcclGetLastError(env.comm));
        return 1;
      }
      if (!R32.alloc(cRows * N * 4, "the reference") || !P32.alloc(M * N * 4, "the reference's partial")) return 1;
      if (cublasGemm(env.cublas, A[0].p, W[0].p, P32.p, M, N, Kr, t, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "%s: cublasGemmEx (reference) failed\n", name);
        return 1;
      }
      int e = 0;
      if (env.nccl) {
        auto* nc = static_cast<ncclComm_t>(env.ncclComm);
        e = allReduce ? env.nccl->allReduce(P32.p, R32.p, M * N, ncclType(mkcclFloat32), ncclOp(mkcclSum), nc, env.stream)
                      : env.nccl->reduceScatter(P32.p, R32.p, cRows * N, ncclType(mkcclFloat32), ncclOp(mkcclSum), nc,
                                                env.stream);
      } else {
        e = allReduce ? mkcclAllReduce(P32.p, R32.p, M * N, mkcclFloat32, mkcclSum, env.comm, env.stream)
                      : mkcclReduceScatter(P32.p, R32.p, cRows * N, mkcclFloat32, mkcclSum, env.comm, env.stream);
      }
      if (e != 0 || !cudaOk(cudaStreamSynchronize(env.stream), "check")) {
        fprintf(stderr, "%s: the reference's collective failed\n", name);
        return 1;
      }
      std::vector<uint16_t> got(cRows * N);
      std::vector<float> ref(cRows * N);
      if (!cudaOk(cudaMemcpy(got.data(), C.p, got.size() * 2, cudaMemcpyDeviceToHost), "copy") ||
          !cudaOk(cudaMemcpy(ref.data(), R32.p, ref.size() * 4, cudaMemcpyDeviceToHost), "copy"))
        return 1;
      double refMax = 1e-30, errMax = 0;
      for (float v : ref) refMax = std::max(refMax, double(std::fabs(v)));
      long long wrong = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(double(toFloat(got[i], t)) - ref[i]);
        if (!(d <= 1e-2 * refMax)) ++wrong;  // NaN (poison left unwritten) counts as wrong
        if (d == d) errMax = std::max(errMax, d);
      }
      r.maxRelErr = errMax / refMax;
      r.wrong = wrong;
    }

    // Ours, as configured; then each plan forced (for the model, and to show what auto left out).
    mkcclResult_t firstErr = mkcclSuccess;
    // ours, baseline, gemm alone, comm alone, our sequential plan, our fused plan, the fused plan
    // with the other way of sending the partials (the copy engines or the push team),
    // AllReduce: the fused ReduceScatter then our AllGather (rs_ag; M divisible by the ranks)
    double v[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    bool oursFailed = false;
    auto run = [&](int i) {
      const mkcclResult_t e = ours(i);
      if (e != mkcclSuccess && firstErr == mkcclSuccess) firstErr = e;
    };
    // The plan (and push) forced through the tuner for the timing; "": as configured.
    auto timeOurs = [&](const char* plan, const char* push) {
      std::string extra;
      if (plan) extra = key + "plan=" + plan;
      if (push) extra += ";" + key + "push=" + push;
      return timeWithTuning(extra, run, a.warmup, a.iters, env.stream, env.comm, &oursFailed);
    };
    // The other push than the rule's default (ops/gemm_rs/plan.cu: the copy engines at 2 ranks,
    // bulk stores for the AllReduce from 4 ranks, else the paced team).
    const std::string push = ws == 2 ? "ce" : (allReduce && ws >= 4 ? "bulk" : "team");
    const char* otherPush = push == "ce" ? "team" : "ce";
    v[0] = timeOurs(nullptr, nullptr);
    v[4] = timeOurs("sequential", nullptr);
    v[6] = timeOurs("fused", otherPush);
    v[5] = timeOurs("fused", nullptr);
    if (allReduce && M % ws == 0) v[7] = timeOurs("rs_ag", nullptr);
    if (firstErr != mkcclSuccess || oursFailed || v[0] < 0) {
      fprintf(stderr, "%s: rank %d: %zux%zux%zu: %s\n", name, env.rank, M, N, K, mkcclGetLastError(env.comm));
      return 1;
    }

    // cuBLAS alone, NCCL alone, and the two in sequence (the baseline), on the same buffers.
    bool failed = false;
    v[2] = timeMedianUs(
        [&](int i) {
          const int k = i % nsets;
          if (cublasGemm(env.cublas, A[k].p, W[k].p, P.p, M, N, Kr, t, t == mkcclBfloat16 ? CUDA_R_16BF : CUDA_R_16F) !=
              CUBLAS_STATUS_SUCCESS)
            failed = true;
        },
        a.warmup, a.iters, env.stream);
    if (env.nccl && a.baseline) {
      auto* nc = static_cast<ncclComm_t>(env.ncclComm);
      auto coll = [&]() {
        const int e = allReduce ? env.nccl->allReduce(P.p, P.p, M * N, ncclType(t), ncclOp(mkcclSum), nc, env.stream)
                                : env.nccl->reduceScatter(P.p, Cb.p, cRows * N, ncclType(t), ncclOp(mkcclSum), nc,
                                                          env.stream);
        if (e != 0) failed = true;
      };
      v[3] = timeMedianUs([&](int) { coll(); }, a.warmup, a.iters, env.stream);
      v[1] = timeMedianUs(
          [&](int i) {
            const int k = i % nsets;
            if (cublasGemm(env.cublas, A[k].p, W[k].p, P.p, M, N, Kr, t,
                           t == mkcclBfloat16 ? CUDA_R_16BF : CUDA_R_16F) != CUBLAS_STATUS_SUCCESS)
              failed = true;
            coll();
          },
          a.warmup, a.iters, env.stream);
      r.baseline = "cublas+nccl";
    }
    if (failed) {
      fprintf(stderr, "%s: rank %d: the baseline failed\n", name, env.rank);
      return 1;
    }
    if (!maxOverRanks(v, 8)) return 1;
    r.timeUs = v[0];
    r.baselineTimeUs = v[1];
    r.extra["gemm_alone_us"] = v[2];
    r.extra["seq_us"] = v[4];
    r.extra["fused_us"] = v[5];
    r.extra["fused_other_push_us"] = v[6];
    if (v[7] > 0) r.extra["rs_ag_us"] = v[7];
    r.extra["tflops"] = 2.0 * M * N * K / (v[0] * 1e-6) / 1e12;
    if (v[3] > 0) {
      const double floorUs = std::max(v[2], v[3]);
      r.extra["comm_alone_us"] = v[3];
      r.extra["floor_us"] = floorUs;
      r.extra["floor_ratio"] = v[0] / floorUs;
    }
    if (v[1] > 0) r.extra["speedup"] = v[1] / v[0];
    // The overrides in force, so that a result says what ran.
    const std::string tuning = userTuning();
    r.note = "tuning " + (tuning.empty() ? std::string("(none)") : tuning) + ", " + std::to_string(nsets) +
             " input sets, other push " + otherPush;
    if (!cudaOk(cudaStreamSynchronize(env.stream), "sync")) return 1;
    results->push_back(r);
  }
  return 0;
}

int gemmRsOp(const Args& a, Env& env, std::vector<Result>* out) { return runGemmReduce(a, env, out, false); }
int gemmArOp(const Args& a, Env& env, std::vector<Result>* out) { return runGemmReduce(a, env, out, true); }

}  // namespace

MKCCL_PERF_OP("gemm_rs", gemmRsOp,
              "GEMM + ReduceScatter (K split over ranks; -k is the whole K) vs cuBLAS then NCCL, with the floor "
              "max(cuBLAS alone, NCCL alone). -m/-n/-k or --shapes (default: 8192^3, 16384x8192x8192, 4096x8192x8192, "
              "8192x8192x4096); MKCCL_TUNING=\"gemm_rs.plan=fused|sequential;gemm_rs.push=bulk|team|ce\"");
MKCCL_PERF_OP("gemm_ar", gemmArOp,
              "GEMM + AllReduce (K split over ranks) vs cuBLAS then NCCL, as gemm_rs; "
              "MKCCL_TUNING=\"gemm_ar.plan=fused|rs_ag|sequential\"");

}  // namespace perf
}  // namespace mkccl
