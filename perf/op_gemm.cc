// mkccl-perf gemm: C[M, N] = A[M, K] . W[N, K]^T on one GPU, ours (mkcclGemm) against cuBLAS
// (cublasGemmEx, fp32 compute, the same "TN" layout) in the same run. Inputs rotate through
// enough buffer sets to defeat L2 residency; each shape is checked against cuBLAS' result.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>
#include "coll_data.h"
#include "op_util.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

constexpr const char* kOp = "gemm";

// MKCCL_PERF_GEMM_VARIANTS="auto,256x2,256x1,..." times each named engine configuration (the
// tuner's gemm.variant) on every shape, one row each, against one cuBLAS baseline per shape; an
// item with '=' is a whole tuner string instead (e.g. "gemm.variant=80x2;gemm.cluster_n=2"); unset,
// the configuration is whatever MKCCL_TUNING says (auto by default).
std::vector<std::string> variantsToRun() {
  std::vector<std::string> out;
  const char* list = getenv("MKCCL_PERF_GEMM_VARIANTS");
  if (list == nullptr || *list == '\0') {
    out.push_back("");
    return out;
  }
  std::string cur;
  for (const char* c = list;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*c == '\0') break;
    } else if (*c != ' ') {
      cur += *c;
    }
  }
  if (out.empty()) out.push_back("");
  return out;
}

// The tuner string of a MKCCL_PERF_GEMM_VARIANTS item ("": the caller's setting).
std::string variantTuning(const std::string& variant) {
  if (variant.empty() || variant.find('=') != std::string::npos) return variant;
  return "gemm.variant=" + variant;
}

// Elements of `ours` that differ from `ref` by more than 1e-2 of max |ref| (NaN counts: poison left
// unwritten); the largest difference relative to max |ref| in *maxRelErr.
long long countWrong(const std::vector<uint16_t>& ours, const std::vector<uint16_t>& ref, mkcclDataType_t t,
                     double* maxRelErr) {
  double refMax = 0, errMax = 0;
  for (uint16_t v : ref) refMax = std::max(refMax, std::fabs(halfToDouble(v, t)));
  refMax = std::max(refMax, 1e-30);
  long long wrong = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double d = std::fabs(halfToDouble(ours[i], t) - halfToDouble(ref[i], t));
    if (!(d <= 1e-2 * refMax)) ++wrong;
    if (d == d) errMax = std::max(errMax, d);
  }
  *maxRelErr = errMax / refMax;
  return wrong;
}

// MKCCL_PERF_GEMM_SET names a sweep of issue 26's regimes instead of the default shapes (--shapes
// and -m/-n/-k still win): "decode" (M in {1, 16, 64, 128, 256} against N, K in {4096, 8192}, then
// the 7B..70B weight shapes), "odd" (K not a multiple of 64, M and N tails, and their aligned
// neighbours for reference), "all" (both).
std::vector<Shape> namedSet(const std::string& name) {
  std::vector<Shape> out;
  if (name == "decode" || name == "all") {
    for (size_t m : {1, 16, 64, 128, 256})
      for (size_t n : {4096, 8192})
        for (size_t k : {4096, 8192}) out.push_back({m, n, k});
    for (const Shape& s : std::vector<Shape>{{32, 14336, 4096}, {32, 4096, 14336}, {64, 28672, 8192},
                                             {128, 8192, 28672}, {1, 1024, 1024}, {8, 14336, 4096}})
      out.push_back(s);
  }
  if (name == "odd" || name == "all")
    for (const Shape& s : std::vector<Shape>{{8000, 8184, 4104}, {4097, 4104, 4104}, {1000, 1032, 4104},
                                             {8192, 8192, 4104}, {8192, 8192, 4160}, {4096, 4096, 4096},
                                             {1000, 1032, 4096}, {8000, 8184, 4096}, {4097, 4104, 4096},
                                             {2000, 2056, 4104}, {333, 520, 1000}, {2000, 2056, 4096},
                                             {3072, 3072, 4096}})
      out.push_back(s);
  return out;
}

int runGemm(const Args& args, Env& env, std::vector<Result>* results) {
  const mkcclDataType_t t = args.dtype;
  if (t != mkcclBfloat16 && t != mkcclFloat16) {
    fprintf(stderr, "gemm: -d must be bf16 or fp16\n");
    return 1;
  }
  std::vector<Shape> shapes = args.shapes;
  // Default: the issue-5 figure shapes, then issue 26's regimes: decode M (1..256 rows against
  // the weight shapes of 7B..70B models, memory-bound: the JSON's hbm_gbps is the bytes of A, W and
  // C over the time) and shapes that are not multiples of the tile.
  const char* set = getenv("MKCCL_PERF_GEMM_SET");
  if (shapes.empty() && set != nullptr && *set != '\0') {
    shapes = namedSet(set);
    if (shapes.empty()) {
      fprintf(stderr, "gemm: MKCCL_PERF_GEMM_SET=%s: expected decode, odd or all\n", set);
      return 1;
    }
  }
  if (shapes.empty())
    shapes = {{8192, 8192, 8192}, {8192, 2048, 8192}, {4096, 4096, 8192}, {16384, 8192, 2048}, {2048, 8192, 8192},
              {1, 8192, 8192},    {16, 8192, 8192},   {64, 8192, 8192},   {128, 8192, 8192},   {256, 8192, 8192},
              {1, 4096, 4096},    {32, 14336, 4096},  {32, 4096, 14336},  {64, 28672, 8192},   {128, 8192, 28672},
              {8000, 8184, 4104}, {4097, 4104, 4104}, {1000, 1032, 4104}};
  if (env.cublas && cublasSetStream(env.cublas, env.stream) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "gemm: cublasSetStream failed\n");
    return 1;
  }
  const std::vector<std::string> variants = variantsToRun();
  // MKCCL_PERF_GEMM_CHAIN=n: each timed run is n calls back to back (input sets rotating), its time
  // divided by n: the kernels follow each other with no event between them, as in a model's layer
  // or a graph (where the plain GEMM's programmatic dependent launch overlaps their edges).
  const char* chainEnv = getenv("MKCCL_PERF_GEMM_CHAIN");
  const int chain = chainEnv ? atoi(chainEnv) : 1;
  if (chain < 1 || chain > 1000) {
    fprintf(stderr, "gemm: MKCCL_PERF_GEMM_CHAIN=%s: expected 1..1000\n", chainEnv);
    return 1;
  }
  for (const Shape& s : shapes) {
    const size_t M = s.m, N = s.n, K = s.k;
    if (M == 0 || N == 0 || K == 0 || K % 8 != 0 || N % 8 != 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) {
      fprintf(stderr, "gemm: shape %zux%zux%zu: need M, N, K >= 1 and N, K multiples of 8\n", M, N, K);
      return 1;
    }
    // Rotate through enough input sets that they cannot all stay in L2 (50 MB on H100/H200).
    const size_t setBytes = (M + N) * K * 2;
    const int nsets = static_cast<int>(std::max<size_t>(2, std::min<size_t>(8, (256ull << 20) / setBytes + 1)));
    std::vector<DevBuf> A(nsets), W(nsets);
    DevBuf C, R;
    for (int i = 0; i < nsets; ++i)
      if (!A[i].alloc(M * K * 2, kOp, "A") || !W[i].alloc(N * K * 2, kOp, "W")) return 1;
    if (!C.alloc(M * N * 2, kOp, "C") || !R.alloc(M * N * 2, kOp, "R")) return 1;
    // Fresh random inputs in [-1, 1), a different seed per set.
    const uint64_t seed = std::random_device{}();
    for (int i = 0; i < nsets; ++i) {
      fillInput(A[i].p, M * K, t, seed + 2 * i, 0, 0, env.stream);
      fillInput(W[i].p, N * K, t, seed + 2 * i + 1, 0, 0, env.stream);
    }
    if (!cudaOk(kOp, cudaStreamSynchronize(env.stream), "fill")) return 1;
    const double flop = 2.0 * M * N * K;
    bool failed = false;

    // The reference (set 0) and the baseline's time, once for all variants.
    std::vector<uint16_t> ref;
    if (args.check && env.cublas) {
      if (cublasGemmRef(env.cublas, A[0].p, W[0].p, R.p, M, N, K, t) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gemm: cublasGemmEx failed\n");
        return 1;
      }
      ref.resize(M * N);
      // The stream is non-blocking: cudaMemcpy (legacy stream) would not wait for cuBLAS.
      if (!cudaOk(kOp, cudaStreamSynchronize(env.stream), "reference")) return 1;
      if (!cudaOk(kOp, cudaMemcpy(ref.data(), R.p, M * N * 2, cudaMemcpyDeviceToHost), "copy")) return 1;
    }
    // Correctness of every variant first: ours against cuBLAS on set 0, ours' output poisoned.
    std::vector<Result> rows;
    for (const std::string& variant : variants) {
      // "" keeps the caller's setting; restored after each variant.
      const ScopedTuning scoped(nullptr, variantTuning(variant));
      if (!scoped.ok()) return 2;
      Result r;
      r.op = "gemm";
      r.worldSize = 1;
      r.dtype = t == mkcclBfloat16 ? "bf16" : "fp16";
      r.hasShape = true;
      r.shape = s;
      r.bytes = setBytes + M * N * 2;
      r.count = M * N;
      if (!cudaOk(kOp, cudaMemsetAsync(C.p, 0xFF, M * N * 2, env.stream), "poison")) return 1;
      if (mkcclGemm(A[0].p, W[0].p, C.p, M, N, K, t, t, env.stream) != mkcclSuccess) {
        fprintf(stderr, "gemm: mkcclGemm failed: %s\n", mkcclGetLastError(nullptr));
        return 1;
      }
      if (!ref.empty()) {
        if (!cudaOk(kOp, cudaStreamSynchronize(env.stream), "check")) return 1;
        std::vector<uint16_t> ours(M * N);
        if (!cudaOk(kOp, cudaMemcpy(ours.data(), C.p, M * N * 2, cudaMemcpyDeviceToHost), "copy")) return 1;
        r.wrong = countWrong(ours, ref, t, &r.maxRelErr);
      }
      rows.push_back(r);
    }

    // Timing: one GEMM per run, input set rotating; cuBLAS and every variant in alternating blocks
    // (timeAlternating: the clocks' drift over a long run weighs on all alike).
    std::vector<Candidate> cand;
    const bool base = args.baseline && env.cublas;
    if (base)
      cand.emplace_back("cuBLAS", [&](int i) {
        for (int c = 0; c < chain; ++c) {
          const int k = (i * chain + c) % nsets;
          if (cublasGemmRef(env.cublas, A[k].p, W[k].p, R.p, M, N, K, t) != CUBLAS_STATUS_SUCCESS) failed = true;
        }
      });
    for (const std::string& variant : variants)
      cand.emplace_back("mkcclGemm " + (variant.empty() ? std::string("auto") : variant),
                        [&](int i) {
                          for (int c = 0; c < chain; ++c) {
                            const int k = (i * chain + c) % nsets;
                            if (mkcclGemm(A[k].p, W[k].p, C.p, M, N, K, t, t, env.stream) != mkcclSuccess)
                              failed = true;
                          }
                        },
                        nullptr, variantTuning(variant));
    if (!timeAlternating(cand, args.warmup, args.iters, args.rounds, env.stream) || failed) {
      fprintf(stderr, "gemm: a timed run failed: %s\n", mkcclGetLastError(nullptr));
      return 1;
    }
    for (Candidate& c : cand) c.us /= chain;
    const double baseUs = base ? cand[0].us : -1;
    for (size_t v = 0; v < variants.size(); ++v) {
      Result& r = rows[v];
      const std::string& variant = variants[v];
      r.timeUs = cand[v + (base ? 1 : 0)].us;
      r.extra["tflops"] = flop / (r.timeUs * 1e-6) / 1e12;
      r.extra["chain"] = chain;
      const double ioBytes = 2.0 * (M * K + N * K + M * N);
      r.extra["hbm_gbps"] = ioBytes / (r.timeUs * 1e-6) / 1e9;
      if (baseUs > 0) {
        r.baseline = "cublas";
        r.baselineTimeUs = baseUs;
        r.extra["baseline_tflops"] = flop / (baseUs * 1e-6) / 1e12;
        r.extra["baseline_hbm_gbps"] = ioBytes / (baseUs * 1e-6) / 1e9;
        r.extra["speedup"] = baseUs / r.timeUs;
      }
      const std::string tuning = userTuning();
      r.note = "variant " + (variant.empty() ? std::string("auto") : variant) +
               (tuning.empty() ? "" : ", tuning " + tuning) + ", " + std::to_string(nsets) + " input sets, " +
               (chain > 1 ? std::to_string(chain) + " calls back to back per timed run (time per call), " : "") +
               timingNote(args.rounds);
      results->push_back(r);
    }
    if (!cudaOk(kOp, cudaStreamSynchronize(env.stream), "sync")) return 1;
  }
  return 0;
}

}  // namespace

MKCCL_PERF_OP("gemm", runGemm,
              "C[M,N] = A[M,K] . W[N,K]^T on one GPU, against cuBLAS. -m M -n N -k K or --shapes MxNxK,... "
              "(default: the issue-5 figure shapes, 2048x8192x8192, decode M and odd shapes); -d bf16|fp16; "
              "MKCCL_PERF_GEMM_VARIANTS=auto,256x2,... times each engine configuration (the tuner's gemm.variant; "
              "\"auto;gemm.split_k=2\" adds tuning); MKCCL_PERF_GEMM_SET=decode|odd|all: issue 26's sweeps; "
              "MKCCL_PERF_GEMM_CHAIN=n: n calls back to back per timed run");

}  // namespace perf
}  // namespace mkccl
