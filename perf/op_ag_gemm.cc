// mkccl-perf ag_gemm: C[M, N] = AllGather(A)[M, K] . W[N, K]^T, each rank holding A_r[M/ws, K] and
// its own W, measured in one run as
//   time        our mkcclAllGatherGemm (the plan the library picks; note names it)
//   baseline    NCCL AllGather then cuBLAS ("nccl+cublas")
//   extras      gemm_alone_us (cuBLAS on the gathered problem), comm_alone_us (NCCL AllGather),
//               floor_us = the larger (what perfect overlap would give), floor_ratio = time / floor,
//               fused_us / sequential_us (each plan forced through the tuner, to tune the plan
//               model), fused_side_us (the compute CTAs' idle warps pushing instead of comm CTAs:
//               ag_gemm.plan=fused;ag_gemm.comm_ctas=0), ce_us (every SM computes, the copy
//               engines push: ag_gemm.plan=ce), tflops, speedup
//   -R 1        reg_base_us: the library's plan asked for the gathered A into a cudaMalloc buffer;
//               reg_us: the same into a registered one (mkcclMemAlloc + mkcclCommRegister: the
//               peers push straight into it, no copy out of the region); reg_speedup =
//               reg_base_us / reg_us (> 1: registered faster)
// Inputs rotate through several sets (beyond L2); ours is checked against the baseline's C. All of
// the above are timed in alternating blocks (--rounds, perf.h timeAlternating), so that the GPU's
// clock drift over the run weighs on ours and the baselines alike.
// Every number is the max over ranks of the ranks' medians (the row is then the same on all).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>
#include "coll_data.h"
#include "nccl_loader.h"
#include "op_util.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

constexpr const char* kOp = "ag_gemm";

int runShape(const Shape& s, const Args& a, Env& env, uint64_t seed) {
  const mkcclDataType_t t = a.dtype;
  const int ws = env.nranks;
  const size_t M = s.m, N = s.n, K = s.k;
  if (M == 0 || N == 0 || K == 0 || M % ws != 0 || N % 8 != 0 || K % 8 != 0 || M > INT32_MAX || N > INT32_MAX ||
      K > INT32_MAX) {
    if (env.rank == 0)
      fprintf(stderr, "ag_gemm: shape %zux%zux%zu: need M divisible by %d ranks and N, K multiples of 8\n", M, N, K, ws);
    return 2;
  }
  const size_t m = M / ws;
  // Rotate through enough input sets that they cannot all stay in L2 (50 MB).
  const size_t setBytes = (m + N) * K * 2;
  const int sets = static_cast<int>(std::max<size_t>(2, std::min<size_t>(8, (256ull << 20) / setBytes + 1)));
  std::vector<DevBuf> A(sets), W(sets);
  DevBuf C, G, R;
  for (int i = 0; i < sets; ++i)
    if (!A[i].alloc(m * K * 2, kOp, "A") || !W[i].alloc(N * K * 2, kOp, "W")) return 1;
  if (!C.alloc(M * N * 2, kOp, "C") || !G.alloc(M * K * 2, kOp, "G") || !R.alloc(M * N * 2, kOp, "R")) return 1;
  for (int i = 0; i < sets; ++i) {
    fillInput(A[i].p, m * K, t, seed + 2 * i, env.rank, 0, env.stream);
    fillInput(W[i].p, N * K, t, seed + 2 * i + 1, env.rank, 0, env.stream);
  }
  if (!cudaOk(kOp, cudaStreamSynchronize(env.stream), "fill")) return 1;

  const bool nccl = a.baseline && env.nccl != nullptr && env.ncclComm != nullptr && env.cublas != nullptr;
  const Nccl* nc = env.nccl;
  const ncclComm_t ncomm = static_cast<ncclComm_t>(env.ncclComm);
  bool failed = false;
  // The gathered A, by NCCL (or by us when NCCL is missing: still a valid reference for the GEMM).
  auto gather = [&](int k) {
    if (nccl) {
      if (nc->allGather(A[k].p, G.p, m * K, ncclType(t), ncomm, env.stream) != 0) failed = true;
    } else if (mkcclAllGather(A[k].p, G.p, m * K, t, env.comm, env.stream) != mkcclSuccess) {
      failed = true;
    }
  };
  auto ours = [&](int i) {
    const int k = i % sets;
    if (mkcclAllGatherGemm(A[k].p, W[k].p, C.p, nullptr, M, N, K, t, env.comm, env.stream) != mkcclSuccess)
      failed = true;
  };

  Result r;
  r.op = "ag_gemm";
  r.worldSize = ws;
  r.dtype = dtypeName(t);
  r.hasShape = true;
  r.shape = s;
  r.bytes = M * K * 2;  // the gathered A
  r.count = M * N;

  // Correctness: ours (poisoned C) against gather + cuBLAS on set 0.
  if (a.check && env.cublas) {
    cudaMemsetAsync(C.p, 0xff, M * N * 2, env.stream);
    ours(0);
    gather(0);
    if (cublasGemmRef(env.cublas, G.p, W[0].p, R.p, M, N, K, t) != CUBLAS_STATUS_SUCCESS) failed = true;
    if (failed || !cudaOk(kOp, cudaStreamSynchronize(env.stream), "check")) {
      fprintf(stderr, "ag_gemm: rank %d: the checked run failed: %s\n", env.rank, mkcclGetLastError(env.comm));
      return 1;
    }
    std::vector<uint16_t> got(M * N), ref(M * N);
    if (!cudaOk(kOp, cudaMemcpy(got.data(), C.p, M * N * 2, cudaMemcpyDeviceToHost), "copy") ||
        !cudaOk(kOp, cudaMemcpy(ref.data(), R.p, M * N * 2, cudaMemcpyDeviceToHost), "copy"))
      return 1;
    double refMax = 1e-30, errMax = 0;
    for (size_t i = 0; i < M * N; ++i) refMax = std::max(refMax, std::fabs(halfToDouble(ref[i], t)));
    long long wrong = 0;
    for (size_t i = 0; i < M * N; ++i) {
      const double d = std::fabs(halfToDouble(got[i], t) - halfToDouble(ref[i], t));
      if (!(d <= 1e-2 * refMax)) ++wrong;  // NaN (poison left unwritten) counts
      if (d == d) errMax = std::max(errMax, d);
    }
    r.maxRelErr = errMax / refMax;
    r.wrong = wrong;
  }

  // -R: the call with a gathered A, into a plain buffer and into a registered one (each checked
  // against the reference's gathered A first; timed with the others below).
  struct Registered {
    mkcclComm_t comm;
    cudaStream_t stream;
    void* mem = nullptr;
    void* handle = nullptr;
    ~Registered() {
      cudaStreamSynchronize(stream);
      if (handle) mkcclCommDeregister(comm, handle);
      if (mem) mkcclMemFree(mem);
    }
  } reg{env.comm, env.stream};
  DevBuf Gp;
  auto withG = [&](void* g) {
    return [&, g](int i) {
      const int k = i % sets;
      if (mkcclAllGatherGemm(A[k].p, W[k].p, C.p, g, M, N, K, t, env.comm, env.stream) != mkcclSuccess) failed = true;
    };
  };
  if (a.registered) {
    if (mkcclMemAlloc(&reg.mem, M * K * 2) != mkcclSuccess ||
        mkcclCommRegister(env.comm, reg.mem, M * K * 2, &reg.handle) != mkcclSuccess) {
      fprintf(stderr, "ag_gemm: rank %d: registered buffers: %s\n", env.rank, mkcclGetLastError(env.comm));
      return 1;
    }
    if (!Gp.alloc(M * K * 2, kOp, "gathered A")) return 1;
    for (void* g : {Gp.p, reg.mem}) {
      if (!a.check) break;
      cudaMemsetAsync(g, 0xff, M * K * 2, env.stream);
      withG(g)(0);
      gather(0);
      std::vector<uint16_t> got(M * K), ref(M * K);
      if (failed || !cudaOk(kOp, cudaStreamSynchronize(env.stream), "check") ||
          !cudaOk(kOp, cudaMemcpy(got.data(), g, M * K * 2, cudaMemcpyDeviceToHost), "copy") ||
          !cudaOk(kOp, cudaMemcpy(ref.data(), G.p, M * K * 2, cudaMemcpyDeviceToHost), "copy")) {
        fprintf(stderr, "ag_gemm: rank %d: %zux%zux%zu, registered: %s\n", env.rank, M, N, K,
                mkcclGetLastError(env.comm));
        return 1;
      }
      if (got != ref) r.wrong += 1;  // the gathered A must be bit-identical to the reference AllGather's
    }
  }

  // Ours (the library's plan, then each plan forced), the baseline and its parts, on the same
  // buffers, timed in alternating blocks (perf.h: timeAlternating).
  std::vector<Candidate> cand;
  cand.emplace_back("ag_gemm", ours, env.comm, "");
  cand.emplace_back("ag_gemm fused", ours, env.comm, "ag_gemm.plan=fused");
  cand.emplace_back("ag_gemm fused_side", ours, env.comm, "ag_gemm.plan=fused;ag_gemm.comm_ctas=0");
  cand.emplace_back("ag_gemm sequential", ours, env.comm, "ag_gemm.plan=sequential");
  cand.emplace_back("ag_gemm ce", ours, env.comm, "ag_gemm.plan=ce");
  if (a.registered) {
    cand.emplace_back("ag_gemm gathered A", withG(Gp.p), env.comm, "");
    cand.emplace_back("ag_gemm gathered A registered", withG(reg.mem), env.comm, "");
  }
  if (env.cublas) {
    cand.emplace_back("cuBLAS alone", [&](int i) {
      if (cublasGemmRef(env.cublas, G.p, W[i % sets].p, R.p, M, N, K, t) != CUBLAS_STATUS_SUCCESS) failed = true;
    });
    cand.emplace_back(nccl ? "NCCL AllGather alone" : "mkcclAllGather alone", [&](int i) { gather(i % sets); });
    if (nccl)
      cand.emplace_back("NCCL+cuBLAS", [&](int i) {
        gather(i % sets);
        if (cublasGemmRef(env.cublas, G.p, W[i % sets].p, R.p, M, N, K, t) != CUBLAS_STATUS_SUCCESS) failed = true;
      });
  }
  if (!timeAlternating(cand, a.warmup, a.iters, a.rounds, env.stream)) failed = true;
  if (failed || !cudaOk(kOp, cudaStreamSynchronize(env.stream), "timing")) {
    fprintf(stderr, "ag_gemm: rank %d: %zux%zux%zu: %s\n", env.rank, M, N, K, mkcclGetLastError(env.comm));
    return 1;
  }
  size_t ci = 0;
  const double oursUs = cand[ci++].us, fusedUs = cand[ci++].us, sideUs = cand[ci++].us, seqUs = cand[ci++].us,
               ceUs = cand[ci++].us;
  double regBaseUs = -1, regUs = -1, baseUs = -1, gemmUs = -1, commUs = -1;
  if (a.registered) regBaseUs = cand[ci++].us, regUs = cand[ci++].us;
  if (env.cublas) {
    gemmUs = cand[ci++].us, commUs = cand[ci++].us;
    if (nccl) baseUs = cand[ci++].us;
  }
  // -G: the library's plan captured in a CUDA graph and replayed, timed in blocks alternating with
  // eager calls (graph_eager_us; graph_speedup = eager / replay).
  double graphUs = -1, graphEagerUs = -1;
  if (a.graphCalls > 0) {
    if (!timeEagerAndGraphUs(ours, a.graphCalls, a.warmup, a.iters, a.rounds, env.stream, &graphEagerUs, &graphUs))
      failed = true;
    if (failed || graphUs < 0) {
      fprintf(stderr, "ag_gemm: rank %d: %zux%zux%zu, graph: %s\n", env.rank, M, N, K, mkcclGetLastError(env.comm));
      return 1;
    }
  }

  std::vector<double> v = {oursUs, fusedUs, seqUs, baseUs, gemmUs, commUs, sideUs, ceUs, graphUs, regBaseUs, regUs,
                           graphEagerUs};
  if (!maxOverRanks(kOp, v.data(), v.size())) return 1;
  r.timeUs = v[0];
  r.extra["fused_us"] = v[1];
  r.extra["sequential_us"] = v[2];
  r.extra["fused_side_us"] = v[6];
  r.extra["ce_us"] = v[7];
  r.extra["tflops"] = 2.0 * M * N * K / (v[0] * 1e-6) / 1e12;
  if (a.graphCalls > 0) {
    r.extra["graph_us"] = v[8];
    r.extra["graph_eager_us"] = v[11];
    r.extra["graph_speedup"] = v[11] / v[8];  // eager / replay, timed alternately
  }
  if (a.registered) {
    r.extra["reg_base_us"] = v[9];
    r.extra["reg_us"] = v[10];
  }
  if (nccl) {
    r.baseline = "nccl+cublas";
    r.baselineTimeUs = v[3];
    r.extra["speedup"] = v[3] / v[0];
  }
  setFloor(&r, v[0], v[4], v[5]);
  // The overrides in force, so that a result says what ran.
  const std::string tuning = userTuning();
  r.note = "tuning " + (tuning.empty() ? std::string("(none)") : tuning) +
           (nccl ? "" : ", comm_alone by mkcclAllGather (no NCCL)") + ", " + std::to_string(sets) + " input sets, " +
           timingNote(a.rounds);
  if (const char* ctas = getenv("MKCCL_COMM_CTAS"); ctas && *ctas) r.note += std::string(", MKCCL_COMM_CTAS=") + ctas;
  env.emit(r);
  return 0;
}

int runAgGemm(const Args& a, Env& env, std::vector<Result>*) {
  if (a.dtype != mkcclBfloat16 && a.dtype != mkcclFloat16) {
    if (env.rank == 0) fprintf(stderr, "ag_gemm: -d must be bf16 or fp16\n");
    return 2;
  }
  std::vector<Shape> shapes = a.shapes;
  if (shapes.empty())
    shapes = {{8192, 8192, 8192}, {16384, 8192, 8192}, {8192, 2048, 8192}, {4096, 8192, 8192}, {2048, 8192, 8192}};
  if (env.cublas && cublasSetStream(env.cublas, env.stream) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "ag_gemm: cublasSetStream failed\n");
    return 1;
  }
  uint64_t seed = a.seed;
  for (const Shape& s : shapes) {
    const int rc = runShape(s, a, env, seed += 1000);
    if (rc) return rc;
  }
  return 0;
}

}  // namespace

MKCCL_PERF_SHAPE_OP("ag_gemm", runAgGemm,
                    "AllGather + GEMM (C = AllGather(A) . W^T, A_r[M/ws, K] per rank): mkcclAllGatherGemm against NCCL "
                    "AllGather then cuBLAS, with cuBLAS alone, NCCL AllGather alone, floor_ratio and each plan forced. "
                    "-m M -n N -k K or --shapes MxNxK,... (default: the issue-6 figure shapes and 2048x8192x8192); "
                    "-d bf16|fp16");

}  // namespace perf
}  // namespace mkccl
