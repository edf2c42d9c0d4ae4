"""mkccl.moe without a GPU: the blocked-interleave packing of W1 (what mkcclGroupedGemmSwiglu reads)
and the C prototypes of the MoE calls."""
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
