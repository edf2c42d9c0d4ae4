"""mkccl.moe on a GPU: the expert layer (dispatch, SwiGLU grouped GEMM, grouped GEMM, combine)
against a float32 torch reference at 1 rank and at 2 ranks in threads (sharing the GPU where there
is one); dispatch + combine alone (y = recv_x: out = x * sum_j w_j); T = 0, 1, odd H and I; bad
arguments raise before any call. Fresh random inputs every run (the seed is printed)."""
import contextlib
import threading
import time

import cuda_env  # noqa: E402,F401  (before CUDA starts: cuda_env.py says why)

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mkccl  # noqa: E402
from rank_checks import rel_err  # noqa: E402
from test_gpu import destroy_streams, rank_streams, shared_gpus, two_devices  # noqa: E402

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] == 9
pytestmark = pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (sm_90)")


def seed(what):
    s = time.time_ns() % (2 ** 31)
    print("%s: seed %d" % (what, s))
    return s


def routing(T, E, k, g, dev):
    idx = torch.rand(T, E, device=dev, generator=g).topk(k, dim=1).indices.to(torch.int32)
    if T > 2:
        idx[1, -1] = -1  # a dropped slot
    w = torch.rand(T, k, device=dev, generator=g) * 0.5 + 0.1
    return idx.contiguous(), w.contiguous()


def reference(xs, idxs, ws, gates, ups, downs, El):
    """out of every rank in float32 (the activation and each expert output rounded to bf16 as ours)."""
    outs = []
    for x, idx, w in zip(xs, idxs, ws):
        o = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        for t in range(x.shape[0]):
            for j in range(idx.shape[1]):
                e = int(idx[t, j])
                if e < 0:
                    continue
                r, le = e // El, e % El
                xf = x[t].float().to(gates[r].device)
                a = (F.silu(gates[r][le].float() @ xf) * (ups[r][le].float() @ xf)).bfloat16().float()
                z = (downs[r][le].float() @ a).bfloat16().float()
                o[t] += w[t, j].item() * z.to(o.device)
        outs.append(o)
    return outs


def run_layer(devices, E, k, H, I, Ts, check_layer=True):
    n = len(devices)
    El = E // n
    g = torch.Generator(device="cuda").manual_seed(seed("moe layer %d ranks" % n))
    with shared_gpus(devices):
        comms = mkccl.init_all(devices)
    try:
        xs, idxs, ws, gates, ups, downs, w1s = [], [], [], [], [], [], []
        for r in range(n):
            dev = torch.device("cuda", devices[r])
            xs.append(torch.randn(Ts[r], H, device=dev, generator=None).bfloat16())
            i, w = routing(Ts[r], E, k, g, dev)
            idxs.append(i)
            ws.append(w)
            gates.append((torch.randn(El, I, H, device=dev) * 2 / H ** 0.5).bfloat16())
            ups.append((torch.randn(El, I, H, device=dev) * 2 / H ** 0.5).bfloat16())
            downs.append((torch.randn(El, H, I, device=dev) / I ** 0.5).bfloat16())
            w1s.append(mkccl.moe.pack_swiglu_weights(gates[r], ups[r]))
        max_ctas = 16 if len(set(devices)) < n else 0
        moes, outs, idents, errors = [None] * n, [None] * n, [None] * n, []

        def rank(r):
            try:
                with torch.cuda.device(devices[r]):
                    # Create is collective: every rank's thread calls it at once.
                    moes[r] = m = mkccl.moe.Moe(comms[r], E, k, H, max(max(Ts), 1), max_ctas=max_ctas)
                    s = torch.cuda.Stream()
                    # The inputs were made on the default stream, which a new stream does not follow.
                    s.wait_stream(torch.cuda.default_stream(devices[r]))
                    with torch.cuda.stream(s):
                        if check_layer:
                            outs[r] = m.layer(xs[r], idxs[r], ws[r], w1s[r], downs[r])
                        m.dispatch(xs[r], idxs[r], ws[r])
                        idents[r] = m.combine(m.recv_x)
                    s.synchronize()
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append("rank %d: %r" % (r, e))

        th = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        assert not errors, errors
        for r in range(n):
            assert idents[r].shape == (Ts[r], H)
            if Ts[r]:
                wsum = (ws[r] * (idxs[r] >= 0)).sum(1, keepdim=True)
                ref = xs[r].float() * wsum
                err = (idents[r].float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)
                assert err <= 1e-2, "rank %d: dispatch+combine max rel err %g" % (r, err)
        if check_layer:
            refs = reference(xs, idxs, ws, gates, ups, downs, El)
            for r in range(n):
                if Ts[r]:
                    err = (outs[r].float() - refs[r]).abs().max().item() / max(refs[r].abs().max().item(), 1e-6)
                    assert err <= 3e-2, "rank %d: layer max rel err %g" % (r, err)
        for m in moes:
            if m is not None:
                m.close()
    finally:
        for c in comms:
            c.close()


def test_layer_one_rank():
    run_layer([0], E=8, k=2, H=136, I=200, Ts=[37])


def test_layer_two_ranks():
    run_layer(two_devices(), E=8, k=3, H=128, I=256, Ts=[20, 1])


def test_dispatch_combine_t0_and_odd_hidden():
    run_layer(two_devices(), E=4, k=2, H=72, I=128, Ts=[0, 5], check_layer=False)


@pytest.mark.parametrize("w1_layout", ["blocked", "gate_up"])
def test_grouped_gemm_swiglu_against_torch(w1_layout):
    g = torch.Generator(device="cuda").manual_seed(seed("swiglu"))
    G, H, I = 3, 264, 200
    sizes = [0, 130, 7]
    offs = [0]
    for s in sizes:
        offs.append(offs[-1] + (s + 127) // 128 * 128)
    a = torch.randn(offs[-1], H, device="cuda", generator=g).bfloat16()
    gate = (torch.randn(G, I, H, device="cuda", generator=g) * 2 / H ** 0.5).bfloat16()
    up = (torch.randn(G, I, H, device="cuda", generator=g) * 2 / H ** 0.5).bfloat16()
    # gate_up: W1 as engines keep it, torch.cat((gate, up), 1) per expert, passed as is.
    w1 = mkccl.moe.pack_swiglu_weights(gate, up) if w1_layout == "blocked" else torch.cat((gate, up), 1).contiguous()
    out = mkccl.moe.grouped_gemm_swiglu(a, w1, torch.tensor(offs, dtype=torch.int32, device="cuda"), I,
                                        w1_layout=w1_layout)
    torch.cuda.synchronize()
    for gi in range(G):
        rows = a[offs[gi]: offs[gi] + sizes[gi]].float()
        ref = F.silu(rows @ gate[gi].float().t()) * (rows @ up[gi].float().t())
        got = out[offs[gi]: offs[gi] + sizes[gi]].float()
        if sizes[gi]:
            assert (got - ref).abs().max().item() <= 2e-2 * ref.abs().max().item()


def test_bad_arguments_raise_clearly():
    torch.cuda.set_device(0)
    with mkccl.Communicator.from_unique_id(mkccl.get_unique_id(), 0, 1) as comm:
        with pytest.raises(ValueError, match="dtype"):
            mkccl.moe.Moe(comm, 8, 2, 64, 16, dtype=torch.float32)
        with pytest.raises(mkccl.MkcclError) as e:
            mkccl.moe.Moe(comm, 8, 17, 64, 16)  # k > 16: the library's own check
        assert e.value.result in (mkccl.Result.INVALID_ARGUMENT, mkccl.Result.INVALID_USAGE)
        with mkccl.moe.Moe(comm, 8, 2, 64, 16) as m:
            x = torch.zeros(4, 64, device="cuda", dtype=torch.bfloat16)
            idx = torch.zeros(4, 2, device="cuda", dtype=torch.int64)
            w = torch.zeros(4, 2, device="cuda")
            with pytest.raises(ValueError, match="topk_idx"):
                m.dispatch(x, idx, w)
            with pytest.raises(ValueError, match="x must"):
                m.dispatch(torch.zeros(4, 32, device="cuda", dtype=torch.bfloat16), idx.int(), w)
            m.dispatch(x, idx.int(), w)
            with pytest.raises(ValueError, match="y must"):
                m.combine(torch.zeros(4, 64, device="cuda", dtype=torch.bfloat16))
            torch.cuda.synchronize()


# ---- the fused halves: dispatch_gemm (mkcclMoeDispatchGemm), gemm_combine (mkcclMoeGemmCombine) ----

def devices_for(n):
    """n ranks over the visible GPUs; ranks share them (round robin) where there are fewer."""
    c = torch.cuda.device_count()
    return list(range(n)) if c >= n else [r % c for r in range(n)]


def on_ranks(devices, body):
    """body(r, wait) in a thread per rank, on its device; wait() is a barrier of the ranks (a rank
    that raises breaks it, so its peers stop too). Raises with every rank's error."""
    n = len(devices)
    barrier = threading.Barrier(n, timeout=180)
    errors = []

    def run(r):
        try:
            with torch.cuda.device(devices[r]):
                body(r, barrier.wait)
        except threading.BrokenBarrierError:
            errors.append("rank %d: stopped (a peer failed or timed out)" % r)
        except Exception:  # noqa: BLE001 (reported below)
            import traceback

            errors.append("rank %d: %s" % (r, traceback.format_exc()))
            barrier.abort()

    th = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors, "\n".join(errors)


def fused_routing(T, E, k, g, dev):
    """Distinct experts per token, with -1 slots: the last slot of every third token, and every
    slot of token 4 (a token with no expert: its output is zeros)."""
    idx = torch.rand(T, E, generator=g).topk(k, dim=1).indices.to(torch.int32)
    idx[1::3, -1] = -1
    if T > 4:
        idx[4] = -1
    w = torch.rand(T, k, generator=g) * 0.5 + 0.1
    return idx.contiguous().to(dev), w.contiguous().to(dev)


def layer_reference(xs, idxs, ws, gates, ups, downs, El, dtype=torch.bfloat16):
    """out of every rank in fp32 (act and each expert's output rounded to dtype, as the kernels
    store them), on rank 0's device; a loop over the experts, not the tokens."""
    dev = xs[0].device
    n = len(xs)
    outs = []
    for x, idx, w in zip(xs, idxs, ws):
        x, idx, w = x.to(dev).float(), idx.to(dev).long(), w.to(dev)
        o = torch.zeros(x.shape, dtype=torch.float32, device=dev)
        for e in range(El * n):
            t, j = (idx == e).nonzero(as_tuple=True)
            if t.numel() == 0:
                continue
            r, le = e // El, e % El
            xe = x[t]
            a = F.silu(xe @ gates[r][le].to(dev).float().t()) * (xe @ ups[r][le].to(dev).float().t())
            z = (a.to(dtype).float() @ downs[r][le].to(dev).float().t()).to(dtype).float()
            o.index_add_(0, t, w[t, j].unsqueeze(1) * z)
        outs.append(o)
    return outs


def expert_weights(n, El, H, I, N, g, devices):
    """Per rank: gate, up [El, I, H]; down [El, H, I]; w1 packed; w1p [El, N, H] (the plain GEMM)."""
    ws = {"gate": [], "up": [], "down": [], "w1": [], "w1p": []}
    for r in range(n):
        dev = torch.device("cuda", devices[r])

        def rnd(*shape, scale):
            return (torch.randn(*shape, generator=g) * scale).bfloat16().to(dev)

        ws["gate"].append(rnd(El, I, H, scale=2 / H ** 0.5))
        ws["up"].append(rnd(El, I, H, scale=2 / H ** 0.5))
        ws["down"].append(rnd(El, H, I, scale=1 / I ** 0.5))
        ws["w1"].append(mkccl.moe.pack_swiglu_weights(ws["gate"][r], ws["up"][r]).contiguous())
        ws["w1p"].append(rnd(El, N, H, scale=1 / H ** 0.5))
    return ws


def routed_rows(offs, counts):
    """Indices of the rows that hold a routed token (not padding), from expert_offsets / counts."""
    offs, counts = offs.tolist(), counts.tolist()
    rows = [torch.arange(offs[e], offs[e] + counts[e]) for e in range(len(counts))]
    return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.int64)


def row_keys(info, rows):
    """One int64 per received row: (token, srcRank | slot << 16), which names it whatever its place."""
    i = info[rows].long()
    return (i[:, 0] << 32) | (i[:, 1] & 0xFFFFFFFF)


def fused_rows(o, rr):
    """For each routed row of the plain dispatch's layout (rr), the row of the same (token, source,
    slot) in the fused dispatch's layout, or None where the two hold different rows. The fused
    dispatch runs fewer CTAs than the plain one, and the order of a source's rows inside an expert's
    segment follows the CTAs' token ranges (docs/MOE.md), so rows may sit at other places."""
    kc, kf = row_keys(o["info_c"], rr), row_keys(o["info_f"], rr)
    oc, of = torch.argsort(kc), torch.argsort(kf)
    if not torch.equal(kc[oc], kf[of]):
        return None
    f = torch.empty_like(rr)
    f[oc] = rr[of]
    return f


@contextlib.contextmanager
def fused_route(route):
    """The fused calls' route (moe.fused_route) for the communicators made inside: the library's
    default (auto) runs them sequentially; these tests are of the overlapped kernels unless told."""
    mkccl.set_tuning(None if route is None else "moe.fused_route=" + route)
    try:
        yield
    finally:
        mkccl.set_tuning(None)


def run_fused(devices, E, k, H, I, N, Ts, route="overlap"):
    """On every rank, in one stream, with poisoned (NaN) outputs: (a) the composed layer (dispatch,
    grouped_gemm_swiglu, mkccl.ops.grouped_gemm, combine), (b) dispatch_gemm + grouped GEMM +
    combine, (c) dispatch + grouped_gemm_swiglu + gemm_combine, (d) layer(fused='both') with y the
    handle's recv_x, (e) dispatch_gemm(swiglu=False). Checks: the fused dispatch's layout equals the
    plain one's; act, y and out of the fused calls against the composed ones (1e-2) on the routed
    rows; the composed and both-fused layer against fp32 torch (3e-2); the plain GEMM against
    mkccl.ops.grouped_gemm on the same rows and against fp32."""
    n = len(devices)
    El = E // n
    g = torch.Generator().manual_seed(seed("moe fused halves, %d ranks on GPUs %s" % (n, devices)))
    with shared_gpus(devices), fused_route(route):
        comms = mkccl.init_all(devices)
    shared = len(set(devices)) < n
    streams, raw_streams = rank_streams(devices)
    try:
        xs, idxs, wts = [], [], []
        for r in range(n):
            dev = torch.device("cuda", devices[r])
            xs.append(torch.randn(Ts[r], H, generator=g).bfloat16().to(dev))
            i, w = fused_routing(Ts[r], E, k, g, dev)
            idxs.append(i)
            wts.append(w)
        W = expert_weights(n, El, H, I, N, g, devices)
        res = [dict() for _ in range(n)]
        fails = []

        def body(r, wait):
            comm = comms[r]
            dev = comm.device
            # Create is collective: every rank's thread calls it at once. Ranks sharing a GPU: 16
            # CTAs each (the fused calls' GEMM takes one SM per CTA: every rank's grids fit).
            m = mkccl.moe.Moe(comm, E, k, H, max(max(Ts), 1), max_ctas=16 if shared else 0)
            try:
                rows, T = m.max_recv_rows, Ts[r]
                x, idx, w = xs[r], idxs[r], wts[r]
                w1, w1p, w2 = W["w1"][r], W["w1p"][r], W["down"][r]

                def nan(*shape):
                    return torch.empty(*shape, dtype=torch.bfloat16, device=dev).fill_(float("nan"))

                b = {name: nan(rows, I) for name in ("act_c", "act_f", "act_s", "act_b")}
                b.update({name: nan(rows, H) for name in ("y_c", "y_f", "y_s", "rx_c")})
                b.update({name: nan(T, H) for name in ("out_c", "out_f", "out_s", "out_b")})
                b.update(act_p=nan(rows, N), pl_ref=nan(rows, N))
                for name, src in (("offs", m.expert_offsets), ("cnt", m.expert_counts), ("info", m.row_info)):
                    for sfx in ("_c", "_f"):
                        b[name + sfx] = torch.full(src.shape, -7, dtype=torch.int32, device=dev)
                        b[name + sfx].copy_(src)  # loads the copy kernels before the calls
                b["rx_c"].copy_(m.recv_x)
                b["rx_c"].fill_(float("nan"))
                torch.cuda.synchronize(dev)
                wait()  # nothing but libmkccl kernels from here while a peer may wait (rank_checks.py)
                s = streams[r]
                with torch.cuda.stream(s):
                    m.dispatch(x, idx, w)  # (a) composed
                    b["rx_c"].copy_(m.recv_x)
                    mkccl.ops.grouped_gemm(m.recv_x, w1p, m.expert_offsets, out=b["pl_ref"])
                    mkccl.moe.grouped_gemm_swiglu(m.recv_x, w1, m.expert_offsets, I, out=b["act_c"])
                    mkccl.ops.grouped_gemm(b["act_c"], w2, m.expert_offsets, out=b["y_c"])
                    m.combine(b["y_c"], out=b["out_c"])
                    for name in ("offs", "cnt", "info"):
                        b[name + "_c"].copy_({"offs": m.expert_offsets, "cnt": m.expert_counts,
                                              "info": m.row_info}[name])
                    act = m.dispatch_gemm(x, idx, w, w1, I, act=b["act_f"])  # (b) fused first half
                    assert act is b["act_f"]
                    for name in ("offs", "cnt", "info"):
                        b[name + "_f"].copy_({"offs": m.expert_offsets, "cnt": m.expert_counts,
                                              "info": m.row_info}[name])
                    mkccl.ops.grouped_gemm(b["act_f"], w2, m.expert_offsets, out=b["y_f"])
                    m.combine(b["y_f"], out=b["out_f"])
                    m.dispatch(x, idx, w)  # (c) fused second half
                    mkccl.moe.grouped_gemm_swiglu(m.recv_x, w1, m.expert_offsets, I, out=b["act_s"])
                    out = m.gemm_combine(b["act_s"], w2, y=b["y_s"], out=b["out_s"])
                    assert out is b["out_s"]
                    m.layer(x, idx, w, w1, w2, out=b["out_b"], fused="both", act=b["act_b"])  # (d)
                    m.dispatch_gemm(x, idx, w, w1p, N, act=b["act_p"], swiglu=False)  # (e)
                s.synchronize()
                wait()
                comm.check()
                res[r] = {name: t.cpu() for name, t in b.items()}
                wait()
            finally:
                m.close()

        on_ranks(devices, body)
        refs = layer_reference(xs, idxs, wts, W["gate"], W["up"], W["down"], El)
        for r in range(n):
            o = res[r]
            where = "rank %d/%d (T %d)" % (r, n, Ts[r])
            for name in ("offs", "cnt"):
                if not torch.equal(o[name + "_f"], o[name + "_c"]):
                    fails.append("%s: the fused dispatch's %s differs from the plain one's" % (where, name))
            rr = routed_rows(o["offs_c"], o["cnt_c"])
            fr = fused_rows(o, rr) if torch.equal(o["offs_f"], o["offs_c"]) else None
            if fr is None:
                fails.append("%s: the fused dispatch's segments hold other rows than the plain one's" % where)
                fr = rr
            # where each plain-layout row sits in the fused layout (act_f, act_p are in the latter)
            to_f = torch.full((o["info_c"].shape[0],), -1, dtype=torch.int64)
            to_f[rr] = fr
            checks = [("act (dispatch_gemm)", o["act_f"][fr], o["act_c"][rr], 1e-2),
                      ("act (composed, again)", o["act_s"][rr], o["act_c"][rr], 1e-2),
                      ("y (gemm_combine)", o["y_s"][rr], o["y_c"][rr], 1e-2),
                      ("out (dispatch_gemm + grouped GEMM + combine)", o["out_f"], o["out_c"], 1e-2),
                      ("out (gemm_combine)", o["out_s"], o["out_c"], 1e-2),
                      ("out (layer fused='both')", o["out_b"], o["out_c"], 1e-2),
                      ("out (composed) vs fp32", o["out_c"], refs[r], 3e-2),
                      ("out (both fused) vs fp32", o["out_b"], refs[r], 3e-2),
                      ("act (dispatch_gemm swiglu=False) vs grouped_gemm", o["act_p"][fr], o["pl_ref"][rr], 1e-2)]
            # The plain GEMM against fp32, expert by expert on the received rows.
            offs, cnt = o["offs_c"].tolist(), o["cnt_c"].tolist()
            for e in range(El):
                rows_e = torch.arange(offs[e], offs[e] + cnt[e])
                ref = o["rx_c"][rows_e].float() @ W["w1p"][r][e].cpu().float().t()
                checks.append(("act (swiglu=False) expert %d vs fp32" % e, o["act_p"][to_f[rows_e]], ref, 2e-2))
            if Ts[r] > 4:  # token 4 has no expert: zeros
                checks.append(("out of a token with no expert", o["out_b"][4], torch.zeros(H), 0.0))
            if sum(cnt) != int((idxs[r] >= 0).sum()) and n == 1:
                fails.append("%s: %d routed rows, %d slots with an expert" % (where, sum(cnt),
                                                                           int((idxs[r] >= 0).sum())))
            for what, got, ref, tol in checks:
                if what.startswith("out of a token"):
                    ok = not torch.isnan(got.float()).any() and float(got.float().abs().max()) == 0.0
                    e = 0.0 if ok else float("inf")
                else:
                    e = rel_err(got, ref)
                if not e <= tol:
                    fails.append("%s: %s: rel err %.3g > %.3g" % (where, what, e, tol))
        assert not fails, "\n".join(fails)
    finally:
        for c in comms:
            c.close()
        destroy_streams(raw_streams)


def test_fused_halves_one_rank():
    run_fused([0], E=4, k=2, H=136, I=200, N=72, Ts=[37])


def test_fused_halves_two_ranks():
    run_fused(devices_for(2), E=6, k=3, H=264, I=128, N=264, Ts=[21, 3])


def test_fused_halves_three_ranks_with_t0():
    run_fused(devices_for(3), E=6, k=2, H=72, I=136, N=136, Ts=[0, 1, 45])


def test_fused_halves_default_route_two_ranks():
    # moe.fused_route=auto (the default): the dispatch then the GEMM, the GEMM then the combine.
    run_fused(devices_for(2), E=6, k=3, H=264, I=128, N=264, Ts=[21, 3], route=None)


def capture_mode():
    """thread_local where this torch's torch.cuda.graph takes it (as the C++ tests capture): other
    threads of the process (the peers' ranks, the library's) may make CUDA calls meanwhile."""
    import inspect

    try:
        ok = "capture_error_mode" in inspect.signature(torch.cuda.graph.__init__).parameters
    except (TypeError, ValueError):
        ok = False
    return {"capture_error_mode": "thread_local"} if ok else {}


def test_fused_layers_captured_in_a_cuda_graph():
    """layer() in its four forms (composed, fused 'first', 'second', 'both'), given act=, y= and out=
    (nothing allocated), captured in one torch CUDA graph per rank (2 ranks) after an eager
    call, replayed 3 times with fresh x, routing and weights copied into the captured inputs:
    every form against fp32 torch and the fused ones against the composed one."""
    devices = devices_for(2)
    n, E, k, H, I, Ts, rounds = 2, 4, 3, 136, 128, [50, 23], 3
    El = E // n
    modes = (False, "first", "second", "both")
    g = torch.Generator().manual_seed(seed("moe fused layers in a CUDA graph, GPUs %s" % devices))
    with shared_gpus(devices), fused_route("overlap"):
        comms = mkccl.init_all(devices)
    shared = len(set(devices)) < n
    try:
        W = expert_weights(n, El, H, I, 8, g, devices)
        inputs = []  # inputs[round][r] = (x, idx, w); round 0 is the eager warm-up's
        for _ in range(rounds + 1):
            per = []
            for r in range(n):
                dev = torch.device("cuda", devices[r])
                i, w = fused_routing(Ts[r], E, k, g, dev)
                per.append((torch.randn(Ts[r], H, generator=g).bfloat16().to(dev), i, w))
            inputs.append(per)
        got = [[None] * rounds for _ in range(n)]

        def body(r, wait):
            comm = comms[r]
            dev = comm.device
            m = mkccl.moe.Moe(comm, E, k, H, max(Ts), max_ctas=16 if shared else 0)
            try:
                T, rows = Ts[r], m.max_recv_rows
                x_s, idx_s, w_s = (t.clone() for t in inputs[0][r])
                acts = {md: torch.empty(rows, I, dtype=torch.bfloat16, device=dev) for md in modes}
                outs = {md: torch.empty(T, H, dtype=torch.bfloat16, device=dev) for md in modes}
                ys = {md: torch.empty(rows, H, dtype=torch.bfloat16, device=dev) for md in modes}
                w1, w2 = W["w1"][r], W["down"][r]
                s = torch.cuda.Stream(dev)
                s.wait_stream(torch.cuda.current_stream(dev))

                def layers():
                    for md in modes:
                        m.layer(x_s, idx_s, w_s, w1, w2, out=outs[md], fused=md, act=acts[md], y=ys[md])

                for t in list(outs.values()):  # loads the kernels used between replays
                    t.fill_(float("nan"))
                    t.clone()
                torch.cuda.synchronize(dev)
                wait()
                with torch.cuda.stream(s):
                    layers()  # eager first: the GEMMs' plans exist before the capture
                s.synchronize()
                wait()
                # Captures one rank at a time (torch.cuda.graph synchronises the device on entry;
                # the other ranks wait on the host, with nothing in flight).
                graph = torch.cuda.CUDAGraph()
                for q in range(n):
                    wait()
                    if q == r:
                        with torch.cuda.graph(graph, stream=s, **capture_mode()):
                            layers()
                wait()
                for rd in range(rounds):
                    x, idx, w = inputs[rd + 1][r]
                    with torch.cuda.stream(s):
                        x_s.copy_(x)
                        idx_s.copy_(idx)
                        w_s.copy_(w)
                        for t in outs.values():
                            t.fill_(float("nan"))
                        s.synchronize()
                        wait()
                        graph.replay()
                        s.synchronize()
                        got[r][rd] = {md: outs[md].cpu() for md in modes}
                    wait()
                comm.check()
                del graph
            finally:
                m.close()

        on_ranks(devices, body)
        fails = []
        for rd in range(rounds):
            per = inputs[rd + 1]
            refs = layer_reference([p[0] for p in per], [p[1] for p in per], [p[2] for p in per], W["gate"],
                                   W["up"], W["down"], El)
            for r in range(n):
                for md in modes:
                    e = rel_err(got[r][rd][md], refs[r])
                    if not e <= 3e-2:
                        fails.append("replay %d rank %d fused=%r: vs fp32 rel err %.3g" % (rd, r, md, e))
                    e = rel_err(got[r][rd][md], got[r][rd][False])
                    if not e <= 1e-2:
                        fails.append("replay %d rank %d fused=%r: vs composed rel err %.3g" % (rd, r, md, e))
        assert not fails, "\n".join(fails)
    finally:
        for c in comms:
            c.close()


def test_fused_calls_bad_arguments_raise_before_the_call():
    """On a real handle: layout errors raise ValueError/TypeError and nothing is enqueued (the
    handle works after them); a tensor on another device is named; the library's own refusal
    (gemm_combine before any dispatch with num_tokens given) is an MkcclError."""
    torch.cuda.set_device(0)
    with mkccl.Communicator.from_unique_id(mkccl.get_unique_id(), 0, 1) as comm:
        with mkccl.moe.Moe(comm, 4, 2, 64, 16) as m:
            x = torch.randn(8, 64, device="cuda").bfloat16()
            idx = torch.randint(0, 4, (8, 2), device="cuda", dtype=torch.int32)
            w = torch.rand(8, 2, device="cuda")
            w1 = torch.zeros(4, 256, 64, device="cuda", dtype=torch.bfloat16)
            w2 = torch.zeros(4, 64, 72, device="cuda", dtype=torch.bfloat16)
            act = torch.zeros(m.max_recv_rows, 72, device="cuda", dtype=torch.bfloat16)
            with pytest.raises(mkccl.MkcclError) as e:
                m.gemm_combine(act, w2, num_tokens=8)  # no dispatch yet: the library's check
            assert e.value.result == mkccl.Result.INVALID_USAGE, e.value
            with pytest.raises(ValueError, match="pack_swiglu_weights"):
                m.dispatch_gemm(x, idx, w, w1[:, :128], 72)
            with pytest.raises(ValueError, match="must be a CUDA tensor"):
                m.dispatch_gemm(x, idx, w.cpu(), w1, 72)
            with pytest.raises(ValueError, match="act is"):
                m.dispatch_gemm(x, idx, w, w1, 72, act=act[:-1])
            with pytest.raises(ValueError, match="not 16-byte aligned"):
                m.dispatch_gemm(x, idx, w, w1, 72, act=torch.zeros(act.numel() + 1, device="cuda",
                                                                   dtype=torch.bfloat16)[1:])
            if torch.cuda.device_count() > 1:
                with pytest.raises(ValueError, match="communicator is on"):
                    m.dispatch_gemm(x, idx, w, w1.to("cuda:1"), 72)
            with pytest.raises(ValueError, match="fused="):
                m.layer(x, idx, w, w1, w2, fused="all")
            # After the refusals the handle still works: a fused layer of one rank.
            assert m.dispatch_gemm(x, idx, w, w1, 72, act=act) is act
            out = m.gemm_combine(act, w2)
            torch.cuda.synchronize()
            assert out.shape == (8, 64) and not torch.isnan(out.float()).any()
            comm.check()
