// mkccl-perf moe: the MoE expert layer, measured in one run as
//   time        ours, both halves fused: mkcclMoeDispatchGemm (dispatch + gate/up GEMM with the
//               SwiGLU epilogue, the GEMM starting on rows as they land), mkcclMoeGemmCombine (down
//               GEMM + combine, each block of Y returned as soon as it is stored), on their
//               overlapped route (moe.fused_route=overlap unless MKCCL_TUNING names a route: the
//               library's default route runs them as the composed calls)
//   composed_us ours, composed: mkcclMoeDispatch, mkcclGroupedGemmSwiglu, mkcclGroupedGemm,
//               mkcclMoeCombine one after the other (fused_vs_composed = composed_us / time);
//               first_half_fused_us: mkcclMoeDispatchGemm, mkcclGroupedGemm, mkcclMoeCombine;
//               dispatch_gemm1_fused_us / dispatch_gemm1_composed_us: the first half alone, each way;
//               gemm2_combine_fused_us / gemm2_combine_composed_us: the second half alone, each way
//   floor       our two grouped GEMMs alone on the dispatched rows (floor_us; floor_ratio = time /
//               floor, composed_floor_ratio the composed layer's)
//   baseline    "nccl+cublas": NCCL all-to-all(v) of one row per (token, slot) out, one cuBLAS GEMM
//               per local expert for gate+up, SwiGLU, one cuBLAS GEMM per expert for down, NCCL
//               all-to-all(v) of the rows back, the weighted sum of each token's rows (fp32). Its
//               routing, counts and the permute of the token rows into the send order are on the
//               host and not timed: a lower bound of the unfused pipeline (perf/moe_layer_dist.py
//               times the whole PyTorch + NCCL layer).
//   extras      dispatch_us, combine_us (ours, each alone), gemms_tflops (floor, routed rows only:
//               6 * T*k * H * I flops per rank), dispatch_bytes / combine_bytes (what this rank sends
//               over NVLink, averaged over the ranks), speedup (baseline / time; composed_speedup
//               baseline / composed_us)
// Shapes: T x H x E (-m T -n H -k E or --shapes TxHxE,...); I from the model the (H, E) pair names
// (7168/256: 2048, 2048/128: 768, 4096/8: 14336), else H/2 rounded up to 128; top-8 when E >= 64
// else top-2. Default: the three models at T = 128, 512, 4096, 16384 tokens per rank, uniform and
// skewed. -d bf16 (default) or fp16.
// Checked once per row only for finite outputs (wrong = non-finite elements): the values are
// checked against fp32 references by tests/moe (moe_test's layer test) and perf/moe_vs_torch.py.
// Every time above is taken in alternating blocks (--rounds, perf.h timeAlternating).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "coll_data.h"
#include "launch/launch.h"
#include "moe_baseline.h"
#include "moe_routing.h"
#include "nccl_loader.h"
#include "op_util.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

constexpr const char* kOp = "moe";

size_t interFor(size_t H, int E) {
  if (H == 7168 && E == 256) return 2048;
  if (H == 2048 && E == 128) return 768;
  if (H == 4096 && E == 8) return 14336;
  return (H / 2 + 127) / 128 * 128;
}

int runLayerRow(size_t T, size_t H, int E, bool skewed, const Args& a, Env& env, uint64_t seed) {
  const int ws = env.nranks, me = env.rank, k = E >= 64 ? 8 : 2, El = E / ws;
  const size_t I = interFor(H, E), Ip = (I + 127) / 128 * 128;
  if (E % ws != 0 || k > E || H % 8 != 0 || I % 8 != 0) {
    if (me == 0) fprintf(stderr, "moe: E=%d must be a multiple of %d ranks and >= top-k; H, I multiples of 8\n", E, ws);
    return 2;
  }
  const mkcclDataType_t t = a.dtype;
  const size_t es = 2;
  mkcclMoeConfig_t cfg = MKCCL_MOE_CONFIG_INITIALIZER;
  cfg.numExperts = E;
  cfg.topk = k;
  cfg.hidden = H;
  cfg.dtype = t;
  cfg.maxTokensPerRank = std::max<size_t>(T, 1);
  mkcclMoe_t h = nullptr;
  if (mkcclMoeCreate(&h, env.comm, &cfg) != mkcclSuccess) {
    fprintf(stderr, "moe: rank %d: mkcclMoeCreate: %s\n", me, mkcclGetLastError(env.comm));
    return 1;
  }
  struct Destroy {
    mkcclMoe_t h;
    ~Destroy() { mkcclMoeDestroy(h); }
  } destroyH{h};
  mkcclMoeBuffers buf;
  mkcclMoeGetBuffers(h, &buf);
  const size_t P = buf.maxRecvRows;

  const int sets = 2;
  std::vector<DevBuf> X(sets), Ix(sets), Wt(sets);
  std::vector<std::vector<int32_t>> idx(sets);
  std::vector<std::vector<float>> wt(sets);
  for (int i = 0; i < sets; ++i) {
    makeMoeRouting((int)T, E, k, ws, skewed, seed * 131 + i * 17 + me, &idx[i], &wt[i]);
    if (!X[i].alloc(std::max<size_t>(T * H * es, 16), kOp, "X") || !Ix[i].alloc(std::max<size_t>(T * k * 4, 16), kOp, "idx") ||
        !Wt[i].alloc(std::max<size_t>(T * k * 4, 16), kOp, "w"))
      return 1;
    fillInput(X[i].p, T * H, t, seed + i, me, 0, env.stream);
    // On env.stream (non-blocking), which reads them: a pageable cudaMemcpy may return before its
    // DMA lands, and the legacy stream does not order env.stream.
    cudaMemcpyAsync(Ix[i].p, idx[i].data(), T * k * 4, cudaMemcpyHostToDevice, env.stream);
    cudaMemcpyAsync(Wt[i].p, wt[i].data(), T * k * 4, cudaMemcpyHostToDevice, env.stream);
  }
  DevBuf W1, W2, act, Y, out;
  if (!W1.alloc(size_t(El) * 2 * Ip * H * es, kOp, "W1") || !W2.alloc(size_t(El) * H * I * es, kOp, "W2") ||
      !act.alloc(P * I * es, kOp, "act") || !Y.alloc(P * H * es, kOp, "Y") ||
      !out.alloc(std::max<size_t>(T * H * es, 16), kOp, "out"))
    return 1;
  // Weights drawn in [-1, 1) like X: the sums grow with K but stay far inside bf16's range.
  fillInput(W1.p, size_t(El) * 2 * Ip * H, t, seed + 7, me, 0, env.stream);
  fillInput(W2.p, size_t(El) * H * I, t, seed + 8, me, 0, env.stream);

  bool failed = false;
  auto ck = [&](mkcclResult_t r) {
    if (r != mkcclSuccess) failed = true;
  };
  auto dispatch = [&](int i) {
    const int s = i % sets;
    ck(mkcclMoeDispatch(h, X[s].p, (const int32_t*)Ix[s].p, (const float*)Wt[s].p, T, env.stream));
  };
  auto gemms = [&](int) {
    ck(mkcclGroupedGemmSwiglu(buf.recvX, W1.p, act.p, buf.expertOffsets, El, P, I, H, t, t, env.stream));
    ck(mkcclGroupedGemm(act.p, W2.p, Y.p, buf.expertOffsets, El, P, H, I, t, t, env.stream));
  };
  auto combine = [&](int) { ck(mkcclMoeCombine(h, Y.p, out.p, T, env.stream)); };
  auto layer = [&](int i) {
    dispatch(i);
    gemms(i);
    combine(i);
  };
  // The fused path: dispatch + SwiGLU GEMM in one call (mkcclMoeDispatchGemm), then the down GEMM
  // and combine.
  auto dispatchGemm = [&](int i) {
    const int s = i % sets;
    ck(mkcclMoeDispatchGemm(h, X[s].p, (const int32_t*)Ix[s].p, (const float*)Wt[s].p, T, W1.p, act.p, I, 1,
                            env.stream));
  };
  auto dispatchThenGemm = [&](int i) {
    dispatch(i);
    ck(mkcclGroupedGemmSwiglu(buf.recvX, W1.p, act.p, buf.expertOffsets, El, P, I, H, t, t, env.stream));
  };
  auto fusedLayer = [&](int i) {
    dispatchGemm(i);
    ck(mkcclGroupedGemm(act.p, W2.p, Y.p, buf.expertOffsets, El, P, H, I, t, t, env.stream));
    combine(i);
  };
  // Both halves fused: mkcclMoeDispatchGemm, then mkcclMoeGemmCombine (down GEMM + combine).
  auto gemmCombine = [&](int) { ck(mkcclMoeGemmCombine(h, act.p, W2.p, Y.p, out.p, I, T, env.stream)); };
  auto gemmThenCombine = [&](int i) {
    ck(mkcclGroupedGemm(act.p, W2.p, Y.p, buf.expertOffsets, El, P, H, I, t, t, env.stream));
    combine(i);
  };
  auto fullyFusedLayer = [&](int i) {
    dispatchGemm(i);
    gemmCombine(i);
  };

  Result r;
  r.op = kOp;
  r.worldSize = ws;
  r.dtype = dtypeName(t);
  r.hasShape = true;
  r.shape = Shape{T, H, (size_t)E};
  r.count = T * H;
  if (a.check) {  // every output of both paths finite (the values themselves: tests/moe)
    long long bad = 0;
    for (int path = 0; path < 3; ++path) {
      if (path == 0) layer(0);
      else if (path == 1) fusedLayer(0);
      else fullyFusedLayer(0);
      std::vector<uint16_t> o(T * H);
      if (failed || !cudaOk(kOp, cudaStreamSynchronize(env.stream), "check") ||
          !cudaOk(kOp, cudaMemcpy(o.data(), out.p, T * H * es, cudaMemcpyDeviceToHost), "copy")) {
        fprintf(stderr, "moe: rank %d: the checked run (%s) failed: %s\n", me, path == 2 ? "both halves fused" : path ? "fused" : "composed",
                mkcclGetLastError(env.comm));
        return 1;
      }
      for (uint16_t v : o) bad += std::isfinite(halfToDouble(v, t)) ? 0 : 1;
    }
    r.wrong = bad;
  }
  // What set 0 sends: rows per (token, rank) pair out, one row (or fp32 row) per pair back; slot
  // rows per rank and per expert for the baseline.
  std::vector<size_t> slots(ws, 0), perExpert(E, 0);
  double ourOut = 0, ourBack = 0, fusedOut = 0;  // fused: every slot's row travels (no expansion)
  for (size_t tok = 0; tok < T; ++tok) {
    std::vector<int> m(ws, 0);
    for (int j = 0; j < k; ++j) {
      const int e = idx[0][tok * k + j];
      if (e < 0) continue;
      m[e / El]++;
      perExpert[e]++;
    }
    for (int q = 0; q < ws; ++q) {
      slots[q] += m[q];
      // Back: one row or an fp32 sum per pair over NVLink, a dtype row either way across nodes.
      const bool sum = m[q] > 1 && env.node[q] == env.node[me];
      if (m[q] && q != me) ourOut += H * es, ourBack += sum ? H * 4.0 : H * es, fusedOut += m[q] * H * es;
    }
  }
  std::vector<size_t> allSlots((size_t)ws * ws), allExpert((size_t)ws * E);
  std::string err;
  if (launch::worldAllGather(slots.data(), ws * sizeof(size_t), allSlots.data(), &err) != 0 ||
      launch::worldAllGather(perExpert.data(), E * sizeof(size_t), allExpert.data(), &err) != 0) {
    fprintf(stderr, "moe: %s\n", err.c_str());
    return 1;
  }
  // Ours (each way) and the baseline timed in alternating blocks (perf.h: timeAlternating). The
  // second half alone runs on the layout and act of one first half (the same rows every time), our
  // grouped GEMMs (floor) and combine alone on the layout of one dispatch: `before` redoes it
  // ahead of each of their blocks, since the other candidates change it.
  std::vector<Candidate> cand;
  cand.emplace_back("moe both halves fused", fullyFusedLayer);
  cand.emplace_back("moe first half fused", fusedLayer);
  cand.emplace_back("moe gemm2+combine fused", gemmCombine);
  cand.back().before = [&]() { dispatchGemm(0); };
  cand.emplace_back("moe gemm2 then combine", gemmThenCombine);
  cand.back().before = [&]() { dispatchGemm(0); };
  cand.emplace_back("moe dispatch+gemm1 fused", dispatchGemm);
  cand.emplace_back("moe dispatch then gemm1", dispatchThenGemm);
  cand.emplace_back("moe composed", layer);
  cand.emplace_back("moe dispatch", dispatch);
  cand.emplace_back("moe grouped GEMMs", gemms);
  cand.back().before = [&]() { dispatch(0); };
  cand.emplace_back("moe combine", combine);
  cand.back().before = [&]() { dispatch(0); };
  const bool base = a.baseline && env.nccl && env.ncclComm && env.cublas;
  DevBuf sb, rb, hb, ab, zb, bb, rowOfDev, ob;
  std::vector<size_t> sOut(ws), sIn(ws);  // rows this rank sends to q / receives from q
  std::vector<size_t> cnt(El, 0);         // rows of each local expert from every source
  auto a2av = [&](const void* send, const std::vector<size_t>& sc, void* recv, const std::vector<size_t>& rc) {
    const Nccl& n = *env.nccl;
    ncclComm_t c = static_cast<ncclComm_t>(env.ncclComm);
    size_t so = 0, ro = 0;
    ncclResult_t res = n.groupStart();
    for (int q = 0; q < ws && res == 0; ++q) {
      if (sc[q]) res = n.send(static_cast<const char*>(send) + so * H * es, sc[q] * H, ncclType(t), q, c, env.stream);
      if (res == 0 && rc[q]) res = n.recv(static_cast<char*>(recv) + ro * H * es, rc[q] * H, ncclType(t), q, c, env.stream);
      so += sc[q], ro += rc[q];
    }
    const ncclResult_t e = n.groupEnd();
    if (res || e) failed = true;
  };
  auto baseline = [&](int) {
    a2av(sb.p, sOut, rb.p, sIn);
    size_t off = 0;
    for (int e = 0; e < El; off += cnt[e++])
      if (cnt[e] && cublasGemmRef(env.cublas, rb.c() + off * H * es, W1.c() + size_t(e) * 2 * Ip * H * es,
                                  hb.c() + off * 2 * I * es, cnt[e], 2 * I, H, t) != 0)
        failed = true;
    // One launch over every expert's rows (elementwise), not one per expert.
    moeSwiglu(hb.p, ab.p, off, I, t, env.stream);
    off = 0;
    for (int e = 0; e < El; off += cnt[e++])
      if (cnt[e] && cublasGemmRef(env.cublas, ab.c() + off * I * es, W2.c() + size_t(e) * H * I * es,
                                  zb.c() + off * H * es, cnt[e], H, I, t) != 0)
        failed = true;
    a2av(zb.p, sIn, bb.p, sOut);
    moeWeightedSum(bb.p, (const int32_t*)rowOfDev.p, (const float*)Wt[0].p, ob.p, T, k, H, t, env.stream);
  };
  if (base) {
    size_t sendRows = 0, recvRows = 0;
    for (int q = 0; q < ws; ++q) {
      sOut[q] = slots[q], sIn[q] = allSlots[(size_t)q * ws + me];
      sendRows += sOut[q], recvRows += sIn[q];
    }
    for (int q = 0; q < ws; ++q)
      for (int e = 0; e < El; ++e) cnt[e] += allExpert[(size_t)q * E + me * El + e];
    if (!sb.alloc(std::max<size_t>(sendRows, 1) * H * es, kOp, "nccl") ||
        !rb.alloc(std::max<size_t>(recvRows, 1) * H * es, kOp, "nccl") ||
        !hb.alloc(std::max<size_t>(recvRows, 1) * 2 * I * es, kOp, "h") ||
        !ab.alloc(std::max<size_t>(recvRows, 1) * I * es, kOp, "act") ||
        !zb.alloc(std::max<size_t>(recvRows, 1) * H * es, kOp, "z") ||
        !bb.alloc(std::max<size_t>(sendRows, 1) * H * es, kOp, "back") ||
        !rowOfDev.alloc(std::max<size_t>(T * k * 4, 16), kOp, "rowOf") ||
        !ob.alloc(std::max<size_t>(T * H * es, 16), kOp, "out"))
      return 1;
    // The returned row of each (token, slot): the send order is by destination rank, then token,
    // then slot (what the host permute that is not timed would have made).
    std::vector<int32_t> rowOf(T * k, -1);
    int32_t pos = 0;
    for (int q = 0; q < ws; ++q)
      for (size_t tok = 0; tok < T; ++tok)
        for (int j = 0; j < k; ++j) {
          const int e = idx[0][tok * k + j];
          if (e >= 0 && e / El == q) rowOf[tok * k + j] = pos++;
        }
    cudaMemcpyAsync(rowOfDev.p, rowOf.data(), T * k * 4, cudaMemcpyHostToDevice, env.stream);
    // Data like ours (the tensor cores' power depends on it): rows drawn as X is.
    fillInput(sb.p, sb.bytes / es, t, seed + 3, me, 0, env.stream);
    fillInput(rb.p, rb.bytes / es, t, seed + 4, me, 0, env.stream);
    cand.emplace_back("NCCL+cuBLAS", baseline);
  }
  if (!timeAlternating(cand, a.warmup, a.iters, a.rounds, env.stream) || failed ||
      !cudaOk(kOp, cudaStreamSynchronize(env.stream), "timing")) {
    fprintf(stderr, "moe: rank %d: %s\n", me, mkcclGetLastError(env.comm));
    return 1;
  }
  const double fullUs = cand[0].us, fusedUs = cand[1].us, gcFusedUs = cand[2].us, gcComposedUs = cand[3].us,
               dgFusedUs = cand[4].us, dgComposedUs = cand[5].us, layerUs = cand[6].us, dispUs = cand[7].us,
               floorUs = cand[8].us, combUs = cand[9].us, ncUs = base ? cand[10].us : -1;

  std::vector<double> tm = {layerUs,   dispUs,     floorUs,   combUs,      ncUs,
                            fusedUs,   dgFusedUs,  dgComposedUs, fullUs, gcFusedUs, gcComposedUs};
  std::vector<double> by = {ourOut, ourBack, fusedOut};
  if (!combineOverRanks("moe", tm.data(), tm.size(), false) || !combineOverRanks("moe", by.data(), by.size(), true))
    return 1;
  for (double& b : by) b /= ws;
  // time: the layer with both halves fused (mkcclMoeDispatchGemm + mkcclMoeGemmCombine);
  // composed_us: the four calls one after the other.
  r.timeUs = tm[8];
  r.bytes = (size_t)(by[2] + by[1]);
  r.extra["composed_us"] = tm[0];
  r.extra["fused_vs_composed"] = tm[0] / tm[8];
  r.extra["first_half_fused_us"] = tm[5];
  r.extra["first_half_fused_vs_composed"] = tm[0] / tm[5];
  r.extra["gemm2_combine_fused_us"] = tm[9];
  r.extra["gemm2_combine_composed_us"] = tm[10];
  r.extra["dispatch_gemm1_fused_us"] = tm[6];
  r.extra["dispatch_gemm1_composed_us"] = tm[7];
  r.extra["dispatch_us"] = tm[1];
  r.extra["floor_us"] = tm[2];
  r.extra["floor_ratio"] = tm[8] / tm[2];
  r.extra["composed_floor_ratio"] = tm[0] / tm[2];
  r.extra["combine_us"] = tm[3];
  r.extra["gemms_tflops"] = 6.0 * double(T) * k * H * I / (tm[2] * 1e-6) / 1e12;
  r.extra["dispatch_bytes"] = by[0];
  r.extra["fused_dispatch_bytes"] = by[2];
  r.extra["combine_bytes"] = by[1];
  r.extra["inter"] = double(I);
  r.extra["top_k"] = k;
  if (base) {
    r.baseline = "nccl+cublas";
    r.baselineTimeUs = tm[4];
    r.extra["speedup"] = tm[4] / tm[8];
    r.extra["composed_speedup"] = tm[4] / tm[0];
  }
  r.note = std::string(skewed ? "skewed" : "uniform") + " routing, top-" + std::to_string(k) + ", I " +
           std::to_string(I) + ", time = both halves fused (dispatch+GEMM1, GEMM2+combine)" +
           (base ? "" : ", no NCCL+cuBLAS baseline") + ", " + timingNote(a.rounds);
  env.emit(r);
  return 0;
}

int runMoeLayer(const Args& a, Env& env, std::vector<Result>*) {
  if (a.dtype != mkcclBfloat16 && a.dtype != mkcclFloat16) {
    if (env.rank == 0) fprintf(stderr, "moe: -d must be bf16 or fp16\n");
    return 2;
  }
  // The fused rows time the overlapped kernels (the default route runs the composed calls), the
  // process's other overrides kept; across emulated nodes (MKCCL_RANKS_PER_NODE below the ranks)
  // the overlapped route is refused, so the default's stays.
  const char* user = getenv("MKCCL_TUNING");
  const char* rpn = getenv("MKCCL_RANKS_PER_NODE");
  const bool oneNode = rpn == nullptr || atoi(rpn) <= 0 || atoi(rpn) >= env.nranks;
  if (oneNode && (user == nullptr || strstr(user, "moe.fused_route") == nullptr)) {
    const std::string t = std::string(user ? user : "") + (user && *user ? ";" : "") + "moe.fused_route=overlap";
    if (mkcclSetTuning(env.comm, t.c_str()) != mkcclSuccess) {
      fprintf(stderr, "moe: mkcclSetTuning(%s): %s\n", t.c_str(), mkcclGetLastError(env.comm));
      return 1;
    }
  }
  std::vector<Shape> shapes = a.shapes;
  if (shapes.empty())
    for (size_t T : {128, 512, 4096, 16384})
      for (const Shape& m : {Shape{0, 7168, 256}, Shape{0, 2048, 128}, Shape{0, 4096, 8}})
        shapes.push_back(Shape{T, m.n, m.k});
  uint64_t seed = a.seed;
  for (const Shape& s : shapes)
    for (bool skewed : {false, true}) {
      const int rc = runLayerRow(s.m, s.n, (int)s.k, skewed, a, env, seed += 1000);
      if (rc) return rc;
    }
  return 0;
}

}  // namespace

MKCCL_PERF_SHAPE_OP("moe", runMoeLayer,
                    "MoE expert layer: fused dispatch + SwiGLU grouped GEMM, fused grouped GEMM + combine; the same as four "
                    "composed calls; "
                    "against NCCL all-to-all(v) + cuBLAS per expert and SwiGLU + NCCL back + weighted sum, and our grouped GEMMs "
                    "alone (floor). "
                    "-m T -n H -k E or --shapes TxHxE,...; default: DeepSeek-V3-, Qwen3-30B-A3B- and Mixtral-like "
                    "shapes at T = 128, 512, 4096, 16384, uniform and skewed routing; -d bf16 or fp16");

}  // namespace perf
}  // namespace mkccl
