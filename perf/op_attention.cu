// mkccl-perf attention / ring_attention (shape ops: -m S -n Hq -k Hkv, or --shapes "SxHqxHkv,...";
// B 1, head dim 128, -d bf16|fp16; every shape causal and not).
//
//   attention        mkcclAttention on one GPU, TFLOP/s = 4 B Hq S^2 D, halved when causal. The
//                    same-run baseline against PyTorch SDPA (cuDNN, flash) is perf/attention_vs_sdpa.py
//                    (PyTorch is not linked here). Checked against an fp64 reference on sampled rows.
//   ring_attention   mkcclRingAttention, zigzag layout, -m = tokens per rank, against
//                      baseline  "engine+nccl": per ring step our engine (mkcclAttention on the step's
//                                blocks) and NCCL send/recv of the next K|V chunk on a second stream,
//                                host-driven, partials merged in fp32 (B 1 only)
//                      extras    engine_alone_us: mkcclAttention on the whole sequence / ranks (the
//                                engine's single-GPU rate on the same per-rank work),
//                                ratio_vs_engine = engine_alone_us / time_us, tflops per rank
//                    ours checked against the baseline's result; the three timed in alternating
//                    blocks (--rounds, perf.h timeAlternating).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>
#include "coll_data.h"
#include "nccl_loader.h"
#include "op_util.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

constexpr int kDim = 128;
constexpr const char* kAttn = "attention";
constexpr const char* kRing = "ring_attention";

double flopsOf(double B, double hq, double sq, double skv, int causal) {
  return 4.0 * B * hq * sq * skv * kDim * (causal ? 0.5 : 1.0);
}

// fp64 reference of O for a few (row, head) pairs; max |ours - ref| / max |ref| over them and the
// count past 2e-2 of max |ref|.
void sampledCheck(const DevBuf& Q, const DevBuf& K, const DevBuf& V, const DevBuf& O, int S, int hq, int hkv,
                  int causal, mkcclDataType_t t, float scale, Result* r) {
  std::vector<uint16_t> q(static_cast<size_t>(S) * hq * kDim), k(static_cast<size_t>(S) * hkv * kDim),
      v(k.size()), o(q.size());
  cudaMemcpy(q.data(), Q.p, q.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(k.data(), K.p, k.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(v.data(), V.p, v.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(o.data(), O.p, o.size() * 2, cudaMemcpyDeviceToHost);
  const int rows[] = {0, 1, 127, 128, S / 3, S / 2, S - 129, S - 1};
  double refMax = 1e-30, errMax = 0;
  std::vector<std::pair<double, double>> pairs;
  for (int i : rows) {
    if (i < 0 || i >= S) continue;
    for (int h : {0, hq - 1}) {
      const int hk = h / (hq / hkv);
      const int n = causal ? i + 1 : S;
      std::vector<double> s(n);
      double m = -INFINITY;
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int d = 0; d < kDim; ++d)
          acc += halfToDouble(q[(static_cast<size_t>(i) * hq + h) * kDim + d], t) *
                 halfToDouble(k[(static_cast<size_t>(j) * hkv + hk) * kDim + d], t);
        s[j] = acc * scale;
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (int j = 0; j < n; ++j) l += (s[j] = std::exp(s[j] - m));
      for (int d = 0; d < kDim; ++d) {
        double acc = 0;
        for (int j = 0; j < n; ++j) acc += s[j] * halfToDouble(v[(static_cast<size_t>(j) * hkv + hk) * kDim + d], t);
        const double ref = acc / l, got = halfToDouble(o[(static_cast<size_t>(i) * hq + h) * kDim + d], t);
        refMax = std::max(refMax, std::fabs(ref));
        pairs.push_back({got, ref});
      }
    }
  }
  long long wrong = 0;
  for (auto& pr : pairs) {
    const double d = std::fabs(pr.first - pr.second);
    if (!(d <= 2e-2 * refMax)) ++wrong;
    if (d == d) errMax = std::max(errMax, d);
  }
  r->wrong += wrong;
  r->maxRelErr = std::max(r->maxRelErr, errMax / refMax);
}

std::vector<Shape> shapesOr(const Args& a, std::vector<Shape> def) { return a.shapes.empty() ? def : a.shapes; }

int runAttention(const Args& args, Env& env, std::vector<Result>* results) {
  const mkcclDataType_t t = args.dtype;
  if (t != mkcclBfloat16 && t != mkcclFloat16) {
    fprintf(stderr, "attention: -d must be bf16 or fp16\n");
    return 1;
  }
  std::vector<Shape> def;
  for (size_t s : {4096, 8192, 16384, 32768, 65536}) {
    def.push_back({s, 32, 8});
    def.push_back({s, 16, 16});
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  for (const Shape& sh : shapesOr(args, def)) {
    const int S = static_cast<int>(sh.m), hq = static_cast<int>(sh.n), hkv = static_cast<int>(sh.k);
    if (S < 1 || hq < 1 || hkv < 1 || hq % hkv != 0) {
      fprintf(stderr, "attention: shape %zux%zux%zu: S x Hq x Hkv with Hq a multiple of Hkv\n", sh.m, sh.n, sh.k);
      return 1;
    }
    const size_t qB = static_cast<size_t>(S) * hq * kDim * 2, kvB = static_cast<size_t>(S) * hkv * kDim * 2;
    const int nsets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(4, (512ull << 20) / (qB + 2 * kvB) + 1)));
    std::vector<DevBuf> Q(nsets), K(nsets), V(nsets);
    DevBuf O;
    for (int i = 0; i < nsets; ++i)
      if (!Q[i].alloc(qB, kAttn, "Q") || !K[i].alloc(kvB, kAttn, "K") || !V[i].alloc(kvB, kAttn, "V")) return 1;
    if (!O.alloc(qB, kAttn, "O")) return 1;
    const uint64_t seed = args.seed ? args.seed : std::random_device{}();
    for (int i = 0; i < nsets; ++i) {
      fillInput(Q[i].p, qB / 2, t, seed + 3 * i, 0, 0, env.stream);
      fillInput(K[i].p, kvB / 2, t, seed + 3 * i + 1, 0, 0, env.stream);
      fillInput(V[i].p, kvB / 2, t, seed + 3 * i + 2, 0, 0, env.stream);
    }
    for (int causal : {0, 1}) {
      Result r;
      r.op = "attention";
      r.dtype = dtypeName(t);
      r.hasShape = true;
      r.shape = sh;
      r.bytes = qB * 2 + kvB * 2;
      bool failed = false;
      cudaMemsetAsync(O.p, 0xFF, qB, env.stream);
      if (mkcclAttention(Q[0].p, K[0].p, V[0].p, O.p, nullptr, 1, S, S, hq, hkv, kDim, scale, causal, t, env.stream) !=
          mkcclSuccess) {
        fprintf(stderr, "attention: %s\n", mkcclGetLastError(nullptr));
        return 1;
      }
      cudaStreamSynchronize(env.stream);
      if (args.check) sampledCheck(Q[0], K[0], V[0], O, S, hq, hkv, causal, t, scale, &r);
      r.timeUs = timeMedianUs(
          [&](int i) {
            const int k = i % nsets;
            if (mkcclAttention(Q[k].p, K[k].p, V[k].p, O.p, nullptr, 1, S, S, hq, hkv, kDim, scale, causal, t,
                               env.stream) != mkcclSuccess)
              failed = true;
          },
          args.warmup, args.iters, env.stream);
      if (failed || cudaStreamSynchronize(env.stream) != cudaSuccess) {
        fprintf(stderr, "attention: failed while timing: %s\n", mkcclGetLastError(nullptr));
        return 1;
      }
      r.extra["tflops"] = flopsOf(1, hq, S, S, causal) / (r.timeUs * 1e-6) / 1e12;
      r.extra["causal"] = causal;
      r.note = std::string(causal ? "causal" : "non-causal") + ", D 128, " + std::to_string(nsets) +
               " input sets; SDPA baseline: perf/attention_vs_sdpa.py";
      env.emit(r);
    }
  }
  return 0;
}

// ---- ring_attention ----

// acc (fp32 [S, H, D]) and lacc ([H, S]) merged with a step's O_t (16-bit) and lse_t ([H, ldl]) over
// rows [r0, r0 + n) (O_t and lse_t hold those rows from their own row 0). first: acc = O_t.
template <class T>
__global__ void mergeStep(float* acc, float* lacc, const T* ot, const float* lt, int S, int H, int r0, int n, int ldl,
                          int first) {
  const int row = r0 + blockIdx.x / H, h = blockIdx.x % H, d = threadIdx.x;
  if (blockIdx.x / H >= n) return;
  const float lb = lt[static_cast<size_t>(h) * ldl + (row - r0)];
  const float ob = static_cast<float>(ot[(static_cast<size_t>(row - r0) * H + h) * kDim + d]);
  float* a = acc + (static_cast<size_t>(row) * H + h) * kDim + d;
  float* la = lacc + static_cast<size_t>(h) * S + row;
  if (first) {
    *a = ob;
    __syncthreads();
    if (d == 0) *la = lb;
    return;
  }
  const float lA = *la, mx = fmaxf(lA, lb);
  float wa = 0, wb = 0, l = -INFINITY;
  if (mx != -INFINITY) {
    const float ea = expf(lA - mx), eb = expf(lb - mx);
    wa = ea / (ea + eb);
    wb = eb / (ea + eb);
    l = mx + logf(ea + eb);
  }
  *a = *a * wa + ob * wb;
  __syncthreads();
  if (d == 0) *la = l;
}

template <class T>
__global__ void toOut(const float* acc, T* o, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) o[i] = static_cast<T>(acc[i]);
}

int runRing(const Args& args, Env& env, std::vector<Result>* results) {
  const mkcclDataType_t t = args.dtype;
  if (t != mkcclBfloat16 && t != mkcclFloat16) {
    fprintf(stderr, "ring_attention: -d must be bf16 or fp16\n");
    return 1;
  }
  const int ws = env.nranks, r = env.rank;
  std::vector<Shape> def;
  for (size_t s : {4096, 8192, 16384, 32768, 65536}) {
    def.push_back({s, 32, 8});
    def.push_back({s, 16, 16});
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  cudaStream_t side = nullptr;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  for (const Shape& sh : shapesOr(args, def)) {
    const int S = static_cast<int>(sh.m), hq = static_cast<int>(sh.n), hkv = static_cast<int>(sh.k);
    if (S < 2 || S % 2 || hq % hkv) {
      fprintf(stderr, "ring_attention: shape %zux%zux%zu: even S per rank x Hq x Hkv\n", sh.m, sh.n, sh.k);
      return 1;
    }
    const int half = S / 2;
    const size_t qB = static_cast<size_t>(S) * hq * kDim * 2, kvB = static_cast<size_t>(S) * hkv * kDim * 2;
    DevBuf Q, K, V, O, Ob, rx[2][2], Ot, Lt, acc, lacc, Qf, Kf, Vf, Of;
    const size_t lB = static_cast<size_t>(hq) * S * 4;
    if (!Q.alloc(qB, kRing, "Q") || !K.alloc(kvB, kRing, "K") || !V.alloc(kvB, kRing, "V") ||
        !O.alloc(qB, kRing, "O") || !Ob.alloc(qB, kRing, "Ob") || !Ot.alloc(qB, kRing, "Ot") ||
        !Lt.alloc(lB, kRing, "Lt") || !acc.alloc(qB * 2, kRing, "acc") || !lacc.alloc(lB, kRing, "lacc"))
      return 1;
    for (auto& a : rx)
      for (auto& b : a)
        if (!b.alloc(kvB, kRing, "the received K|V")) return 1;
    const uint64_t seed = (args.seed ? args.seed : 12345) + 7 * r;
    fillInput(Q.p, qB / 2, t, seed, r, 0, env.stream);
    fillInput(K.p, kvB / 2, t, seed + 1, r, 0, env.stream);
    fillInput(V.p, kvB / 2, t, seed + 2, r, 0, env.stream);
    // The whole sequence on this GPU, for the engine-alone time (contents do not matter for timing).
    const size_t Sf = static_cast<size_t>(S) * ws;
    if (!Qf.alloc(Sf * hq * kDim * 2, kRing, "Qf") || !Kf.alloc(Sf * hkv * kDim * 2, kRing, "Kf") ||
        !Vf.alloc(Sf * hkv * kDim * 2, kRing, "Vf") || !Of.alloc(Sf * hq * kDim * 2, kRing, "Of"))
      return 1;
    fillInput(Qf.p, Sf * hq * kDim, t, seed + 3, r, 0, env.stream);
    fillInput(Kf.p, Sf * hkv * kDim, t, seed + 4, r, 0, env.stream);
    fillInput(Vf.p, Sf * hkv * kDim, t, seed + 5, r, 0, env.stream);
    cudaStreamSynchronize(env.stream);

    for (int causal : {1, 0}) {
      Result res;
      res.op = "ring_attention";
      res.worldSize = ws;
      res.dtype = dtypeName(t);
      res.hasShape = true;
      res.shape = sh;
      res.bytes = 2 * kvB;
      bool failed = false;
      auto fused = [&](void* out) {
        if (mkcclRingAttention(Q.p, K.p, V.p, out, nullptr, 1, S, hq, hkv, kDim, scale, causal, mkcclAttnZigzag, t,
                               env.comm, env.stream) != mkcclSuccess)
          failed = true;
      };
      // The unfused ring: step t computes on the chunk of rank (r - t) while NCCL moves it on.
      const Nccl* nc = env.nccl;
      auto attn = [&](const void* q, const void* k, const void* v, void* o, float* l, int sq, int skv, int c) {
        if (mkcclAttention(q, k, v, o, l, 1, sq, skv, hq, hkv, kDim, scale, c, t, env.stream) != mkcclSuccess)
          failed = true;
      };
      std::vector<cudaEvent_t> ev(2 * ws);
      for (auto& e : ev) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      auto merge = [&](int r0, int n, int ldl, int first) {
        const unsigned blocks = static_cast<unsigned>(n) * hq;
        if (t == mkcclBfloat16)
          mergeStep<<<blocks, kDim, 0, env.stream>>>(static_cast<float*>(acc.p), static_cast<float*>(lacc.p),
                                                     static_cast<const __nv_bfloat16*>(Ot.p), static_cast<float*>(Lt.p),
                                                     S, hq, r0, n, ldl, first);
        else
          mergeStep<<<blocks, kDim, 0, env.stream>>>(static_cast<float*>(acc.p), static_cast<float*>(lacc.p),
                                                     static_cast<const __half*>(Ot.p), static_cast<float*>(Lt.p), S, hq,
                                                     r0, n, ldl, first);
      };
      auto unfused = [&](void* out) {
        // Rows [half, S) are merged first at steps where only they have work: acc must hold
        // every row before that; step 0 writes all rows (every row sees its own position).
        for (int st = 0; st < ws; ++st) {
          const int src = ((r - st) % ws + ws) % ws;
          const char* ck = st == 0 ? K.c() : rx[st & 1][0].c();
          const char* cv = st == 0 ? V.c() : rx[st & 1][1].c();
          if (st + 1 < ws && nc && env.ncclComm) {
            // Send this step's chunk on, receive the next one into the other slot once step st-1
            // (which read that slot) is done.
            if (st >= 1) cudaStreamWaitEvent(side, ev[2 * (st - 1)], 0);
            nc->groupStart();
            nc->send(ck, kvB / 2, ncclType(t), (r + 1) % ws, static_cast<ncclComm_t>(env.ncclComm), side);
            nc->send(cv, kvB / 2, ncclType(t), (r + 1) % ws, static_cast<ncclComm_t>(env.ncclComm), side);
            nc->recv(rx[(st + 1) & 1][0].p, kvB / 2, ncclType(t), (r + ws - 1) % ws,
                     static_cast<ncclComm_t>(env.ncclComm), side);
            nc->recv(rx[(st + 1) & 1][1].p, kvB / 2, ncclType(t), (r + ws - 1) % ws,
                     static_cast<ncclComm_t>(env.ncclComm), side);
            nc->groupEnd();
            cudaEventRecord(ev[2 * st + 1], side);
          }
          if (st >= 1) cudaStreamWaitEvent(env.stream, ev[2 * (st - 1) + 1], 0);
          const size_t rowQ = static_cast<size_t>(hq) * kDim * 2;
          if (!causal) {
            attn(Q.p, ck, cv, Ot.p, static_cast<float*>(Lt.p), S, S, 0);
            merge(0, S, S, st == 0);
          } else if (st == 0) {
            attn(Q.p, ck, cv, Ot.p, static_cast<float*>(Lt.p), S, S, 1);  // the local zigzag pair is causal as is
            merge(0, S, S, 1);
          } else if (src < r) {
            attn(Q.p, ck, cv, Ot.p, static_cast<float*>(Lt.p), S, half, 0);  // all queries, the early chunk
            merge(0, S, S, 0);
          } else {
            attn(Q.c() + half * rowQ, ck, cv, Ot.p, static_cast<float*>(Lt.p), half, S, 0);  // late queries, all keys
            merge(half, half, half, 0);
          }
          cudaEventRecord(ev[2 * st], env.stream);
        }
        const size_t n = static_cast<size_t>(S) * hq * kDim;
        if (t == mkcclBfloat16)
          toOut<<<static_cast<unsigned>((n + 255) / 256), 256, 0, env.stream>>>(static_cast<float*>(acc.p),
                                                                                 static_cast<__nv_bfloat16*>(out), n);
        else
          toOut<<<static_cast<unsigned>((n + 255) / 256), 256, 0, env.stream>>>(static_cast<float*>(acc.p),
                                                                                 static_cast<__half*>(out), n);
      };
      // Correctness: ours against the unfused ring (both our engine; the ring logic differs).
      cudaMemsetAsync(O.p, 0xFF, qB, env.stream);
      fused(O.p);
      const bool haveBase = nc && env.ncclComm;
      if (haveBase || ws == 1) unfused(Ob.p);
      if (failed || cudaStreamSynchronize(env.stream) != cudaSuccess) {
        fprintf(stderr, "ring_attention: %s\n", mkcclGetLastError(env.comm));
        return 1;
      }
      if (args.check && (haveBase || ws == 1)) {
        std::vector<uint16_t> a(qB / 2), b(qB / 2);
        cudaMemcpy(a.data(), O.p, qB, cudaMemcpyDeviceToHost);
        cudaMemcpy(b.data(), Ob.p, qB, cudaMemcpyDeviceToHost);
        double mx = 1e-30, err = 0;
        for (size_t i = 0; i < a.size(); ++i) mx = std::max(mx, std::fabs(halfToDouble(b[i], t)));
        for (size_t i = 0; i < a.size(); ++i) {
          const double d = std::fabs(halfToDouble(a[i], t) - halfToDouble(b[i], t));
          if (!(d <= 2e-2 * mx)) ++res.wrong;
          if (d == d) err = std::max(err, d);
        }
        res.maxRelErr = err / mx;
      }
      // Ours, the unfused ring and the engine alone, timed in alternating blocks (perf.h:
      // timeAlternating).
      std::vector<Candidate> cand;
      cand.emplace_back("ring_attention", [&](int) { fused(O.p); });
      cand.emplace_back("engine alone", [&](int) {
        attn(Qf.p, Kf.p, Vf.p, Of.p, nullptr, static_cast<int>(Sf), static_cast<int>(Sf), causal);
      });
      if (haveBase || ws == 1) cand.emplace_back("engine+nccl ring", [&](int) { unfused(Ob.p); });
      if (!timeAlternating(cand, args.warmup, args.iters, args.rounds, env.stream)) failed = true;
      res.timeUs = cand[0].us;
      const double alone = cand[1].us / ws;
      if (haveBase || ws == 1) {
        res.baseline = "engine+nccl";
        res.baselineTimeUs = cand[2].us;
      }
      if (failed || cudaStreamSynchronize(env.stream) != cudaSuccess) {
        fprintf(stderr, "ring_attention: failed while timing: %s\n", mkcclGetLastError(env.comm));
        return 1;
      }
      for (auto& e : ev) cudaEventDestroy(e);
      const double flop = flopsOf(1, hq, static_cast<double>(Sf), static_cast<double>(Sf), causal) / ws;
      res.extra["tflops"] = flop / (res.timeUs * 1e-6) / 1e12;
      res.extra["engine_alone_us"] = alone;
      res.extra["engine_alone_tflops"] = flop / (alone * 1e-6) / 1e12;
      res.extra["ratio_vs_engine"] = alone / res.timeUs;
      if (res.baselineTimeUs > 0) res.extra["speedup"] = res.baselineTimeUs / res.timeUs;
      res.extra["causal"] = causal;
      res.note = std::string(causal ? "causal" : "non-causal") + " zigzag, D 128, S per rank " + std::to_string(S) +
                 ", " + timingNote(args.rounds);
      env.emit(res);
    }
  }
  cudaStreamDestroy(side);
  return 0;
}

}  // namespace

MKCCL_PERF_SHAPE_OP("attention", runAttention,
                    "mkcclAttention on one GPU: -m S -n Hq -k Hkv (or --shapes SxHqxHkv,...), B 1, D 128, causal "
                    "and not; TFLOP/s (SDPA baseline: perf/attention_vs_sdpa.py)");
MKCCL_PERF_SHAPE_OP("ring_attention", runRing,
                    "mkcclRingAttention (zigzag): -m tokens per rank -n Hq -k Hkv, B 1, D 128, causal and not; "
                    "against our engine per step + NCCL send/recv, and the engine alone on the same work");

}  // namespace perf
}  // namespace mkccl
