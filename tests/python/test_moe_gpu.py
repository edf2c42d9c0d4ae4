"""mkccl.moe on a GPU: the expert layer (dispatch, SwiGLU grouped GEMM, grouped GEMM, combine)
against a float32 torch reference at 1 rank and at 2 ranks in threads (sharing the GPU where there
is one); dispatch + combine alone (y = recv_x: out = x * sum_j w_j); T = 0, 1, odd H and I; bad
arguments raise before any call. Fresh random inputs every run (the seed is printed)."""
import os
import threading
import time

os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mkccl  # noqa: E402
from test_gpu import shared_gpus, two_devices  # noqa: E402

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


def test_grouped_gemm_swiglu_against_torch():
    g = torch.Generator(device="cuda").manual_seed(seed("swiglu"))
    G, H, I = 3, 264, 200
    sizes = [0, 130, 7]
    offs = [0]
    for s in sizes:
        offs.append(offs[-1] + (s + 127) // 128 * 128)
    a = torch.randn(offs[-1], H, device="cuda", generator=g).bfloat16()
    gate = (torch.randn(G, I, H, device="cuda", generator=g) * 2 / H ** 0.5).bfloat16()
    up = (torch.randn(G, I, H, device="cuda", generator=g) * 2 / H ** 0.5).bfloat16()
    out = mkccl.moe.grouped_gemm_swiglu(a, mkccl.moe.pack_swiglu_weights(gate, up),
                                        torch.tensor(offs, dtype=torch.int32, device="cuda"), I)
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
