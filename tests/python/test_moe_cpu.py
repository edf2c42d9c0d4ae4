"""mkccl.moe without a GPU: the blocked-interleave packing of W1 (what mkcclGroupedGemmSwiglu reads),
the C prototypes of the MoE calls, the fused halves' argument checks (dispatch_gemm, gemm_combine,
layer(fused=...)), and the tuner's MoE CTA keys."""
import pytest
import torch

import mkccl
from mkccl import _library


def test_pack_swiglu_weights_layout():
    E, I, H = 2, 200, 24
    gate = torch.randn(E, I, H)
    up = torch.randn(E, I, H)
    w = mkccl.moe.pack_swiglu_weights(gate, up)
    Ip = 256
    assert w.shape == (E, 2 * Ip, H) and w.is_contiguous()
    for e in range(E):
        for r in (0, 1, 127, 128, 199):
            b, i = divmod(r, 128)
            assert torch.equal(w[e, 256 * b + i], gate[e, r])
            assert torch.equal(w[e, 256 * b + 128 + i], up[e, r])
        assert torch.count_nonzero(w[e, 256 + 72: 256 + 128]) == 0  # gate padding of the last block
        assert torch.count_nonzero(w[e, 256 + 128 + 72:]) == 0  # up padding
    w2 = mkccl.moe.pack_swiglu_weights(gate[0], up[0])
    assert torch.equal(w2, w[0])


def test_w1_layouts_are_checked():
    # The layout's shape, and unknown layouts named, before anything reaches the library.
    a = torch.zeros(128, 24, dtype=torch.bfloat16)
    offs = torch.zeros(3, dtype=torch.int32)
    with pytest.raises(ValueError, match="w1_layout='diagonal'"):
        mkccl.moe.grouped_gemm_swiglu(a, torch.zeros(2, 400, 24, dtype=torch.bfloat16), offs, 200,
                                      w1_layout="diagonal")
    assert mkccl.moe._w1_shape(2, 200, 24, "gate_up")[0] == (2, 400, 24)
    assert mkccl.moe._w1_shape(2, 200, 24, "blocked")[0] == (2, 512, 24)
    m = _handle()
    x, idx, w = _tokens()
    w2 = torch.zeros(2, 64, 200, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="gate rows, then up rows"):  # a blocked W1 given as gate_up
        m.layer(x, idx, w, torch.zeros(2, 512, 64, dtype=torch.bfloat16), w2, w1_layout="gate_up")
    with pytest.raises(ValueError, match="pack_swiglu_weights"):  # a gate_up W1 given as blocked
        m.layer(x, idx, w, torch.zeros(2, 400, 64, dtype=torch.bfloat16), w2)
    assert "mkcclGroupedGemmSwigluEx" in _library.PROTOTYPES


def test_pack_swiglu_weights_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="gate and up"):
        mkccl.moe.pack_swiglu_weights(torch.zeros(2, 8, 4), torch.zeros(2, 8, 5))


def test_moe_calls_are_declared():
    for name in ("mkcclGroupedGemmSwiglu", "mkcclMoeCreate", "mkcclMoeDestroy", "mkcclMoeGetBuffers",
                 "mkcclMoeDispatch", "mkcclMoeCombine"):
        assert name in _library.PROTOTYPES
    assert mkccl.moe.MoeConfig.__name__ == "MoeConfig"
    # The C struct is 64 bytes on LP64 (size, magic, version, E, k, H, dtype, cap, rows, align, ctas).
    import ctypes
    assert ctypes.sizeof(mkccl.moe.MoeConfig) == 64


# ---- the fused halves' argument checks (no GPU: a handle's Python side without the library) ------

class _Comm:
    device = torch.device("cuda", 0)
    ptr = None


def _handle(El=2, H=64, k=2, rows=256, row_align=128, dtype=torch.bfloat16, last_T=None):
    """A Moe whose checks run but whose C calls cannot (no library handle): every layout mistake
    raises before the placement checks, which then refuse the CPU tensors."""
    m = mkccl.moe.Moe.__new__(mkccl.moe.Moe)
    m.comm, m.lib, m.ptr, m.dtype = _Comm(), None, None, dtype
    m.hidden, m.topk, m.max_tokens = H, k, 64
    m.num_local_experts, m.max_recv_rows, m.row_align, m._row_pitch = El, rows, row_align, (H + 7) // 8 * 8
    m.recv_x = torch.zeros(rows, H, dtype=dtype)
    m.expert_offsets = torch.zeros(El + 1, dtype=torch.int32)
    m._last_T, m._empty = last_T, torch.empty(16, dtype=torch.uint8)
    return m


def _tokens(T=5, H=64, k=2, dtype=torch.bfloat16):
    idx = torch.randint(-1, 4, (T, k), dtype=torch.int32)
    return torch.randn(T, H).to(dtype), idx, torch.rand(T, k)


def _w1(El=2, inter=72, H=64, dtype=torch.bfloat16):
    return torch.zeros(El, 2 * ((inter + 127) // 128 * 128), H, dtype=dtype)


def test_dispatch_gemm_layout_checks_come_first_then_placement():
    m = _handle()
    x, idx, w = _tokens()
    with pytest.raises(ValueError, match="must be a CUDA tensor"):  # every layout right: only the device
        m.dispatch_gemm(x, idx, w, _w1(), 72)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        m.dispatch_gemm(x, idx, w, torch.zeros(2, 72, 64, dtype=torch.bfloat16), 72, swiglu=False)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        m.dispatch_gemm(x, idx, w, _w1(), 72, act=torch.zeros(256 * 72, dtype=torch.bfloat16))  # any shape
    with pytest.raises(ValueError, match="handle's dtype"):
        m.dispatch_gemm(x.half(), idx, w, _w1(), 72)
    with pytest.raises(ValueError, match="topk_idx"):
        m.dispatch_gemm(x, idx.long(), w, _w1(), 72)
    with pytest.raises(ValueError, match="topk_w"):
        m.dispatch_gemm(x, idx, w[:, :1], _w1(), 72)
    with pytest.raises(ValueError, match="x must"):
        m.dispatch_gemm(x.t().contiguous().t(), idx, w, _w1(), 72)  # [T, H] with T's stride 1
    with pytest.raises(ValueError, match="inter=12 must be a positive multiple of 8"):
        m.dispatch_gemm(x, idx, w, _w1(inter=12), 12)
    with pytest.raises(ValueError, match="pack_swiglu_weights"):
        m.dispatch_gemm(x, idx, w, torch.zeros(2, 72, 64, dtype=torch.bfloat16), 72)  # gate only, unpacked
    with pytest.raises(ValueError, match=r"\[E_loc, inter, hidden\]"):
        m.dispatch_gemm(x, idx, w, _w1(), 72, swiglu=False)
    with pytest.raises(TypeError, match="w1 is float16"):
        m.dispatch_gemm(x, idx, w, _w1(dtype=torch.float16), 72)
    with pytest.raises(ValueError, match="w1 must be contiguous"):
        m.dispatch_gemm(x, idx, w, _w1().transpose(1, 2).contiguous().transpose(1, 2), 72)
    with pytest.raises(ValueError, match="act is"):
        m.dispatch_gemm(x, idx, w, _w1(), 72, act=torch.zeros(255, 72, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="act is"):
        m.dispatch_gemm(x, idx, w, _w1(), 72, act=torch.zeros(256, 72, dtype=torch.float16))
    with pytest.raises(TypeError, match="w1 must be a torch.Tensor"):
        m.dispatch_gemm(x, idx, w, None, 72)
    with pytest.raises(ValueError, match="hidden=60 must be a multiple of 8"):
        _handle(H=60).dispatch_gemm(*_tokens(H=60), _w1(H=60), 72)
    with pytest.raises(ValueError, match="row_align=64"):
        _handle(row_align=64).dispatch_gemm(x, idx, w, _w1(), 72)


def test_gemm_combine_layout_checks_come_first_then_placement():
    act = torch.zeros(256, 72, dtype=torch.bfloat16)
    w2 = torch.zeros(2, 64, 72, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="no dispatch on this handle yet"):
        _handle().gemm_combine(act, w2)
    m = _handle(last_T=5)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        m.gemm_combine(act, w2)  # y: the handle's recv_x
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        m.gemm_combine(act, w2, y=torch.zeros(256, 64, dtype=torch.bfloat16), out=torch.zeros(5, 64,
                                                                                             dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        m.gemm_combine(act, w2, out=torch.zeros(3, 64, dtype=torch.bfloat16), num_tokens=3)
    with pytest.raises(ValueError, match="w2 must be"):
        m.gemm_combine(act, w2[0])
    with pytest.raises(ValueError, match=r"inter \(w2.shape\[2\]\)=12"):
        m.gemm_combine(act, torch.zeros(2, 64, 12, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"\[E_loc, hidden, inter\]"):
        m.gemm_combine(act, torch.zeros(3, 64, 72, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="w2 is float32"):
        m.gemm_combine(act, w2.float())
    with pytest.raises(ValueError, match="act must be"):
        m.gemm_combine(act[:128], w2)
    with pytest.raises(ValueError, match="act must be contiguous"):
        m.gemm_combine(act.t().contiguous().t(), w2)
    with pytest.raises(ValueError, match="y is"):
        m.gemm_combine(act, w2, y=torch.zeros(256, 63, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="out is"):
        m.gemm_combine(act, w2, out=torch.zeros(4, 64, dtype=torch.bfloat16))  # T = 5
    with pytest.raises(ValueError, match="out is"):
        m.gemm_combine(act, w2, out=torch.zeros(5, 64))


def test_layer_checks_everything_before_its_first_call():
    m = _handle()
    x, idx, w = _tokens()
    w2 = torch.zeros(2, 64, 72, dtype=torch.bfloat16)
    for fused in (False, "first", "second", "both", True):
        with pytest.raises(ValueError, match="must be a CUDA tensor"):  # layouts right: the first call's check
            m.layer(x, idx, w, _w1(), w2, fused=fused)
        with pytest.raises(ValueError, match=r"\[E_loc, hidden, inter\]"):
            m.layer(x, idx, w, _w1(), torch.zeros(2, 72, 64, dtype=torch.bfloat16), fused=fused)
        with pytest.raises(ValueError, match="pack_swiglu_weights"):
            m.layer(x, idx, w, _w1(inter=136), w2, fused=fused)
        with pytest.raises(ValueError, match="act is"):
            m.layer(x, idx, w, _w1(), w2, fused=fused, act=torch.zeros(256, 64, dtype=torch.bfloat16))
        with pytest.raises(ValueError, match="y is"):
            m.layer(x, idx, w, _w1(), w2, fused=fused, y=torch.zeros(255, 64, dtype=torch.bfloat16))
        with pytest.raises(ValueError, match="out is"):
            m.layer(x, idx, w, _w1(), w2, fused=fused, out=torch.zeros(6, 64, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="row_align=64"):
        _handle(row_align=64).layer(x, idx, w, _w1(), w2, fused="second")
    with pytest.raises(ValueError, match="fused='fast'; expected False"):
        m.layer(x, idx, w, _w1(), w2, fused="fast")


def test_fused_calls_are_declared():
    assert len(_library.PROTOTYPES["mkcclMoeDispatchGemm"][0]) == 10
    assert len(_library.PROTOTYPES["mkcclMoeGemmCombine"][0]) == 8
    lib = _library.load()
    for name in ("mkcclMoeDispatchGemm", "mkcclMoeGemmCombine"):
        assert lib.has(name), "%s lacks %s" % (lib.path, name)


def test_moe_cta_tuning_keys():
    """moe.dispatch_ctas and moe.combine_ctas (the fused calls' CTA splits): the library takes 0..1024
    and names the key of a bad value (MKCCL_TUNING's rules; no GPU needed)."""
    for key in ("moe.dispatch_ctas", "moe.combine_ctas"):
        for v in (0, 4, 1024):
            mkccl.set_tuning("%s=%d" % (key, v))
        for v in ("-1", "1025", "many"):
            with pytest.raises(mkccl.MkcclError) as e:
                mkccl.set_tuning("%s=%s" % (key, v))
            assert e.value.result == mkccl.Result.INVALID_USAGE and key in e.value.message, e.value
    mkccl.set_tuning("moe.dispatch_ctas=2;moe.combine_ctas=3")
    mkccl.set_tuning(None)
