# Which cuBLAS kernels torch.matmul runs for given M x N x K (bf16), and their device times.
import sys, torch
from torch.profiler import profile, ProfilerActivity
for spec in sys.argv[1:]:
    m, n, k = map(int, spec.split("x"))
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(5): a @ w.t()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(10): a @ w.t()
        torch.cuda.synchronize()
    print(spec)
    for e in p.key_averages():
        if e.device_type.name == "CUDA" or getattr(e, "self_device_time_total", 0) > 0:
            print("   %-110s n=%d avg %.1f us" % (e.key[:110], e.count, e.device_time_total / max(1, e.count)))
