"""Times every libmkccl op against its torch + NCCL equivalent and PyTorch's own fused ops, in one run
on any number of GPUs (one process per rank, started here).

    python examples/bench_ops.py [--nprocs N] [--iters 20] [--quick] [--json out.json]

Rows: op, shape, our median time, each baseline's, and baseline / ours (> 1: we are faster), with
our result's error against the first baseline's. Baselines: torch.distributed over NCCL
(all_gather_into_tensor, reduce_scatter_tensor, all_reduce, all_to_all_single), F.linear (cuBLAS)
before or after them for the fused ops, and PyTorch's symmetric-memory fused ops
(torch.ops.symm_mem.fused_all_gather_matmul, fused_matmul_reduce_scatter) where this torch has
them; torch._grouped_mm and SDPA are the baselines of the MoE and attention ops once libmkccl has
them (BENCHES below: one entry per op). With more ranks than GPUs it only checks (no timings).
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import common
import mkccl


class Bench:
    """One row: `ours` and named baselines, each a function of the prepared inputs."""

    def __init__(self, op, shape, make, ours, baselines, tol=2e-2):
        self.op, self.shape, self.make, self.ours, self.baselines, self.tol = op, shape, make, ours, baselines, tol


def _symm_group_name():
    try:
        import warnings

        from torch.distributed._symmetric_memory import enable_symm_mem_for_group

        name = dist.group.WORLD.group_name
        with warnings.catch_warnings():  # (needed before torch 2.9, a no-op that warns after)
            warnings.simplefilter("ignore")
            enable_symm_mem_for_group(name)
        return name
    except Exception as e:  # not in this torch, or no symmetric memory here
        return "unavailable: %s" % e


def benches(world, quick):
    """Rows for this world size. Inputs are rotated among 3 sets to keep caches honest."""
    bf = torch.bfloat16
    rows = []
    sizes = [1 << 16, 1 << 20, 1 << 24] + ([] if quick else [1 << 27])  # bytes per rank
    for nbytes in sizes:
        n = nbytes // 2 // world * world
        rows.append(Bench("all_gather", "%d B/rank" % (2 * n),
                          lambda n=n: (torch.randn(n, device="cuda").to(bf),),
                          lambda c, x: c.all_gather(x),
                          {"nccl": lambda x: _nccl_ag(x)}, tol=0))
        rows.append(Bench("reduce_scatter", "%d B/rank" % (2 * n),
                          lambda n=n: (torch.randn(n, device="cuda").to(bf),),
                          lambda c, x: c.reduce_scatter(x),
                          {"nccl": lambda x: _nccl_rs(x)}))
        rows.append(Bench("all_reduce", "%d B/rank" % (2 * n),
                          lambda n=n: (torch.randn(n, device="cuda").to(bf),),
                          lambda c, x: c.all_reduce(x),
                          {"nccl": lambda x: _nccl_ar(x)}))
        rows.append(Bench("all_to_all", "%d B/rank" % (2 * n),
                          lambda n=n: (torch.randn(n, device="cuda").to(bf),),
                          lambda c, x: c.all_to_all(x),
                          {"nccl": lambda x: _nccl_a2a(x)}, tol=0))
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192)] if quick else \
        [(8192, 8192, 8192), (16384, 8192, 8192), (8192, 2048, 8192), (4096, 8192, 8192), (2048, 8192, 8192)]
    for M, N, K in shapes:
        m = M // world
        rows.append(Bench("gemm", "%dx%dx%d" % (M, N, K),
                          lambda M=M, N=N, K=K: (torch.randn(M, K, device="cuda").to(bf),
                                                 (torch.randn(N, K, device="cuda") / K ** 0.5).to(bf)),
                          lambda c, a, w: mkccl.ops.gemm(a, w),
                          {"cublas": lambda a, w: F.linear(a, w)}))
        # AllGather+GEMM: a [M/ws, K] -> C [M, N_r]; every rank the same N_r = N / ws.
        nr = N // world
        rows.append(Bench("all_gather_gemm", "%dx%dx%d" % (M, N, K),
                          lambda m=m, nr=nr, K=K: (torch.randn(m, K, device="cuda").to(bf),
                                                   (torch.randn(nr, K, device="cuda") / K ** 0.5).to(bf)),
                          lambda c, a, w: c.all_gather_gemm(a, w),
                          {"nccl+cublas": lambda a, w: F.linear(_nccl_ag(a), w),
                           "symm_mem": lambda a, w: _symm_ag_mm(a, w)}))
        # GEMM+ReduceScatter / AllReduce: a [M, K/ws], w [N, K/ws].
        kr = K // world
        mk = lambda M=M, N=N, kr=kr: (torch.randn(M, kr, device="cuda").to(bf),  # noqa: E731
                                      (torch.randn(N, kr, device="cuda") / (kr * world) ** 0.5).to(bf))
        rows.append(Bench("gemm_reduce_scatter", "%dx%dx%d" % (M, N, K), mk,
                          lambda c, a, w: c.gemm_reduce_scatter(a, w),
                          {"cublas+nccl": lambda a, w: _nccl_rs(F.linear(a, w)),
                           "symm_mem": lambda a, w: _symm_mm_rs(a, w)}))
        rows.append(Bench("gemm_all_reduce", "%dx%dx%d" % (M, N, K), mk,
                          lambda c, a, w: c.gemm_all_reduce(a, w),
                          {"cublas+nccl": lambda a, w: _nccl_ar(F.linear(a, w))}))
    return rows


def _nccl_ag(x):
    out = torch.empty((dist.get_world_size() * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x)
    return out


def _nccl_rs(x):
    out = torch.empty((x.shape[0] // dist.get_world_size(),) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x)
    return out


def _nccl_ar(x):
    y = x.clone()  # (ours is out of place too)
    dist.all_reduce(y)
    return y


def _nccl_a2a(x):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out


_SYMM = None


def _symm_ag_mm(a, w):
    if _SYMM.startswith("unavailable"):
        raise RuntimeError(_SYMM)
    _, outs = torch.ops.symm_mem.fused_all_gather_matmul(a, [w.t()], 0, _SYMM)
    return outs[0]


def _symm_mm_rs(a, w):
    if _SYMM.startswith("unavailable"):
        raise RuntimeError(_SYMM)
    return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, w.t(), "sum", 0, _SYMM)


def host_overhead(comm, iters=2000):
    """Host time per call (us) of a tiny AllReduce by each path: wall clock over `iters` calls, the GPU
    being faster than the host at this size. Every rank makes the same calls."""
    x = torch.randn(256, device="cuda")
    y = torch.empty_like(x)
    fn = mkccl.load_library().mkcclAllReduce
    stream = torch.cuda.current_stream().cuda_stream
    f32 = int(mkccl.DataType.FLOAT32)
    paths = {
        "ctypes mkcclAllReduce (no checks)": lambda: fn(x.data_ptr(), y.data_ptr(), x.numel(), f32, 0, comm.ptr, stream),
        "comm.all_reduce(x, out=y)": lambda: comm.all_reduce(x, out=y),
        "comm.all_reduce(x)": lambda: comm.all_reduce(x),
        "torch.distributed.all_reduce(y)": lambda: dist.all_reduce(y),
    }
    if mkccl.CUSTOM_OPS:
        paths["torch.ops.mkccl.all_reduce(x, h, 0)"] = lambda: torch.ops.mkccl.all_reduce(x, comm.handle, 0)
    out = {}
    for name, f in paths.items():
        for _ in range(50):
            f()
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        torch.cuda.synchronize()
        out[name] = (time.perf_counter() - t0) / iters * 1e6
    return out


def main(rank, world, shared, args):
    global _SYMM
    _SYMM = _symm_group_name() if not shared else "unavailable: ranks share GPUs"
    comm = mkccl.Communicator.from_group()
    results = []
    if not shared and not args.only:
        oh = host_overhead(comm)
        results.append({"op": "host_overhead_us", "ranks": world, "paths": oh})
        if rank == 0:
            print("host time per call, 1 KiB AllReduce (wall clock over 2000 calls):")
            for name, us in oh.items():
                print("  %-40s %6.1f us" % (name, us))
    for b in benches(world, args.quick):
        if args.only and b.op not in args.only:
            continue
        torch.manual_seed(args.seed + rank)
        sets = [b.make() for _ in range(3)]
        row = {"op": b.op, "shape": b.shape, "ranks": world, "device": torch.cuda.get_device_name()}
        try:
            ours = b.ours(comm, *sets[0])
            torch.cuda.synchronize()
        except Exception as e:
            row["error"] = "%s: %s" % (type(e).__name__, e)
            results.append(row)
            continue
        first = True
        for name, fn in b.baselines.items():
            if shared:
                break
            try:
                ref = fn(*sets[0])
                torch.cuda.synchronize()
                if first:
                    row["max_rel_err"] = common.max_over_ranks(common.rel_err(ours, ref))
                    first = False
                it = iter(range(1 << 30))
                row[name + "_us"] = common.time_us(lambda: fn(*sets[next(it) % 3]), args.iters)
            except Exception as e:
                row[name + "_us"] = None
                row[name + "_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:120])
        if not shared:
            it = iter(range(1 << 30))
            row["ours_us"] = common.time_us(lambda: b.ours(comm, *sets[next(it) % 3]), args.iters)
        results.append(row)
        if rank == 0:
            _print(row, b.baselines)
    comm.close()
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def _print(row, baselines):
    if "error" in row:
        print("%-20s %-18s ERROR %s" % (row["op"], row["shape"], row["error"]), flush=True)
        return
    parts = ["%-20s %-18s" % (row["op"], row["shape"])]
    if "ours_us" in row:
        parts.append("ours %9.1f us" % row["ours_us"])
    for name in baselines:
        t = row.get(name + "_us")
        if t:
            parts.append("%s %9.1f us (%.2fx)" % (name, t, t / row["ours_us"]))
        elif name + "_error" in row:
            parts.append("%s n/a (%s)" % (name, row[name + "_error"][:60]))
    if "max_rel_err" in row:
        parts.append("err %.2g" % row["max_rel_err"])
    print("  ".join(parts), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", type=int, default=torch.cuda.device_count())
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="fewer, smaller sizes")
    p.add_argument("--only", nargs="*", help="ops to run (default: all)")
    p.add_argument("--json", help="write the rows here (rank 0)")
    p.add_argument("--seed", type=int, default=None)
    a = p.parse_args()
    if a.seed is None:
        import time

        a.seed = time.time_ns() % (2 ** 31)
    common.launch(main, a.nprocs, a)
