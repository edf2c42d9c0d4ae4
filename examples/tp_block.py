"""A tensor-parallel transformer block (Megatron-style, sequence parallel) on libmkccl's fused ops,
checked against the unsharded block and the same block written with torch + NCCL, timed side by side.

    python examples/tp_block.py [--nprocs N] [--seq 4096] [--batch 2] [--hidden 4096] [--heads 32]

Each rank holds x[s/n, b, h] (its slice of the sequence). Attention: LayerNorm, column-parallel
QKV projection (AllGather+GEMM: the sequence is gathered inside the GEMM), SDPA on this rank's
heads, row-parallel output projection (GEMM+ReduceScatter: back to the rank's sequence slice).
MLP: LayerNorm, AllGather+GEMM into 4h/n, GELU, GEMM+ReduceScatter out. The torch + NCCL block
makes the same calls with all_gather_into_tensor + F.linear and F.linear + reduce_scatter_tensor.
(The MoE layer and ring attention join when libmkccl has them: see docs/PYTHON.md.)
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

import common  # noqa: F401  (sets the environment and sys.path first)
import mkccl


def weights(args, rank, world, device):
    """The full block's weights (the same on every rank: one seed) and this rank's shards."""
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    h, f = args.hidden, 4 * args.hidden

    def w(n, k):
        return (torch.randn(n, k, generator=g) / k ** 0.5).to(torch.bfloat16).to(device)

    full = {"qkv": w(3 * h, h), "o": w(h, h), "fc1": w(f, h), "fc2": w(h, f)}
    hl = h // world
    # QKV rows: [q heads | k heads | v heads]; this rank takes its heads of each.
    q, k, v = full["qkv"].chunk(3)
    shard = {
        "qkv": torch.cat([t[rank * hl:(rank + 1) * hl] for t in (q, k, v)]).contiguous(),
        "o": full["o"][:, rank * hl:(rank + 1) * hl].contiguous(),
        "fc1": full["fc1"][rank * (f // world):(rank + 1) * (f // world)].contiguous(),
        "fc2": full["fc2"][:, rank * (f // world):(rank + 1) * (f // world)].contiguous(),
    }
    return full, shard


def attention(qkv, heads, head_dim):
    """qkv[s, b, 3 * heads * head_dim] -> [s, b, heads * head_dim], causal."""
    s, b, _ = qkv.shape
    q, k, v = qkv.view(s, b, 3, heads, head_dim).permute(2, 1, 3, 0, 4)  # each [b, heads, s, d]
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.permute(2, 0, 1, 3).reshape(s, b, heads * head_dim)


def block(x, w, heads, head_dim, col, row):
    """The block with the column-parallel (col) and row-parallel (row) linears given."""
    h = x.shape[-1]
    a = row(attention(col(F.layer_norm(x, (h,)), w["qkv"]), heads, head_dim), w["o"])
    x = x + a
    m = row(F.gelu(col(F.layer_norm(x, (h,)), w["fc1"])), w["fc2"])
    return x + m


def main(rank, world, shared, args):
    dev = torch.device("cuda", torch.cuda.current_device())
    h, heads = args.hidden, args.heads
    assert heads % world == 0 and args.seq % world == 0, "heads and seq must divide by the ranks"
    head_dim = h // heads
    full, w = weights(args, rank, world, dev)
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    x_full = torch.randn(args.seq, args.batch, h, generator=g).to(torch.bfloat16).to(dev)
    sl = args.seq // world
    x = x_full[rank * sl:(rank + 1) * sl].contiguous()

    comm = mkccl.Communicator.from_group()
    ours = lambda: block(x, w, heads // world, head_dim, comm.all_gather_gemm, comm.gemm_reduce_scatter)  # noqa: E731

    def nccl_col(t, wt):
        full_t = torch.empty((world * t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
        dist.all_gather_into_tensor(full_t, t.contiguous())
        return F.linear(full_t, wt)

    def nccl_row(t, wt):
        y = F.linear(t, wt)
        out = torch.empty((y.shape[0] // world,) + tuple(y.shape[1:]), dtype=y.dtype, device=y.device)
        dist.reduce_scatter_tensor(out, y.contiguous())
        return out

    nccl = lambda: block(x, w, heads // world, head_dim, nccl_col, nccl_row)  # noqa: E731
    local = lambda t, wt: F.linear(t, wt)  # noqa: E731
    ref = block(x_full, full, heads, head_dim, local, local)[rank * sl:(rank + 1) * sl]

    y = ours()
    torch.cuda.synchronize()
    err = common.max_over_ranks(common.rel_err(y, ref))
    line = "tp_block ranks=%d s=%d b=%d h=%d heads=%d: libmkccl vs the unsharded block: max rel err %.3g" % (
        world, args.seq, args.batch, h, heads, err)
    t_nccl = None
    if not shared:
        yn = nccl()
        err_n = common.max_over_ranks(common.rel_err(yn, ref))
        line += "; torch+NCCL vs it: %.3g" % err_n
    ok = err < 5e-2
    t_ours = common.time_us(ours, args.iters)
    if not shared:
        t_nccl = common.time_us(nccl, args.iters)
    comm.close()
    if rank == 0:
        print(line, "PASS" if ok else "FAIL")
        if shared:
            print("  ranks share GPUs: timings skipped (meaningless), torch+NCCL not run")
        else:
            print("  block time (median of %d): libmkccl %.1f us, torch+NCCL %.1f us, speedup %.3fx" % (
                args.iters, t_ours, t_nccl, t_nccl / t_ours))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nprocs", type=int, default=torch.cuda.device_count())
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--seed", type=int, default=None, help="default: fresh every run")
    a = p.parse_args()
    if a.seed is None:
        import time

        a.seed = time.time_ns() % (2 ** 31)
    print("seed", a.seed)
    common.launch(main, a.nprocs, a)
