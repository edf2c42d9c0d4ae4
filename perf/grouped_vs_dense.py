#!/usr/bin/env python3
"""The grouped GEMM's own cost: mkcclGroupedGemm on G groups of exactly `rows` rows (no padding)
against, on the same bytes and in the same process, mkcclGemm on the stacked rows of one group
at a time and of all groups at once (one weight), one cuBLAS GEMM per group (torch.matmul) and
torch._grouped_mm. Times: CUDA events, warm-up, median of --iters, the candidates in alternating
rounds (long GEMMs heat the GPU and lower its clocks). TFLOP/s = 2 * G * rows * N * K / time.

  python3 perf/grouped_vs_dense.py --lib build/libmkccl.so --shapes 8x1024x4096x14336,4x2048x28672x4096
      (GxROWSxNxK) [--iters 20] [--json out.json]
"""
import argparse
import ctypes
import json
import statistics

import torch

BF16 = 9  # mkcclDataType_t


def load(path):
    lib = ctypes.CDLL(path)
    P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    lib.mkcclGroupedGemm.restype = I
    lib.mkcclGroupedGemm.argtypes = [P, P, P, P, I, S, S, S, I, I, P]
    lib.mkcclGemm.restype = I
    lib.mkcclGemm.argtypes = [P, P, P, S, S, S, I, I, P]
    lib.mkcclGetLastError.restype = ctypes.c_char_p
    lib.mkcclGetLastError.argtypes = [P]
    return lib


def ck(lib, r, what):
    if r != 0:
        raise RuntimeError("%s: %d: %s" % (what, r, lib.mkcclGetLastError(None).decode()))


def alternate(cands, warmup, iters, rounds=4):
    """cands: {name: fn}; median ms of each over `rounds` alternating blocks."""
    for fn in cands.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    times = {k: [] for k in cands}
    for _ in range(rounds):
        for name, fn in cands.items():
            for _ in range(max(1, iters // rounds)):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times[name].append(a.elapsed_time(b))
    return {k: statistics.median(v) for k, v in times.items()}


def run(lib, G, rows, N, K, iters):
    st = lambda: torch.cuda.current_stream().cuda_stream
    M = G * rows
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16) * 0.05
    C = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    offs = torch.arange(0, M + 1, rows, device="cuda", dtype=torch.int32)
    ends = offs[1:].contiguous()
    Wt = W.transpose(1, 2)

    def grouped():
        ck(lib, lib.mkcclGroupedGemm(A.data_ptr(), W.data_ptr(), C.data_ptr(), offs.data_ptr(), G, M, N, K, BF16, BF16,
                                     st()), "grouped")

    def dense_per_group():
        for g in range(G):
            ck(lib, lib.mkcclGemm(A[g * rows:].data_ptr(), W[g].data_ptr(), C[g * rows:].data_ptr(), rows, N, K, BF16,
                                  BF16, st()), "gemm")

    def dense_all():  # every row against group 0's weight: the same FLOPs as one GEMM
        ck(lib, lib.mkcclGemm(A.data_ptr(), W[0].data_ptr(), C.data_ptr(), M, N, K, BF16, BF16, st()), "gemm")

    def cublas_per_group():
        for g in range(G):
            torch.matmul(A[g * rows:(g + 1) * rows], W[g].t(), out=C[g * rows:(g + 1) * rows])

    def torch_grouped():
        torch._grouped_mm(A, Wt, offs=ends)

    grouped()
    ref = torch.cat([A[g * rows:(g + 1) * rows].float() @ W[g].float().t() for g in range(G)])
    err = ((C.float() - ref).abs().max() / ref.abs().max()).item()
    ms = alternate({"grouped": grouped, "ours_per_group": dense_per_group, "ours_one_gemm": dense_all,
                    "cublas_per_group": cublas_per_group, "torch_grouped_mm": torch_grouped}, 3, iters)
    flops = 2.0 * M * N * K
    return {"G": G, "rows": rows, "N": N, "K": K, "max_rel_err": err,
            "us": {k: v * 1e3 for k, v in ms.items()}, "tflops": {k: flops / (v * 1e-3) / 1e12 for k, v in ms.items()}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libmkccl.so")
    ap.add_argument("--shapes", default="8x1024x4096x14336,8x1024x28672x4096,4x2048x4096x14336,4x2048x28672x4096")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    lib = load(a.lib)
    out = []
    print("device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    for s in a.shapes.split(","):
        G, rows, N, K = (int(x) for x in s.split("x"))
        r = run(lib, G, rows, N, K, a.iters)
        out.append(r)
        print("%dx%dx%dx%d err %.1e  " % (G, rows, N, K, r["max_rel_err"]) +
              "  ".join("%s %.0f us %.0f TF" % (k, r["us"][k], r["tflops"][k]) for k in r["us"]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "results": out}, f, indent=1)


if __name__ == "__main__":
    main()
