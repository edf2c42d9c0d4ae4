#!/usr/bin/env python3
"""mkcclAttention against PyTorch's scaled_dot_product_attention (cuDNN and flash backends), one
GPU, in the same process: the issue-22 figure (at least 0.9x SDPA cuDNN at S >= 4096, D 128).

libmkccl is called through ctypes on the tensors' memory ([B, S, H, D], the layout both use: SDPA
gets the [B, H, S, D] views). Times are medians of CUDA-event timings after warm-up, inputs
rotating over a few sets; TFLOP/s = 4 B Hq Sq Skv D, halved when causal (the usual convention).
Every shape is also checked: ours against SDPA cuDNN's output (and LSE against a float32 one).

  python3 perf/attention_vs_sdpa.py --lib build/libmkccl.so [--seqs 4096,8192] [--heads 32/8,16/16]
      [--causal 0,1] [--iters 20] [--json out.json]
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BF16, F16 = 9, 6  # mkcclDataType_t


def load(path):
    lib = ctypes.CDLL(path)
    f = lib.mkcclAttention
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_size_t] * 3 + [ctypes.c_int] * 3 + [ctypes.c_float, ctypes.c_int,
                                                                                      ctypes.c_int, ctypes.c_void_p]
    lib.mkcclGetLastError.restype = ctypes.c_char_p
    lib.mkcclGetLastError.argtypes = [ctypes.c_void_p]
    lib.mkcclSetTuning.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return lib


def ours(lib, q, k, v, o, lse, causal, scale):
    B, S, Hq, D = q.shape
    Skv, Hkv = k.shape[1], k.shape[2]
    r = lib.mkcclAttention(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                           lse.data_ptr() if lse is not None else None, B, S, Skv, Hq, Hkv, D, scale, causal,
                           BF16 if q.dtype == torch.bfloat16 else F16, torch.cuda.current_stream().cuda_stream)
    if r != 0:
        raise RuntimeError("mkcclAttention: %d: %s" % (r, lib.mkcclGetLastError(None).decode()))


def sdpa(backend, q, k, v, causal, scale, gqa):
    # [B, S, H, D] -> [B, H, S, D] views.
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=bool(causal), scale=scale, enable_gqa=gqa)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libmkccl.so")
    ap.add_argument("--seqs", default="4096,8192,16384,32768")
    ap.add_argument("--heads", default="32/8,16/16")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--variants", default="", help="attention.variant values (tuner key) to time too, e.g. overlap,simple")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    lib = load(a.lib)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    dev = torch.cuda.get_device_name()
    rows = []
    print("device: %s, torch %s" % (dev, torch.__version__))
    print("%6s %7s %6s %9s %9s %9s %7s %7s %9s %s" % ("S", "heads", "causal", "ours", "cudnn", "flash", "x cudnn",
                                                      "x flash", "max err", "variants"))
    for heads in a.heads.split(","):
        hq, hkv = (int(x) for x in heads.split("/"))
        for S in (int(x) for x in a.seqs.split(",")):
            for causal in (int(x) for x in a.causal.split(",")):
                B, D = a.batch, a.dim
                scale = 1.0 / math.sqrt(D)
                setb = B * S * (hq + 2 * hkv) * D * 2
                nsets = max(1, min(4, (512 << 20) // setb + 1))
                qs = [torch.randn(B, S, hq, D, device="cuda", dtype=dt) for _ in range(nsets)]
                ks = [torch.randn(B, S, hkv, D, device="cuda", dtype=dt) for _ in range(nsets)]
                vs = [torch.randn(B, S, hkv, D, device="cuda", dtype=dt) for _ in range(nsets)]
                o = torch.empty(B, S, hq, D, device="cuda", dtype=dt)
                lse = torch.empty(B, hq, S, device="cuda", dtype=torch.float32)
                flop = 4.0 * B * hq * S * S * D * (0.5 if causal else 1.0)
                # Correctness: ours against cuDNN on set 0.
                o.fill_(float("nan"))
                ours(lib, qs[0], ks[0], vs[0], o, lse, causal, scale)
                err, note = float("nan"), ""
                try:
                    ref = sdpa(SDPBackend.CUDNN_ATTENTION, qs[0], ks[0], vs[0], causal, scale, hq != hkv).transpose(1, 2)
                    err = ((o.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
                except RuntimeError as e:
                    note = "cudnn: %s" % str(e).splitlines()[0][:80]
                t_ours = median_ms(lambda i: ours(lib, qs[i], ks[i], vs[i], o, None, causal, scale), a.warmup,
                                   a.iters, nsets)
                res = {}
                for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                    try:
                        res[name] = median_ms(lambda i: sdpa(be, qs[i], ks[i], vs[i], causal, scale, hq != hkv),
                                              a.warmup, a.iters, nsets)
                    except RuntimeError as e:
                        res[name] = float("nan")
                        note += " %s: %s" % (name, str(e).splitlines()[0][:80])
                var = {}
                for v in [x for x in a.variants.split(",") if x]:
                    lib.mkcclSetTuning(None, ("attention.variant=" + v).encode())
                    var[v] = flop / (median_ms(lambda i: ours(lib, qs[i], ks[i], vs[i], o, None, causal, scale),
                                               a.warmup, a.iters, nsets) * 1e-3) / 1e12
                    lib.mkcclSetTuning(None, b"")
                tf = lambda ms: flop / (ms * 1e-3) / 1e12
                row = {"S": S, "hq": hq, "hkv": hkv, "D": D, "B": B, "causal": causal, "dtype": a.dtype,
                       "ours_ms": t_ours, "ours_tflops": tf(t_ours), "cudnn_ms": res["cudnn"],
                       "cudnn_tflops": tf(res["cudnn"]), "flash_ms": res["flash"], "flash_tflops": tf(res["flash"]),
                       "ratio_cudnn": res["cudnn"] / t_ours, "ratio_flash": res["flash"] / t_ours,
                       "max_rel_err": err, "variants_tflops": var, "note": note.strip()}
                rows.append(row)
                print("%6d %7s %6d %9.1f %9.1f %9.1f %7.3f %7.3f %9.2e %s %s" % (
                    S, heads, causal, row["ours_tflops"], row["cudnn_tflops"], row["flash_tflops"],
                    row["ratio_cudnn"], row["ratio_flash"], err,
                    " ".join("%s=%.1f" % kv for kv in var.items()), row["note"]), flush=True)
                del qs, ks, vs, o, lse
                torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "results": rows}, f, indent=1)
    bad = [r for r in rows if not (r["max_rel_err"] < 2e-2)]
    if bad:
        print("WRONG: %d shapes differ from SDPA cuDNN by more than 2e-2 (relative to max |O|)" % len(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
