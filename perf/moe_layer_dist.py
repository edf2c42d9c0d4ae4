#!/usr/bin/env python3
"""The MoE expert layer at several ranks (one process per GPU): ours against the unfused layer in
PyTorch + NCCL, in the same run.

  ours     mkccl.moe.Moe.layer: mkcclMoeDispatch, the SwiGLU grouped GEMM, the grouped GEMM,
           mkcclMoeCombine (composed on the stream; nothing allocated per call)
  floor    our two grouped GEMMs alone on the rows the dispatch delivered (Moe.experts)
  torch    the unfused layer as engines write it (REFERENCE.md): sort the (token, slot) pairs by
           expert, all-to-all of the counts, a host sync for the sizes, all-to-all(v) of the rows and
           of their expert ids, a sort by local expert, torch._grouped_mm (gate+up), SwiGLU,
           torch._grouped_mm (down), all-to-all(v) back, the weighted sum (index_add_ in fp32)
Times: CUDA events around each call after a barrier of the ranks, warm-up, the candidates in
alternating rounds, the median per rank, then the largest over the ranks. Checked once per row:
ours against torch (max |difference| over the max |torch|).

  python3 -m torch.distributed.run --nproc_per_node 2 perf/moe_layer_dist.py [--shapes ds,qwen,mixtral]
      [--tokens 4096] [--routing uniform,skewed] [--iters 20] [--json out.json]
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(_here, "..", "python"), _here]
import mkccl  # noqa: E402
import mkccl.moe  # noqa: E402
from moe_vs_torch import SHAPES, routing  # noqa: E402  (the same shapes and routings as one GPU)

def torch_layer(x, idx, w, gate_up_t, down_t, El, I, ws, me):
    T, k = idx.shape
    flat = idx.flatten().long()
    order = torch.argsort(flat, stable=True)
    send = torch.bincount(flat // El, minlength=ws)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    sc, rc = send.tolist(), recv.tolist()  # the host sync every unfused layer has
    rows = x[order // k]
    got = torch.empty(sum(rc), x.shape[1], dtype=x.dtype, device=x.device)
    dist.all_to_all_single(got, rows, rc, sc)
    gexp = torch.empty(sum(rc), dtype=flat.dtype, device=x.device)
    dist.all_to_all_single(gexp, flat[order], rc, sc)
    local = gexp - me * El
    perm = torch.argsort(local, stable=True)
    offs = torch.cumsum(torch.bincount(local, minlength=El), 0).to(torch.int32)
    h = torch._grouped_mm(got[perm], gate_up_t, offs=offs)
    act = F.silu(h[:, :I]) * h[:, I:]
    y = torch._grouped_mm(act, down_t, offs=offs)
    back_rows = torch.empty_like(y)
    back_rows[perm] = y
    back = torch.empty(T * k, x.shape[1], dtype=x.dtype, device=x.device)
    dist.all_to_all_single(back, back_rows, sc, rc)
    out = torch.zeros(T, x.shape[1], dtype=torch.float32, device=x.device)
    out.index_add_(0, order // k, back.float() * w.flatten()[order, None])
    return out.to(x.dtype)


def timed(cands, warmup, iters, rounds=4):
    """Median ms per candidate over alternating rounds, each call after a barrier of the ranks."""
    for fn in cands.values():
        for i in range(warmup):
            fn(i)
    torch.cuda.synchronize()
    times = {k: [] for k in cands}
    for _ in range(rounds):
        for name, fn in cands.items():
            for i in range(max(1, iters // rounds)):
                torch.cuda.synchronize()
                dist.barrier()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn(i)
                b.record()
                b.synchronize()
                times[name].append(a.elapsed_time(b))
    med = torch.tensor([statistics.median(times[k]) for k in cands], device="cuda")
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    return {k: med[i].item() * 1e3 for i, k in enumerate(cands)}


def row(comm, key, T, skewed, iters, seed):
    name, H, I, E, k = SHAPES[key]
    ws, me = dist.get_world_size(), dist.get_rank()
    El = E // ws
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed * 1000 + me)
    gate = torch.randn(El, I, H, device="cuda", dtype=torch.bfloat16, generator=gen) * (H ** -0.5)
    up = torch.randn(El, I, H, device="cuda", dtype=torch.bfloat16, generator=gen) * (H ** -0.5)
    down = torch.randn(El, H, I, device="cuda", dtype=torch.bfloat16, generator=gen) * (I ** -0.5)
    w1 = mkccl.moe.pack_swiglu_weights(gate, up)
    gate_up_t = torch.cat([gate, up], 1).transpose(-2, -1)
    down_t = down.transpose(-2, -1)
    sets = [(torch.randn(T, H, device="cuda", dtype=torch.bfloat16, generator=gen),) + routing(T, E, k, skewed, gen)
            for _ in range(2)]
    moe = mkccl.moe.Moe(comm, E, k, H, T)
    act = torch.empty(moe.max_recv_rows, I, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(moe.max_recv_rows, H, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)

    def ours(i):
        x, idx, w = sets[i % 2]
        return moe.layer(x, idx, w, w1, down, out=out, act=act, y=y)

    def floor(i):
        moe.experts(w1, down, I, act=act, y=y)

    def ref(i):
        x, idx, w = sets[i % 2]
        return torch_layer(x, idx, w, gate_up_t, down_t, El, I, ws, me)

    got = ours(0).clone()
    want = ref(0)
    err = ((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-30)).item()
    errs = torch.tensor([err], device="cuda")
    dist.all_reduce(errs, op=dist.ReduceOp.MAX)
    # The floor runs on the rows of the handle's last dispatch (ours runs before it in every round).
    t = timed({"ours": ours, "floor": floor, "torch": ref}, 3, iters)
    moe.close()
    return {"shape": name, "H": H, "I": I, "E": E, "topk": k, "T": T, "routing": "skewed" if skewed else "uniform",
            "ranks": ws, "ours_us": t["ours"], "floor_us": t["floor"], "torch_us": t["torch"],
            "ours_floor_ratio": t["ours"] / t["floor"], "torch_over_ours": t["torch"] / t["ours"],
            "torch_floor_ratio": t["torch"] / t["floor"], "max_rel_err": errs.item()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="ds,qwen,mixtral")
    ap.add_argument("--tokens", default="4096")
    ap.add_argument("--routing", default="uniform,skewed")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    comm = mkccl.Communicator.from_group()
    rows, seed = [], 1
    for key in a.shapes.split(","):
        for T in (int(t) for t in a.tokens.split(",")):
            for r in a.routing.split(","):
                seed += 1
                res = row(comm, key, T, r == "skewed", a.iters, seed)
                rows.append(res)
                if dist.get_rank() == 0:
                    print("%-20s T %5d %-7s ours %8.0f us  floor %8.0f  ours/floor %.3f  torch %8.0f  torch/ours %.2f  "
                          "torch/floor %.2f  err %.1e" % (res["shape"], T, res["routing"], res["ours_us"], res["floor_us"],
                                                         res["ours_floor_ratio"], res["torch_us"], res["torch_over_ours"],
                                                         res["torch_floor_ratio"], res["max_rel_err"]), flush=True)
    if dist.get_rank() == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "ranks": dist.get_world_size(), "torch": torch.__version__,
                       "results": rows}, f, indent=1)
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
