// mkccl-perf moe_a2a: MoE dispatch and combine alone (no expert GEMM), measured in one run as
//   time        our mkcclMoeDispatch then mkcclMoeCombine (Y = the received rows, in place)
//   baseline    NCCL all-to-all(v) (grouped send/recv) of the same token rows, then back the rows of
//               every (token, slot) ("nccl"): what an unfused layer moves, with its counts already
//               on the host and its rows already packed by destination (the baseline's permutes,
//               count exchange and host sync are not timed: a floor for it)
//   extras      dispatch_us / combine_us (ours, each alone), nccl_dispatch_us / nccl_combine_us,
//               dispatch_bytes / combine_bytes (what this rank sends over NVLink, averaged over the
//               ranks; ours sends a (token, rank) row once, and back one row, or one fp32 row of its
//               summed slots, per (token, rank); across nodes a dtype row either way), nccl_*_bytes the same for NCCL, dispatch_gbps /
//               combine_gbps (bytes / time), speedup (baseline / time)
// Shapes: T x H x E (-m T -n H -k E or --shapes TxHxE,...), top-8 when E >= 64 else top-2; by
// default the models (DeepSeek-V3-like 7168 / 256, Qwen3-30B-A3B-like 2048 / 128,
// Mixtral-like 4096 / 8) at T = 128, 512, 4096, 16384 tokens per rank, uniform and skewed routing.
// Ours is checked once per row: out[t] = x_t * sum_j w_j when Y is the dispatched rows. Ours and
// NCCL are timed in alternating blocks (--rounds, perf.h timeAlternating).
#include <cuda_runtime.h>
#include <stdio.h>
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>
#include "coll_data.h"
#include "launch/launch.h"
#include "moe_routing.h"
#include "nccl_loader.h"
#include "op_util.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

constexpr const char* kOp = "moe_a2a";

void makeRouting(int T, int E, int k, int ws, bool skewed, uint64_t seed, std::vector<int32_t>* idx,
                 std::vector<float>* w) {
  makeMoeRouting(T, E, k, ws, skewed, seed, idx, w);
}

int runRow(size_t T, size_t H, int E, bool skewed, const Args& a, Env& env, uint64_t seed) {
  const int ws = env.nranks, me = env.rank, k = E >= 64 ? 8 : 2, El = E / ws;
  if (E % ws != 0 || k > E) {
    if (me == 0) fprintf(stderr, "moe_a2a: E=%d must be a multiple of %d ranks and >= top-k\n", E, ws);
    return 2;
  }
  const mkcclDataType_t t = mkcclBfloat16;
  const size_t es = 2;
  mkcclMoeConfig_t cfg = MKCCL_MOE_CONFIG_INITIALIZER;
  cfg.numExperts = E;
  cfg.topk = k;
  cfg.hidden = H;
  cfg.dtype = t;
  cfg.maxTokensPerRank = T;
  mkcclMoe_t h = nullptr;
  if (mkcclMoeCreate(&h, env.comm, &cfg) != mkcclSuccess) {
    fprintf(stderr, "moe_a2a: rank %d: mkcclMoeCreate: %s\n", me, mkcclGetLastError(env.comm));
    return 1;
  }
  mkcclMoeBuffers buf;
  mkcclMoeGetBuffers(h, &buf);
  struct Destroy {
    mkcclMoe_t h;
    ~Destroy() { mkcclMoeDestroy(h); }
  } destroyH{h};

  // Inputs: a few sets (X beyond L2), each with its own routing.
  const int sets = T * H * es >= (64u << 20) ? 2 : 4;
  std::vector<DevBuf> X(sets), I(sets), W(sets);
  std::vector<std::vector<int32_t>> idx(sets);
  std::vector<std::vector<float>> wt(sets);
  for (int i = 0; i < sets; ++i) {
    makeRouting((int)T, E, k, ws, skewed, seed * 131 + i * 17 + me, &idx[i], &wt[i]);
    if (!X[i].alloc(T * H * es, kOp, "X") || !I[i].alloc(T * k * 4, kOp, "idx") || !W[i].alloc(T * k * 4, kOp, "w"))
      return 1;
    fillInput(X[i].p, T * H, t, seed + i, me, 0, env.stream);
    // On env.stream (non-blocking), which reads them: a pageable cudaMemcpy may return before its
    // DMA lands, and the legacy stream does not order env.stream.
    cudaMemcpyAsync(I[i].p, idx[i].data(), T * k * 4, cudaMemcpyHostToDevice, env.stream);
    cudaMemcpyAsync(W[i].p, wt[i].data(), T * k * 4, cudaMemcpyHostToDevice, env.stream);
  }
  DevBuf out;
  if (!out.alloc(T * H * es, kOp, "out")) return 1;

  // What set 0 sends: rows per (token, rank) pair, slot rows per rank, and ours back per pair.
  std::vector<size_t> pairs(ws, 0), slots(ws, 0);
  double ourBack = 0;
  for (size_t tok = 0; tok < T; ++tok) {
    std::vector<int> m(ws, 0);
    for (int j = 0; j < k; ++j)
      if (idx[0][tok * k + j] >= 0) m[idx[0][tok * k + j] / El]++;
    for (int q = 0; q < ws; ++q) {
      if (!m[q]) continue;
      pairs[q]++;
      slots[q] += m[q];
      // Back over NVLink one row or an fp32 sum per pair; across nodes a dtype row either way.
      if (q != me) ourBack += m[q] == 1 || env.node[q] != env.node[me] ? H * es : H * 4.0;
    }
  }
  // Every rank's counts, for NCCL's receive sizes.
  std::vector<size_t> allPairs((size_t)ws * ws), allSlots((size_t)ws * ws);
  std::string err;
  if (launch::worldAllGather(pairs.data(), ws * sizeof(size_t), allPairs.data(), &err) != 0 ||
      launch::worldAllGather(slots.data(), ws * sizeof(size_t), allSlots.data(), &err) != 0) {
    fprintf(stderr, "moe_a2a: %s\n", err.c_str());
    return 1;
  }
  double ourOut = 0, ncclBack = 0;
  for (int q = 0; q < ws; ++q)
    if (q != me) ourOut += pairs[q] * H * es, ncclBack += slots[q] * H * es;

  bool failed = false;
  auto dispatch = [&](int i) {
    const int s = i % sets;
    if (mkcclMoeDispatch(h, X[s].p, (const int32_t*)I[s].p, (const float*)W[s].p, T, env.stream) != mkcclSuccess)
      failed = true;
  };
  auto combine = [&](int) {
    if (mkcclMoeCombine(h, buf.recvX, out.p, T, env.stream) != mkcclSuccess) failed = true;
  };

  Result r;
  r.op = "moe_a2a";
  r.worldSize = ws;
  r.dtype = dtypeName(t);
  r.hasShape = true;
  r.shape = Shape{T, H, (size_t)E};
  r.count = T * H;

  if (a.check) {  // out = x_t * sum_j w_j (Y = the dispatched rows)
    dispatch(0);
    combine(0);
    std::vector<uint16_t> x(T * H), o(T * H);
    if (failed || !cudaOk(kOp, cudaStreamSynchronize(env.stream), "check") ||
        !cudaOk(kOp, cudaMemcpy(x.data(), X[0].p, T * H * es, cudaMemcpyDeviceToHost), "copy") ||
        !cudaOk(kOp, cudaMemcpy(o.data(), out.p, T * H * es, cudaMemcpyDeviceToHost), "copy")) {
      fprintf(stderr, "moe_a2a: rank %d: the checked run failed: %s\n", me, mkcclGetLastError(env.comm));
      return 1;
    }
    long long wrong = 0;
    double errMax = 0;
    for (size_t tok = 0; tok < T; ++tok) {
      double sw = 0, scale = 1e-30;
      for (int j = 0; j < k; ++j) sw += idx[0][tok * k + j] >= 0 ? wt[0][tok * k + j] : 0;
      for (size_t c = 0; c < H; ++c) scale = std::max(scale, std::fabs(halfToDouble(x[tok * H + c], t) * sw));
      for (size_t c = 0; c < H; ++c) {
        const double e = std::fabs(halfToDouble(o[tok * H + c], t) - halfToDouble(x[tok * H + c], t) * sw) / scale;
        if (!(e <= 1e-2)) ++wrong;
        if (e == e) errMax = std::max(errMax, e);
      }
    }
    r.maxRelErr = errMax;
    r.wrong = wrong;
  }

  // Ours (dispatch alone, combine alone on the layout of set 0's dispatch, both) and NCCL (the pair
  // rows out, the slot rows back, on packed buffers of the same sizes) timed in alternating blocks
  // (perf.h: timeAlternating).
  std::vector<Candidate> cand;
  cand.emplace_back("moe_a2a dispatch+combine", [&](int i) {
    dispatch(i);
    combine(i);
  });
  cand.emplace_back("moe_a2a dispatch", dispatch);
  cand.emplace_back("moe_a2a combine", combine);
  cand.back().before = [&]() { dispatch(0); };
  const bool nccl = a.baseline && env.nccl && env.ncclComm;
  size_t sendP = 0, recvP = 0, sendS = 0, recvS = 0;
  for (int q = 0; q < ws; ++q) {
    sendP += pairs[q], recvP += allPairs[(size_t)q * ws + me];
    sendS += allSlots[(size_t)q * ws + me], recvS += slots[q];
  }
  DevBuf sp, rp, ss, rs;
  std::vector<size_t> pIn(ws), sOut(ws);
  for (int q = 0; q < ws; ++q) pIn[q] = allPairs[(size_t)q * ws + me], sOut[q] = allSlots[(size_t)q * ws + me];
  // sendcounts[q] rows from `send` to q, recvcounts[q] rows from q into `recv`.
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
  auto ncDisp = [&](int) { a2av(sp.p, pairs, rp.p, pIn); };
  auto ncComb = [&](int) { a2av(ss.p, sOut, rs.p, slots); };
  if (nccl) {
    auto alloc = [&](DevBuf& b, size_t rows) { return b.alloc(rows * H * es, kOp, "nccl"); };
    if (!alloc(sp, sendP) || !alloc(rp, recvP) || !alloc(ss, sendS) || !alloc(rs, recvS)) return 1;
    cand.emplace_back("NCCL dispatch+combine", [&](int i) {
      ncDisp(i);
      ncComb(i);
    });
    cand.emplace_back("NCCL dispatch", ncDisp);
    cand.emplace_back("NCCL combine", ncComb);
  }
  if (!timeAlternating(cand, a.warmup, a.iters, a.rounds, env.stream) || failed ||
      !cudaOk(kOp, cudaStreamSynchronize(env.stream), "timing")) {
    fprintf(stderr, "moe_a2a: rank %d: %s\n", me, mkcclGetLastError(env.comm));
    return 1;
  }
  const double bothUs = cand[0].us, dispUs = cand[1].us, combUs = cand[2].us;
  const double ncBothUs = nccl ? cand[3].us : -1, ncDispUs = nccl ? cand[4].us : -1, ncCombUs = nccl ? cand[5].us : -1;

  std::vector<double> tm = {bothUs, dispUs, combUs, ncBothUs, ncDispUs, ncCombUs};
  std::vector<double> by = {ourOut, ourBack, ncclBack};
  if (!combineOverRanks("moe_a2a", tm.data(), tm.size(), false) || !combineOverRanks("moe_a2a", by.data(), by.size(), true))
    return 1;
  for (double& b : by) b /= ws;  // per rank, on average
  r.timeUs = tm[0];
  r.bytes = (size_t)(by[0] + by[1]);
  r.extra["dispatch_us"] = tm[1];
  r.extra["combine_us"] = tm[2];
  r.extra["dispatch_bytes"] = by[0];
  r.extra["combine_bytes"] = by[1];
  r.extra["dispatch_gbps"] = by[0] / (tm[1] * 1e3);
  r.extra["combine_gbps"] = by[1] / (tm[2] * 1e3);
  r.extra["nccl_dispatch_bytes"] = by[0];
  r.extra["nccl_combine_bytes"] = by[2];
  r.extra["top_k"] = k;
  if (nccl) {
    r.baseline = "nccl";
    r.baselineTimeUs = tm[3];
    r.extra["nccl_dispatch_us"] = tm[4];
    r.extra["nccl_combine_us"] = tm[5];
    r.extra["speedup"] = tm[3] / tm[0];
  }
  r.note = std::string(skewed ? "skewed" : "uniform") + " routing, top-" + std::to_string(k) + ", " +
           std::to_string(sets) + " input sets" + (nccl ? "" : ", no NCCL baseline") + ", " + timingNote(a.rounds);
  env.emit(r);
  return 0;
}

int runMoeA2a(const Args& a, Env& env, std::vector<Result>*) {
  if (a.dtype != mkcclBfloat16) {
    if (env.rank == 0) fprintf(stderr, "moe_a2a: -d must be bf16\n");
    return 2;
  }
  std::vector<Shape> shapes = a.shapes;
  if (shapes.empty())
    for (size_t T : {128, 512, 4096, 16384})
      for (const Shape& m : {Shape{0, 7168, 256}, Shape{0, 2048, 128}, Shape{0, 4096, 8}})
        shapes.push_back(Shape{T, m.n, m.k});
  uint64_t seed = a.seed;
  for (const Shape& s : shapes)
    for (bool skewed : {false, true}) {
      const int rc = runRow(s.m, s.n, (int)s.k, skewed, a, env, seed += 1000);
      if (rc) return rc;
    }
  return 0;
}

}  // namespace

MKCCL_PERF_SHAPE_OP("moe_a2a", runMoeA2a,
                    "MoE dispatch and combine alone: mkcclMoeDispatch + mkcclMoeCombine against NCCL all-to-all(v) of "
                    "the same token rows (out, and back per slot), bytes moved and GB/s. -m T -n H -k E or --shapes "
                    "TxHxE,... (top-8 when E >= 64, else top-2); default: DeepSeek-V3-, Qwen3-30B-A3B- and "
                    "Mixtral-like shapes at T = 128, 512, 4096, 16384, uniform and skewed routing");

}  // namespace perf
}  // namespace mkccl
