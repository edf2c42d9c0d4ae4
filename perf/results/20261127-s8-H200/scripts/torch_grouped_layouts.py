"""torch._grouped_mm on the issue-21 shapes (one GPU, T = 4096 tokens x top-k rows), timed with the
weights in both layouts it takes -- W[E, N, K] passed transposed (what perf/moe_vs_torch.py does)
and W stored [E, K, N] -- and with rows spread by a random top-k routing or exactly even over the
experts: which of these gives the figures ../shared/REFERENCE.md quotes (433 / 577 / 776 TFLOP/s)?
Both expert GEMMs (gate+up, then down on a ready activation), CUDA events, median of 20."""
import statistics
import torch

SHAPES = {"DeepSeek-V3-like": (7168, 2048, 256, 8), "Qwen3-30B-A3B-like": (2048, 768, 128, 8),
          "Mixtral-like": (4096, 14336, 8, 2)}


def median_us(fn, warmup=3, iters=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


torch.manual_seed(0)
T = 4096
for name, (H, I, E, k) in SHAPES.items():
    R = T * k
    dt = torch.bfloat16
    x = torch.randn(R, H, device="cuda", dtype=dt)
    act = torch.randn(R, I, device="cuda", dtype=dt)
    w13_nk = torch.randn(E, 2 * I, H, device="cuda", dtype=dt) * H ** -0.5
    w2_nk = torch.randn(E, H, I, device="cuda", dtype=dt) * I ** -0.5
    w13_kn = w13_nk.transpose(1, 2).contiguous()
    w2_kn = w2_nk.transpose(1, 2).contiguous()
    idx = torch.rand(T, E, device="cuda").topk(k, dim=1).indices.flatten()
    counts = torch.bincount(idx, minlength=E)
    offs_rand = torch.cumsum(counts, 0).to(torch.int32)
    offs_even = torch.arange(1, E + 1, device="cuda", dtype=torch.int32) * (R // E)
    flop = 6.0 * R * H * I
    for wname, (b13, b2) in {"W[E,N,K] transposed": (w13_nk.transpose(-2, -1), w2_nk.transpose(-2, -1)),
                             "W[E,K,N] stored": (w13_kn, w2_kn)}.items():
        for oname, offs in {"random top-k": offs_rand, "even": offs_even}.items():
            try:
                fn = lambda: (torch._grouped_mm(x, b13, offs=offs), torch._grouped_mm(act, b2, offs=offs))
                us = median_us(fn)
                print("%-20s %-20s %-13s %9.1f us %6.1f TFLOP/s" % (name, wname, oname, us, flop / us / 1e6))
            except Exception as e:  # a layout torch refuses
                print("%-20s %-20s %-13s refused: %s" % (name, wname, oname, str(e).split("\n")[0][:100]))
    del x, act, w13_nk, w2_nk, w13_kn, w2_kn
    torch.cuda.empty_cache()
