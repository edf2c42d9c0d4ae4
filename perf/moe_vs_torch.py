#!/usr/bin/env python3
"""MoE expert GEMMs and the MoE layer on one GPU: ours against PyTorch in the same process.

Rows: the T*k routed token copies of T tokens per rank, top-k routing (uniform or skewed), the
issue's model shapes. Timed (CUDA events, warm-up, median of --iters, inputs rotating over 2 sets):
  gemms       the two expert GEMMs on rows already grouped by expert:
                ours   mkcclGroupedGemmSwiglu (gate+up with the SwiGLU epilogue) + mkcclGroupedGemm
                       (down) on the 128-row-padded expert-major layout
                ours_plain  mkcclGroupedGemm for gate+up (N = 2I, no epilogue) + mkcclGroupedGemm
                torch  torch._grouped_mm (gate+up) + torch._grouped_mm (down) on compact rows
                       (the REFERENCE.md baseline: GEMMs only); torch_swiglu adds silu(gate)*up
              TFLOP/s = 6 * rows * H * I / time (rows = the routed rows, padding not counted).
  layer       (--layer, one rank) mkcclMoeDispatch + the two GEMMs + mkcclMoeCombine, against the
              unfused layer in PyTorch (sort by expert, gather, grouped GEMMs, SwiGLU, weighted
              index_add_) and the floor (our GEMMs alone on the dispatched rows).
Checked once per shape: ours against torch (max error over the max of the reference).

  python3 perf/moe_vs_torch.py --lib build/libmkccl.so [--shapes ds,qwen,mixtral] [--tokens 4096,16384]
      [--routing uniform,skewed] [--layer] [--iters 10] [--json out.json]
"""
import argparse
import ctypes
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

BF16 = 9  # mkcclDataType_t
SHAPES = {"ds": ("DeepSeek-V3-like", 7168, 2048, 256, 8), "qwen": ("Qwen3-30B-A3B-like", 2048, 768, 128, 8),
          "mixtral": ("Mixtral-like", 4096, 14336, 8, 2)}


class MoeConfig(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("numExperts", ctypes.c_int), ("topk", ctypes.c_int), ("hidden", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("maxTokensPerRank", ctypes.c_size_t), ("maxRecvRows", ctypes.c_size_t),
                ("rowAlign", ctypes.c_int), ("maxCtas", ctypes.c_int)]


class MoeBuffers(ctypes.Structure):
    _fields_ = [("recvX", ctypes.c_void_p), ("rowPitch", ctypes.c_size_t), ("maxRecvRows", ctypes.c_size_t),
                ("rowInfo", ctypes.c_void_p), ("expertOffsets", ctypes.c_void_p), ("expertCounts", ctypes.c_void_p),
                ("numLocalExperts", ctypes.c_int), ("rowAlign", ctypes.c_int)]


def load(path):
    lib = ctypes.CDLL(path)
    P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    for name in ("mkcclGroupedGemm", "mkcclGroupedGemmSwiglu"):
        f = getattr(lib, name)
        f.restype = I
        f.argtypes = [P, P, P, P, I, S, S, S, I, I, P]
    lib.mkcclGetLastError.restype = ctypes.c_char_p
    lib.mkcclGroupedGemmSwigluEx.argtypes = [P, P, I, P, P, I, S, S, S, I, I, P]
    lib.mkcclGetLastError.argtypes = [P]
    lib.mkcclCommInitAll.argtypes = [P, I, P]
    lib.mkcclCommDestroy.argtypes = [P]
    lib.mkcclMoeCreate.argtypes = [P, P, P]
    lib.mkcclMoeDestroy.argtypes = [P]
    lib.mkcclMoeGetBuffers.argtypes = [P, P]
    lib.mkcclMoeDispatch.argtypes = [P, P, P, P, S, P]
    lib.mkcclMoeCombine.argtypes = [P, P, P, S, P]
    return lib


def ck(lib, r, what):
    if r != 0:
        raise RuntimeError("%s: %d: %s" % (what, r, lib.mkcclGetLastError(None).decode()))


def stream():
    return torch.cuda.current_stream().cuda_stream


def median_ms(fn, warmup, iters, nsets):
    for i in range(warmup):
        fn(i % nsets)
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i % nsets)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def routing(T, E, k, skewed, gen):
    """topk_idx [T, k] (distinct experts per token) and topk_w [T, k]; skewed: a quarter of the
    experts get about half of the slots."""
    score = torch.rand(T, E, device="cuda", generator=gen)
    if skewed:
        score[:, : max(1, E // 4)] += 0.5
    idx = score.topk(k, dim=1).indices.to(torch.int32)
    w = torch.rand(T, k, device="cuda", generator=gen) * 0.25 + 0.05
    return idx.contiguous(), w.contiguous()


def pack_w1(gate_up, I):
    """[E, 2I, H] stacked (gate rows, then up rows) -> the blocked interleave of
    mkcclGroupedGemmSwiglu: per 128-column block b, 128 gate rows then 128 up rows (I % 128 == 0)."""
    E, _, H = gate_up.shape
    return gate_up.view(E, 2, I // 128, 128, H).permute(0, 2, 1, 3, 4).reshape(E, 2 * I, H).contiguous()


def grouped_inputs(X, idx, E):
    """Rows grouped by expert: compact (torch) and padded to 128 per expert (ours)."""
    T, k = idx.shape
    flat = idx.flatten().long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E)
    rows = X[order // k]
    offs = torch.cumsum(counts, 0).to(torch.int32)
    padded = (counts + 127) // 128 * 128
    poffs = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
    poffs[1:] = torch.cumsum(padded, 0)
    total = int(poffs[-1].item())
    dst = (poffs[:-1].long().repeat_interleave(counts) + (torch.arange(T * k, device="cuda") -
           torch.cat([torch.zeros(1, dtype=torch.long, device="cuda"), torch.cumsum(counts, 0)[:-1]]).repeat_interleave(counts)))
    A = torch.zeros(max(total, 128), X.shape[1], dtype=X.dtype, device="cuda")
    A[dst] = rows
    return rows, offs, A, poffs, dst, order


def gemm_row(lib, a, name, H, I, E, k, T, skewed, gen):
    dt = torch.bfloat16
    gate_up = torch.randn(E, 2 * I, H, device="cuda", dtype=dt) * (2.0 / H ** 0.5)
    down = torch.randn(E, H, I, device="cuda", dtype=dt) * (1.0 / I ** 0.5)
    w1 = pack_w1(gate_up, I)
    sets = []
    for s in range(2):
        X = torch.randn(T, H, device="cuda", dtype=dt)
        idx, _ = routing(T, E, k, skewed, gen)
        rows, offs, A, poffs, dst, _ = grouped_inputs(X, idx, E)
        sets.append((rows, offs, A, poffs, dst))
    R = T * k
    maxP = max(s[2].shape[0] for s in sets)
    act = torch.empty(maxP, I, dtype=dt, device="cuda")
    h = torch.empty(maxP, 2 * I, dtype=dt, device="cuda")
    Y = torch.empty(maxP, H, dtype=dt, device="cuda")

    def ours(i):
        rows, offs, A, poffs, dst = sets[i]
        P = A.shape[0]
        ck(lib, lib.mkcclGroupedGemmSwiglu(A.data_ptr(), w1.data_ptr(), act.data_ptr(), poffs.data_ptr(), E, P, I, H,
                                           BF16, BF16, stream()), "swiglu")
        ck(lib, lib.mkcclGroupedGemm(act.data_ptr(), down.data_ptr(), Y.data_ptr(), poffs.data_ptr(), E, P, H, I, BF16,
                                     BF16, stream()), "grouped")

    def ours_plain(i):
        rows, offs, A, poffs, dst = sets[i]
        P = A.shape[0]
        ck(lib, lib.mkcclGroupedGemm(A.data_ptr(), gate_up.data_ptr(), h.data_ptr(), poffs.data_ptr(), E, P, 2 * I, H,
                                     BF16, BF16, stream()), "grouped gate_up")
        ck(lib, lib.mkcclGroupedGemm(h.data_ptr(), down.data_ptr(), Y.data_ptr(), poffs.data_ptr(), E, P, H, I, BF16,
                                     BF16, stream()), "grouped")

    act_t = torch.randn(R, I, dtype=dt, device="cuda")

    def g1_swiglu_gate_up(i):
        A, poffs = sets[i][2], sets[i][3]
        ck(lib, lib.mkcclGroupedGemmSwigluEx(A.data_ptr(), gate_up.data_ptr(), 1, act.data_ptr(), poffs.data_ptr(), E,
                                             A.shape[0], I, H, BF16, BF16, stream()), "swiglu gate-up")

    def torch_gemms(i, swiglu=False):
        # GEMMs only: the down GEMM reads a ready activation; with swiglu: the whole chain.
        rows, offs = sets[i][0], sets[i][1]
        hh = torch._grouped_mm(rows, gate_up.transpose(-2, -1), offs=offs)
        x = F.silu(hh[:, :I]) * hh[:, I:] if swiglu else act_t
        return torch._grouped_mm(x, down.transpose(-2, -1), offs=offs)

    # Check (set 0): ours' activation and output against torch's on the routed rows.
    rows, offs, A, poffs, dst = sets[0]
    act.fill_(float("nan"))
    Y.fill_(float("nan"))
    ours(0)
    hh = torch._grouped_mm(rows, gate_up.transpose(-2, -1), offs=offs).float()
    ref_act = F.silu(hh[:, :I]) * hh[:, I:]
    err_act = ((act[dst].float() - ref_act).abs().max() / ref_act.abs().max()).item()
    ref_y = torch._grouped_mm(act[dst], down.transpose(-2, -1), offs=offs).float()
    err_y = ((Y[dst].float() - ref_y).abs().max() / ref_y.abs().max()).item()
    # W1 gate rows then up rows, as is (mkcclSwigluGateUp = 1).
    act.fill_(float("nan"))
    g1_swiglu_gate_up(0)
    err_act_gate_up = ((act[dst].float() - ref_act).abs().max() / ref_act.abs().max()).item()
    t_ours = median_ms(ours, a.warmup, a.iters, 2)
    t_plain = median_ms(ours_plain, a.warmup, a.iters, 2)
    t_torch = median_ms(torch_gemms, a.warmup, a.iters, 2)
    t_torch_sw = median_ms(lambda i: torch_gemms(i, True), a.warmup, a.iters, 2)

    # Each GEMM alone, alternating (where a difference comes from: the epilogue, the packed
    # weights, or the second GEMM's input).
    def g1_swiglu(i):
        A, poffs = sets[i][2], sets[i][3]
        ck(lib, lib.mkcclGroupedGemmSwiglu(A.data_ptr(), w1.data_ptr(), act.data_ptr(), poffs.data_ptr(), E,
                                           A.shape[0], I, H, BF16, BF16, stream()), "swiglu")

    def g1_plain(i, w):
        A, poffs = sets[i][2], sets[i][3]
        ck(lib, lib.mkcclGroupedGemm(A.data_ptr(), w.data_ptr(), h.data_ptr(), poffs.data_ptr(), E, A.shape[0], 2 * I,
                                     H, BF16, BF16, stream()), "plain")

    def g2(i, src):
        A, poffs = sets[i][2], sets[i][3]
        ck(lib, lib.mkcclGroupedGemm(src.data_ptr(), down.data_ptr(), Y.data_ptr(), poffs.data_ptr(), E, A.shape[0], H,
                                     I, BF16, BF16, stream()), "down")

    parts = {"gemm1_swiglu_us": lambda i: g1_swiglu(i), "gemm1_swiglu_gate_up_us": g1_swiglu_gate_up,
             "gemm1_plain_us": lambda i: g1_plain(i, gate_up),
             "gemm1_plain_packed_us": lambda i: g1_plain(i, w1), "gemm2_on_act_us": lambda i: g2(i, act),
             "gemm2_on_h_us": lambda i: g2(i, h),
             "torch_gemm1_us": lambda i: torch._grouped_mm(sets[i][0], gate_up.transpose(-2, -1), offs=sets[i][1])}
    brk = {key: [] for key in parts}
    for rep in range(2):
        for key, fn in parts.items():
            brk[key].append(median_ms(fn, 1, max(3, a.iters // 2), 2) * 1e3)
    brk = {key: min(v) for key, v in brk.items()}
    flop = 6.0 * R * H * I
    tf = lambda ms: flop / (ms * 1e-3) / 1e12
    del gate_up, down, w1, sets, act, h, Y, act_t
    return {"kind": "gemms", "shape": name, "H": H, "I": I, "E": E, "k": k, "T": T,
            "routing": "skewed" if skewed else "uniform", "rows": R, "ours_us": t_ours * 1e3,
            "ours_tflops": tf(t_ours), "ours_plain_us": t_plain * 1e3, "ours_plain_tflops": tf(t_plain),
            "torch_us": t_torch * 1e3, "torch_tflops": tf(t_torch), "torch_swiglu_us": t_torch_sw * 1e3,
            "ratio_vs_torch": t_torch / t_ours, "ratio_vs_torch_swiglu": t_torch_sw / t_ours,
            "max_rel_err_act": err_act, "max_rel_err_act_gate_up": err_act_gate_up, "max_rel_err_y": err_y, "breakdown_us": brk}


def layer_row(lib, a, name, H, I, E, k, T, skewed, gen):
    """One rank: every expert local, no NVLink: the layer's fixed costs against torch's."""
    dt = torch.bfloat16
    comm = ctypes.c_void_p()
    ck(lib, lib.mkcclCommInitAll(ctypes.byref(comm), 1, (ctypes.c_int * 1)(torch.cuda.current_device())), "init")
    cfg = MoeConfig(ctypes.sizeof(MoeConfig), 0x6D6B6D65, 1, E, k, H, BF16, T, 0, 0, 0)
    h = ctypes.c_void_p()
    ck(lib, lib.mkcclMoeCreate(ctypes.byref(h), comm, ctypes.byref(cfg)), "moe create")
    b = MoeBuffers()
    ck(lib, lib.mkcclMoeGetBuffers(h, ctypes.byref(b)), "buffers")
    try:
        gate_up = torch.randn(E, 2 * I, H, device="cuda", dtype=dt) * (2.0 / H ** 0.5)
        down = torch.randn(E, H, I, device="cuda", dtype=dt) * (1.0 / I ** 0.5)
        w1 = pack_w1(gate_up, I)
        P = b.maxRecvRows
        act = torch.empty(P, I, dtype=dt, device="cuda")
        Y = torch.empty(P, H, dtype=dt, device="cuda")
        out = torch.empty(T, H, dtype=dt, device="cuda")
        sets = []
        for s in range(2):
            X = torch.randn(T, H, device="cuda", dtype=dt)
            idx, w = routing(T, E, k, skewed, gen)
            sets.append((X, idx, w))

        def gemms():
            ck(lib, lib.mkcclGroupedGemmSwiglu(b.recvX, w1.data_ptr(), act.data_ptr(), b.expertOffsets, E, P, I, H,
                                               BF16, BF16, stream()), "swiglu")
            ck(lib, lib.mkcclGroupedGemm(act.data_ptr(), down.data_ptr(), Y.data_ptr(), b.expertOffsets, E, P, H, I,
                                         BF16, BF16, stream()), "grouped")

        def ours(i):
            X, idx, w = sets[i]
            ck(lib, lib.mkcclMoeDispatch(h, X.data_ptr(), idx.data_ptr(), w.data_ptr(), T, stream()), "dispatch")
            gemms()
            ck(lib, lib.mkcclMoeCombine(h, Y.data_ptr(), out.data_ptr(), T, stream()), "combine")

        def torch_layer(i):
            X, idx, w = sets[i]
            flat = idx.flatten().long()
            order = torch.argsort(flat, stable=True)
            counts = torch.bincount(flat, minlength=E)
            offs = torch.cumsum(counts, 0).to(torch.int32)
            rows = X[order // k]
            hh = torch._grouped_mm(rows, gate_up.transpose(-2, -1), offs=offs)
            z = torch._grouped_mm(F.silu(hh[:, :I]) * hh[:, I:], down.transpose(-2, -1), offs=offs)
            o = torch.zeros(T, H, dtype=torch.float32, device="cuda")
            o.index_add_(0, order // k, z.float() * w.flatten()[order].unsqueeze(1))
            return o.to(dt)

        ours(0)
        ref = torch_layer(0).float()
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        t_ours = median_ms(ours, a.warmup, a.iters, 2)
        t_floor = median_ms(lambda i: gemms(), a.warmup, a.iters, 2)
        t_torch = median_ms(torch_layer, a.warmup, a.iters, 2)
        flop = 6.0 * T * k * H * I
        return {"kind": "layer", "shape": name, "H": H, "I": I, "E": E, "k": k, "T": T,
                "routing": "skewed" if skewed else "uniform", "ours_us": t_ours * 1e3, "floor_us": t_floor * 1e3,
                "torch_us": t_torch * 1e3, "floor_ratio": t_ours / t_floor, "speedup_vs_torch": t_torch / t_ours,
                "ours_tflops": flop / (t_ours * 1e-3) / 1e12, "max_rel_err": err}
    finally:
        torch.cuda.synchronize()
        lib.mkcclMoeDestroy(h)
        lib.mkcclCommDestroy(comm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libmkccl.so")
    ap.add_argument("--shapes", default="ds,qwen,mixtral")
    ap.add_argument("--tokens", default="4096,16384")
    ap.add_argument("--routing", default="uniform")
    ap.add_argument("--layer", action="store_true")
    ap.add_argument("--layer-tokens", default="512,4096")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    lib = load(a.lib)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int.from_bytes(os.urandom(4), "little"))
    dev = torch.cuda.get_device_name()
    print("device: %s, torch %s" % (dev, torch.__version__), flush=True)
    out = []
    for key in a.shapes.split(","):
        name, H, I, E, k = SHAPES[key]
        for r in a.routing.split(","):
            for T in (int(x) for x in a.tokens.split(",")):
                row = gemm_row(lib, a, name, H, I, E, k, T, r == "skewed", gen)
                out.append(row)
                print("gemms %-20s %-7s T %5d: ours %7.1f TF (%8.1f us) plain %7.1f TF torch %7.1f TF (%8.1f us) "
                      "x%.3f  err act %.1e y %.1e" % (name, r, T, row["ours_tflops"], row["ours_us"],
                                                       row["ours_plain_tflops"], row["torch_tflops"], row["torch_us"],
                                                       row["ratio_vs_torch"], row["max_rel_err_act"],
                                                       row["max_rel_err_y"]), flush=True)
                print("      breakdown us: " + " ".join("%s %.0f" % (key[:-3], v) for key, v in
                                                        row["breakdown_us"].items()), flush=True)
                torch.cuda.empty_cache()
            if a.layer:
                for T in (int(x) for x in a.layer_tokens.split(",")):
                    row = layer_row(lib, a, name, H, I, E, k, T, r == "skewed", gen)
                    out.append(row)
                    print("layer %-20s %-7s T %5d: ours %8.1f us floor %8.1f (x%.2f) torch %8.1f (ours x%.2f faster) "
                          "err %.1e" % (name, r, T, row["ours_us"], row["floor_us"], row["floor_ratio"],
                                        row["torch_us"], row["speedup_vs_torch"], row["max_rel_err"]), flush=True)
                    torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "commit": os.environ.get("MKCCL_COMMIT", ""),
                       "rows": out}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
