"""Every op against torch, on random shapes, as one rank of a communicator (GPU tests).

Each rank makes the inputs of every rank from one seed (so it can compute its own reference with
plain torch), then runs in three phases separated by barriers: (1) inputs and references, (2)
the libmkccl calls back to back on the rank's own stream, (3) the comparison. Nothing but
libmkccl kernels runs while a rank's kernels may be waiting for its peers' (a first launch of a
torch kernel then could wait for the device to go idle: CUDA's lazy module loading).
Used in one process (a thread per rank) and across processes (torch.multiprocessing).
"""
import os
import time

import torch
import torch.nn.functional as F

import mkccl

# Tolerance on max|out - ref| / max|ref| by output dtype (bf16 rounds to 8 bits, fp16 to 11).
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4, torch.float64: 1e-12}


class Case:
    """One call: per-rank inputs (CPU), options, and the reference outputs of rank r."""

    def __init__(self, name, inputs, options, reference, run=None, custom=None):
        self.name, self.inputs, self.options, self.reference = name, inputs, options or {}, reference
        self.run = run or (lambda comm, args, out: getattr(comm, name)(*args, **self.options, out=out))
        self.custom = custom or self._custom

    def _custom(self, comm, args):
        """The same call through torch.ops.mkccl.* (the dispatcher path torch.compile uses)."""
        opts = [int(mkccl.ReduceOp[self.options["op"].upper()])] if "op" in self.options else []
        return getattr(torch.ops.mkccl, self.name)(*args, comm.handle, *opts)

    def __repr__(self):
        shapes = [tuple(t.shape) for t in self.inputs[0]]
        dt = self.inputs[0][0].dtype
        return "%s%s %s %s" % (self.name, shapes, str(dt).replace("torch.", ""), self.options or "")


def _rand(g, shape, dt):
    if dt.is_floating_point:
        return torch.randn(shape, generator=g).to(dt)
    lo = 0 if dt == torch.uint8 else -50
    return torch.randint(lo, 50, shape, generator=g).to(dt)


def _reduce(ts, op):
    x = torch.stack([t.double() for t in ts])
    if op in ("sum", "avg"):
        y = x.sum(0)
        if op == "avg":
            y = y / len(ts)
    elif op == "max":
        y = x.max(0).values
    elif op == "min":
        y = x.min(0).values
    else:
        y = x.prod(0)
    return y


def cases(seed, n):
    """The checks of one round, the same on every rank (made from `seed`)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    out = []
    # Collectives on several dtypes and random shapes.
    for dt in (torch.bfloat16, torch.float32, torch.int32, torch.uint8, torch.float16):
        shape = (rnd(1, 300), rnd(1, 33))
        xs = [_rand(g, shape, dt) for _ in range(n)]
        out.append(Case("all_gather", [(x,) for x in xs], {}, lambda r, xs=xs: [torch.cat(xs)]))
    for dt, op in ((torch.bfloat16, "sum"), (torch.float32, "max"), (torch.int32, "sum"), (torch.float32, "avg"),
                   (torch.float16, "min"), (torch.float32, "prod")):
        shape = (n * rnd(1, 200), rnd(1, 17))
        xs = [_rand(g, shape, dt) for _ in range(n)]
        if op == "prod":
            xs = [1 + 0.1 * x for x in xs]
        out.append(Case("reduce_scatter", [(x,) for x in xs], {"op": op},
                        lambda r, xs=xs, op=op: [_reduce(xs, op).chunk(n)[r]]))
        shape2 = (rnd(1, 5000),)
        ys = [_rand(g, shape2, dt) for _ in range(n)]
        if op == "prod":
            ys = [1 + 0.1 * y for y in ys]
        out.append(Case("all_reduce", [(y,) for y in ys], {"op": op}, lambda r, ys=ys, op=op: [_reduce(ys, op)]))
    # In place: AllReduce with out=x; AllGather with x this rank's block of out.
    shape = (rnd(1, 3000),)
    ys = [_rand(g, shape, torch.float32) for _ in range(n)]

    def ar_in_place(comm, args):
        torch.ops.mkccl.all_reduce_out(args[0], comm.handle, 0, out=args[0])
        return args[0]

    out.append(Case("all_reduce", [(y,) for y in ys], {}, lambda r, ys=ys: [_reduce(ys, "sum")],
                    run=lambda comm, args, o: comm.all_reduce(args[0], out=args[0]), custom=ar_in_place))
    rows = rnd(1, 100)
    xs = [_rand(g, (n * rows, 5), torch.bfloat16) for _ in range(n)]  # rank r's block holds its input

    def ag_in_place(comm, args, custom=False):
        x = args[0]
        mine = x[comm.rank * rows:(comm.rank + 1) * rows]
        if custom:
            torch.ops.mkccl.all_gather_out(mine, comm.handle, out=x)
        else:
            comm.all_gather(mine, out=x)
        return x

    out.append(Case("all_gather", [(x,) for x in xs], {},
                    lambda r, xs=xs: [torch.cat([x[q * rows:(q + 1) * rows] for q, x in enumerate(xs)])],
                    run=lambda comm, args, o: ag_in_place(comm, args),
                    custom=lambda comm, args: ag_in_place(comm, args, True)))
    for dt in (torch.bfloat16, torch.int64):
        shape = (n * rnd(1, 100), rnd(1, 9))
        xs = [_rand(g, shape, dt) for _ in range(n)]
        out.append(Case("all_to_all", [(x,) for x in xs], {},
                        lambda r, xs=xs: [torch.cat([x.chunk(n)[r] for x in xs])]))
    # AllToAllv: S[p][q] rows from rank p to rank q (some zero).
    S = [[rnd(0, 40) if rnd(0, 4) else 0 for _ in range(n)] for _ in range(n)]
    cols = rnd(1, 12)
    xs = [_rand(g, (sum(S[p]), cols), torch.float32) for p in range(n)]

    def a2av_ref(r, xs=xs, S=S):
        return [torch.cat([xs[q][sum(S[q][:r]):sum(S[q][:r]) + S[q][r]] for q in range(n)])]

    def splits(r, S=S):
        return S[r], [S[q][r] for q in range(n)]

    out.append(Case("all_to_all_v", [(xs[p],) for p in range(n)], None, a2av_ref,
                    run=lambda comm, args, o: comm.all_to_all_v(args[0], *splits(comm.rank), out=o),
                    custom=lambda comm, args: torch.ops.mkccl.all_to_all_v(args[0], comm.handle,
                                                                           *splits(comm.rank))))
    # GEMM and the fused ops (bf16 and fp16; K and N multiples of 8 elements: 16-byte rows).
    for dt in (torch.bfloat16, torch.float16):
        M, N, K = rnd(1, 300), 8 * rnd(1, 80), 8 * rnd(1, 96)
        a = [_rand(g, (M, K), dt) for _ in range(n)]
        w = [_rand(g, (N, K), dt) / K ** 0.5 for _ in range(n)]
        for odt in (None, torch.float32):
            out.append(Case("gemm", list(zip(a, w)), {"out_dtype": odt},
                            lambda r, a=a, w=w, odt=odt: [F.linear(a[r].float(), w[r].float())],
                            run=lambda comm, args, o, odt=odt: mkccl.ops.gemm(*args, out_dtype=odt, out=o),
                            custom=lambda comm, args, odt=odt: torch.ops.mkccl.gemm(*args, odt)))
        m = rnd(1, 200)
        lead = (m, 2) if dt == torch.float16 else (m,)  # a 3-D input once: [m, b, K]
        a = [_rand(g, lead + (K,), dt) for _ in range(n)]
        out.append(Case("all_gather_gemm", list(zip(a, w)), {},
                        lambda r, a=a, w=w: [F.linear(torch.cat(a).float(), w[r].float())]))
        out.append(Case("all_gather_gemm_gathered", list(zip(a, w)), {},
                        lambda r, a=a, w=w: [F.linear(torch.cat(a).float(), w[r].float()), torch.cat(a)]))
        a = [_rand(g, (n * m,) + lead[1:] + (K,), dt) for _ in range(n)]
        full = lambda a=a, w=w: sum(F.linear(a[q].float(), w[q].float()) for q in range(n))
        out.append(Case("gemm_reduce_scatter", list(zip(a, w)), {}, lambda r, full=full: [full().chunk(n)[r]]))
        out.append(Case("gemm_all_reduce", list(zip(a, w)), {}, lambda r, full=full: [full()]))
    out += _attention_cases(g, n, rnd)
    return out


def _attn_ref(q, k, v, causal, scale, q_pos=None, k_pos=None):
    """(out [B, S, Hq, D], lse [B, Hq, S]) in float64 on the CPU; positions (global) decide the causal
    mask: query i sees key j when k_pos[j] <= q_pos[i] (default: the bottom-right alignment)."""
    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        qp = torch.arange(sq) + (sk - sq) if q_pos is None else q_pos
        kp = torch.arange(sk) if k_pos is None else k_pos
        s = s.masked_fill(kp[None, :] > qp[:, None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhqk,bkhd->bqhd", p, v), lse


def _attention_cases(g, n, rnd):
    out = []
    dt = torch.bfloat16
    for d, (hq, hkv), causal in ((64, (4, 2), False), (128, (4, 4), True)):
        sq = rnd(1, 200)
        q = [_rand(g, (1, sq, hq, d), dt) for _ in range(n)]
        k = [_rand(g, (1, sq, hkv, d), dt) for _ in range(n)]
        v = [_rand(g, (1, sq, hkv, d), dt) for _ in range(n)]
        sc = d ** -0.5
        out.append(Case("attention", list(zip(q, k, v)), {"scale": sc, "causal": causal},
                        lambda r, q=q, k=k, v=v, causal=causal, sc=sc: list(_attn_ref(q[r], k[r], v[r], causal, sc)),
                        run=lambda comm, args, o, sc=sc, causal=causal: mkccl.ops.attention(
                            *args, scale=sc, causal=causal, out=o),
                        custom=lambda comm, args, sc=sc, causal=causal: torch.ops.mkccl.attention(*args, sc, causal)))
    # Ring Attention: the global sequence cut over the ranks (contiguous, or zigzag: chunks r, 2n-1-r).
    for zigzag, causal in ((False, False), (False, True), (True, True)):
        s_local, hq, hkv, d = 2 * rnd(8, 64), 4, 2, 64
        S = n * s_local
        gq, gk, gv = (_rand(g, (1, S, h, d), dt) for h in (hq, hkv, hkv))
        if zigzag:
            half = s_local // 2
            pos = [torch.cat([torch.arange(r * half, (r + 1) * half),
                              torch.arange((2 * n - 1 - r) * half, (2 * n - r) * half)]) for r in range(n)]
        else:
            pos = [torch.arange(r * s_local, (r + 1) * s_local) for r in range(n)]
        sc = d ** -0.5
        full_o, full_lse = _attn_ref(gq, gk, gv, causal, sc, torch.arange(S), torch.arange(S))
        out.append(Case("ring_attention",
                        [(gq[:, pos[r]].contiguous(), gk[:, pos[r]].contiguous(), gv[:, pos[r]].contiguous())
                         for r in range(n)],
                        {"scale": sc, "causal": causal, "zigzag": zigzag},
                        lambda r, pos=pos, o=full_o, lse=full_lse: [o[:, pos[r]], lse[:, :, pos[r]]],
                        custom=lambda comm, args, sc=sc, causal=causal, zigzag=zigzag: torch.ops.mkccl.ring_attention(
                            *args, comm.handle, sc, causal, zigzag)))
    return out


def _poison(t):
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    else:
        t.fill_(-7 if t.dtype != torch.uint8 else 201)
    return t


def rel_err(got, ref):
    """max|got - ref| / max|ref| in fp32, ref moved to got's device; inf for a NaN (a poisoned value
    left) or a wrong shape."""
    if tuple(got.shape) != tuple(ref.shape):
        return float("inf")
    if ref.numel() == 0:
        return 0.0
    got, ref = got.float(), ref.float().to(got.device)
    if torch.isnan(got).any():
        return float("inf")
    return (got - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)


def _err(out, ref):
    """max|out - ref| / max|ref| (inf for a wrong size or a NaN left from the poison)."""
    if out.numel() != ref.numel():
        return float("inf")
    if not ref.numel():
        return 0.0
    out, ref = out.double().reshape(ref.shape), ref.double()
    if torch.isnan(out).any():
        return float("inf")
    return (out - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)


def rank_main(comm, seed, barrier, preallocate, use_custom_ops=False):
    """Runs every case as comm's rank; returns a list of failure messages (empty: all passed)."""
    torch.cuda.set_device(comm.device)
    dev = comm.device
    n, r = comm.size, comm.rank
    all_cases = cases(seed, n)
    stream = torch.cuda.Stream(dev)
    # Phase 1: inputs, references, poisoned outputs; every torch kernel used later is loaded here.
    prepared = []
    for c in all_cases:
        args = [t.to(dev) for t in c.inputs[r]]
        refs = [t.to(dev) for t in c.reference(r)]
        prepared.append((c, args, refs))
    outs = []
    for c, args, refs in prepared:
        if preallocate:
            o = [_poison(torch.empty(t.shape, dtype=_out_dtype(c, args, t), device=dev)) for t in refs]
            outs.append(o[0] if len(o) == 1 else tuple(o))
        else:
            outs.append(None)
    _err(torch.zeros(2, device=dev), torch.ones(2, device=dev))
    torch.cuda.synchronize(dev)
    barrier()
    # Phase 2: the calls, back to back on this rank's stream.
    results, failures = [], []
    t0 = time.time()
    with torch.cuda.stream(stream):
        for (c, args, refs), o in zip(prepared, outs):
            if use_custom_ops:
                res = c.custom(comm, args)
            else:
                res = c.run(comm, args, o)
            results.append(res)
    stream.synchronize()
    elapsed = time.time() - t0
    barrier()
    # Phase 3: compare.
    for (c, args, refs), res in zip(prepared, results):
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        for i, (o, ref) in enumerate(zip(res, refs)):
            tol = TOL.get(o.dtype, 0.0)
            if c.name == "all_gather_gemm_gathered" and i == 1 or c.name in ("all_gather", "all_to_all", "all_to_all_v"):
                tol = 0.0  # copies: exact
            e = _err(o, ref)
            if not e <= tol:
                failures.append("rank %d/%d: %r output %d: rel err %.3g > %.3g" % (r, n, c, i, e, tol))
    if os.environ.get("MKCCL_TEST_VERBOSE"):
        print("rank %d/%d: %d calls in %.3f s, %d failures" % (r, n, len(prepared), elapsed, len(failures)), flush=True)
    return failures


def _out_dtype(c, args, ref):
    if c.name == "gemm" and c.options.get("out_dtype") is not None:
        return c.options["out_dtype"]
    if c.name in ("attention", "ring_attention") and ref.dim() == 3:
        return torch.float32  # the log-sum-exp
    return args[0].dtype


def process_main(rank, world, device, init_method, seed, queue, devices):
    """One process of the multi-process test: a gloo group, a communicator from it, rank_main."""
    import torch.distributed as dist

    if len(set(devices)) < len(devices):
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        os.environ["MKCCL_SHARE_GPUS"] = "1"
        os.environ["MKCCL_MAX_CTAS"] = str((sms // 2 - 8) // 2 * 2)
    fails = []
    try:
        torch.cuda.set_device(device)
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
        with mkccl.Communicator.from_group() as comm:
            assert (comm.rank, comm.size, comm.device) == (rank, world, torch.device("cuda", device))
            fails = rank_main(comm, seed, dist.barrier, preallocate=False)
            dist.barrier()
    except Exception:
        import traceback

        fails = ["rank %d raised:\n%s" % (rank, traceback.format_exc())]
    queue.put((rank, fails))
    try:
        dist.destroy_process_group()
    except Exception:
        pass
