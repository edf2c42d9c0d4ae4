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
// same on every rank), all timed in alternating blocks (--rounds, perf.h timeAlternating) so that
// the GPU's clock drift over the run weighs on ours and the baselines alike. The result is checked against cuBLAS (fp32 out) + a fp32 ReduceScatter /
// AllReduce (NCCL's if loaded, else ours), tolerance 1e-2 of the largest magnitude.
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "coll_data.h"
#include "nccl_loader.h"
#include "op_util.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

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
      if (!A[i].alloc(M * Kr * es, name, "A") || !W[i].alloc(N * Kr * es, name, "W")) return 1;
    if (!C.alloc(cRows * N * es, name, "C") || !P.alloc(M * N * es, name, "the baseline's partial") ||
        !Cb.alloc(cRows * N * es, name, "the baseline's output"))
      return 1;
    for (int i = 0; i < nsets; ++i) {
      fillInput(A[i].p, M * Kr, t, seed + 2 * i, env.rank, 0, env.stream);
      fillInput(W[i].p, N * Kr, t, seed + 2 * i + 1, env.rank, 0, env.stream);
    }
    if (!cudaOk(name, cudaStreamSynchronize(env.stream), "fill")) return 1;
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
      if (!cudaOk(name, cudaMemsetAsync(C.p, 0xff, cRows * N * es, env.stream), "poison")) return 1;
      if (ours(0) != mkcclSuccess) {
        fprintf(stderr, "%s: rank %d: %s\n", name, env.rank, mkcclGetLastError(env.comm));
        return 1;
      }
      if (!R32.alloc(cRows * N * 4, name, "the reference") || !P32.alloc(M * N * 4, name, "the reference's partial"))
        return 1;
      if (cublasGemmRef(env.cublas, A[0].p, W[0].p, P32.p, M, N, Kr, t, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) {
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
      if (e != 0 || !cudaOk(name, cudaStreamSynchronize(env.stream), "check")) {
        fprintf(stderr, "%s: the reference's collective failed\n", name);
        return 1;
      }
      std::vector<uint16_t> got(cRows * N);
      std::vector<float> ref(cRows * N);
      if (!cudaOk(name, cudaMemcpy(got.data(), C.p, got.size() * 2, cudaMemcpyDeviceToHost), "copy") ||
          !cudaOk(name, cudaMemcpy(ref.data(), R32.p, ref.size() * 4, cudaMemcpyDeviceToHost), "copy"))
        return 1;
      double refMax = 1e-30, errMax = 0;
      for (float v : ref) refMax = std::max(refMax, double(std::fabs(v)));
      long long wrong = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(halfToDouble(got[i], t) - ref[i]);
        if (!(d <= 1e-2 * refMax)) ++wrong;  // NaN (poison left unwritten) counts as wrong
        if (d == d) errMax = std::max(errMax, d);
      }
      r.maxRelErr = errMax / refMax;
      r.wrong = wrong;
    }

    // Ours, as configured; then each plan forced (for the model, and to show what auto left out);
    // with -R, C registered; then cuBLAS alone, NCCL alone and the two in sequence (the baseline),
    // on the same buffers: all timed in alternating blocks (perf.h: timeAlternating).
    mkcclResult_t firstErr = mkcclSuccess;
    // ours, baseline, gemm alone, comm alone, our sequential plan, our fused plan, the fused plan
    // with the other way of sending the partials (the copy engines or the push team),
    // AllReduce: the fused ReduceScatter then our AllGather (rs_ag; M divisible by the ranks)
    double v[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    bool oursFailed = false, failed = false;
    auto run = [&](int i) {
      const mkcclResult_t e = ours(i);
      if (e != mkcclSuccess && firstErr == mkcclSuccess) firstErr = e;
    };
    // -R: the library's plan with C registered (GEMM+AllReduce: finished tiles stored straight into
    // the peers' C; GEMM+ReduceScatter: the same path as unregistered). Its output on set 0 must be
    // bit-identical to the unregistered call's (the same plan reduces in the same order).
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
    auto runReg = [&](int i) {
      const int k = i % nsets;
      const mkcclResult_t e = allReduce ? mkcclGemmAllReduce(A[k].p, W[k].p, reg.mem, M, N, Kr, t, env.comm, env.stream)
                                        : mkcclGemmReduceScatter(A[k].p, W[k].p, reg.mem, M, N, Kr, t, env.comm, env.stream);
      if (e != mkcclSuccess && firstErr == mkcclSuccess) firstErr = e;
    };
    if (a.registered) {
      if (mkcclMemAlloc(&reg.mem, cRows * N * es) != mkcclSuccess ||
          mkcclCommRegister(env.comm, reg.mem, cRows * N * es, &reg.handle) != mkcclSuccess) {
        fprintf(stderr, "%s: rank %d: registered buffers: %s\n", name, env.rank, mkcclGetLastError(env.comm));
        return 1;
      }
      if (a.check) {
        cudaMemsetAsync(reg.mem, 0xff, cRows * N * es, env.stream);
        run(0);
        runReg(0);
        std::vector<uint16_t> plain(cRows * N), regOut(cRows * N);
        if (firstErr != mkcclSuccess || !cudaOk(name, cudaStreamSynchronize(env.stream), "check") ||
            !cudaOk(name, cudaMemcpy(plain.data(), C.p, plain.size() * 2, cudaMemcpyDeviceToHost), "copy") ||
            !cudaOk(name, cudaMemcpy(regOut.data(), reg.mem, regOut.size() * 2, cudaMemcpyDeviceToHost), "copy")) {
          fprintf(stderr, "%s: rank %d: %zux%zux%zu, registered C: %s\n", name, env.rank, M, N, K,
                  mkcclGetLastError(env.comm));
          return 1;
        }
        if (plain != regOut) r.wrong += 1;  // registered and unregistered must agree bit for bit
      }
    }
    // The plan (and push) forced through the tuner; "": as configured.
    auto forced = [&](const char* plan, const char* push) {
      std::string extra;
      if (plan) extra = key + "plan=" + plan;
      if (push) extra += ";" + key + "push=" + push;
      return extra;
    };
    // The other push than the rule's default (ops/gemm_rs/plan.cu: the copy engines at 2 ranks,
    // bulk stores for the AllReduce from 4 ranks, else the paced team).
    const std::string push = ws == 2 ? "ce" : (allReduce && ws >= 4 ? "bulk" : "team");
    const char* otherPush = push == "ce" ? "team" : "ce";
    const bool nccl = env.nccl && a.baseline;
    auto* nc = static_cast<ncclComm_t>(env.ncclComm);
    auto coll = [&]() {
      const int e = allReduce ? env.nccl->allReduce(P.p, P.p, M * N, ncclType(t), ncclOp(mkcclSum), nc, env.stream)
                              : env.nccl->reduceScatter(P.p, Cb.p, cRows * N, ncclType(t), ncclOp(mkcclSum), nc,
                                                        env.stream);
      if (e != 0) failed = true;
    };
    auto gemm = [&](int i) {
      const int k = i % nsets;
      if (cublasGemmRef(env.cublas, A[k].p, W[k].p, P.p, M, N, Kr, t) != CUBLAS_STATUS_SUCCESS) failed = true;
    };
    std::vector<Candidate> cand;
    std::vector<double*> into;  // where each candidate's time goes
    auto add = [&](double* dst, Candidate c) {
      cand.push_back(std::move(c));
      into.push_back(dst);
    };
    double regUs[1] = {-1};
    add(&v[0], Candidate(name, run, env.comm, forced(nullptr, nullptr)));
    add(&v[4], Candidate(std::string(name) + " sequential", run, env.comm, forced("sequential", nullptr)));
    add(&v[6], Candidate(std::string(name) + " fused, other push", run, env.comm, forced("fused", otherPush)));
    add(&v[5], Candidate(std::string(name) + " fused", run, env.comm, forced("fused", nullptr)));
    if (allReduce && M % ws == 0) add(&v[7], Candidate("gemm_ar rs_ag", run, env.comm, forced("rs_ag", nullptr)));
    if (a.registered) add(&regUs[0], Candidate(std::string(name) + " registered C", runReg, env.comm, ""));
    add(&v[2], Candidate("cuBLAS alone", gemm));
    if (nccl) {
      add(&v[3], Candidate("NCCL alone", [&](int) { coll(); }));
      add(&v[1], Candidate("cuBLAS+NCCL", [&](int i) {
            gemm(i);
            coll();
          }));
      r.baseline = "cublas+nccl";
    }
    if (!timeAlternating(cand, a.warmup, a.iters, a.rounds, env.stream)) oursFailed = true;
    for (size_t i = 0; i < cand.size(); ++i) *into[i] = cand[i].us;
    if (firstErr != mkcclSuccess || oursFailed || failed || v[0] < 0 || (a.registered && regUs[0] < 0)) {
      fprintf(stderr, "%s: rank %d: %zux%zux%zu: %s%s\n", name, env.rank, M, N, K, mkcclGetLastError(env.comm),
              failed ? " (the baseline failed)" : "");
      return 1;
    }
    // -G: the library's plan captured in a CUDA graph and replayed, timed in blocks alternating with
    // eager calls (g[1]; graph_speedup = eager / replay).
    double g[2] = {-1, -1};
    if (a.graphCalls > 0 &&
        !timeEagerAndGraphUs(run, a.graphCalls, a.warmup, a.iters, a.rounds, env.stream, &g[1], &g[0]))
      oursFailed = true;
    if (firstErr != mkcclSuccess || oursFailed) {
      fprintf(stderr, "%s: rank %d: %zux%zux%zu, graph: %s\n", name, env.rank, M, N, K, mkcclGetLastError(env.comm));
      return 1;
    }
    if (!maxOverRanks(name, v, 8)) return 1;
    if (a.graphCalls > 0) {
      if (!maxOverRanks(name, g, 2)) return 1;
      r.extra["graph_us"] = g[0];
      r.extra["graph_eager_us"] = g[1];
      r.extra["graph_speedup"] = g[1] / g[0];  // eager / replay, timed alternately
    }
    if (a.registered) {
      if (!maxOverRanks(name, regUs, 1)) return 1;
      r.extra["reg_us"] = regUs[0];
      r.extra["reg_speedup"] = v[0] / regUs[0];  // > 1: registered faster
    }
    r.timeUs = v[0];
    r.baselineTimeUs = v[1];
    r.extra["gemm_alone_us"] = v[2];
    r.extra["seq_us"] = v[4];
    r.extra["fused_us"] = v[5];
    r.extra["fused_other_push_us"] = v[6];
    if (v[7] > 0) r.extra["rs_ag_us"] = v[7];
    r.extra["tflops"] = 2.0 * M * N * K / (v[0] * 1e-6) / 1e12;
    setFloor(&r, v[0], v[2], v[3]);
    if (v[1] > 0) r.extra["speedup"] = v[1] / v[0];
    // The overrides in force, so that a result says what ran.
    const std::string tuning = userTuning();
    r.note = "tuning " + (tuning.empty() ? std::string("(none)") : tuning) + ", " + std::to_string(nsets) +
             " input sets, other push " + otherPush + ", " + timingNote(a.rounds);
    if (!cudaOk(name, cudaStreamSynchronize(env.stream), "sync")) return 1;
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
