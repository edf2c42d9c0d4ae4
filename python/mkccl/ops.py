"""Every libmkccl op on torch tensors: the table (one Op per C call) and mkccl.ops.<name>.

Each op runs on the current CUDA stream of its tensors' device, checks its arguments in Python
first (clear messages), and allocates its outputs unless out= gives them. Call it as
    mkccl.ops.all_gather(x, comm)         or   comm.all_gather(x)
    torch.ops.mkccl.all_gather(x, comm.handle)      (the custom op: torch.compile traces it)

Adding an op (e.g. a new fused call): declare its C prototype in _library.PROTOTYPES, then one
`_op(Op(...))` entry below with its `outputs` (layout checks and output shapes) and `launch` (the C
call). The Python function, the Communicator method and the custom ops follow from it.
"""
import ctypes

import torch

from . import _checks as chk
from ._op import Arg, Op
from ._types import (COPY_DTYPES, GEMM_IN_DTYPES, GEMM_OUT_DTYPES, REDUCE_DTYPES, ReduceOp, mkccl_dtype, reduce_op)

OPS = {}


def _op(op):
    OPS[op.name] = op
    return op


def _dt(t):
    return mkccl_dtype(t.dtype)


def _rows(t):
    """Rows of t viewed as a matrix [rows, t.shape[-1]]."""
    r = 1
    for s in t.shape[:-1]:
        r *= s
    return r


_NUM_REDUCE_OPS = len(ReduceOp)


def _reduce_op_int(v):
    if type(v) is int and 0 <= v < _NUM_REDUCE_OPS:  # the common case, without the enum
        return v
    return int(reduce_op(v))


def _reduce_arg():
    return Arg("op", "int", 0, convert=_reduce_op_int)


# ---- collectives ------------------------------------------------------------------------------

def _all_gather_outputs(c, x):
    n = "mkccl.all_gather"
    chk.dtype(n, "x", x, COPY_DTYPES)
    chk.contiguous(n, "x", x)
    shape = (c.size * x.shape[0],) + tuple(x.shape[1:]) if x.dim() else (c.size,)
    return [(shape, x.dtype)]


_op(Op("all_gather", "mkcclAllGather", [Arg("x")], _all_gather_outputs,
       lambda f, c, s, x, out: f(x.data_ptr(), out.data_ptr(), x.numel(), _dt(x), c.ptr, s),
       doc="out = concatenation of every rank's x along dim 0 (torch.distributed.all_gather_into_tensor). "
           "In place when x is this rank's block of out."))


def _reduce_scatter_outputs(c, x, op):
    n = "mkccl.reduce_scatter"
    chk.dtype(n, "x", x, REDUCE_DTYPES)
    chk.contiguous(n, "x", x)
    chk.min_dim(n, "x", x, 1, "dim 0 is split among the ranks")
    chk.divisible(n, "x.shape[0]", x.shape[0], c.size, "the number of ranks")
    return [((x.shape[0] // c.size,) + tuple(x.shape[1:]), x.dtype)]


_op(Op("reduce_scatter", "mkcclReduceScatter", [Arg("x"), _reduce_arg()], _reduce_scatter_outputs,
       lambda f, c, s, x, op, out: f(x.data_ptr(), out.data_ptr(), out.numel(), _dt(x), op, c.ptr, s),
       doc="out = this rank's block (dim 0) of the reduction of every rank's x "
           "(torch.distributed.reduce_scatter_tensor)."))


def _all_reduce_outputs(c, x, op):
    n = "mkccl.all_reduce"
    chk.dtype(n, "x", x, REDUCE_DTYPES)
    chk.contiguous(n, "x", x)
    return [(tuple(x.shape), x.dtype)]


_op(Op("all_reduce", "mkcclAllReduce", [Arg("x"), _reduce_arg()], _all_reduce_outputs,
       lambda f, c, s, x, op, out: f(x.data_ptr(), out.data_ptr(), x.numel(), _dt(x), op, c.ptr, s),
       doc="out = reduction of every rank's x. In place with out=x (torch.distributed.all_reduce)."))


def _all_to_all_outputs(c, x):
    n = "mkccl.all_to_all"
    chk.dtype(n, "x", x, COPY_DTYPES)
    chk.contiguous(n, "x", x)
    chk.min_dim(n, "x", x, 1, "dim 0 is split among the ranks")
    chk.divisible(n, "x.shape[0]", x.shape[0], c.size, "the number of ranks")
    return [(tuple(x.shape), x.dtype)]


def _all_to_all_launch(f, c, s, x, out):
    if out.numel() and out.data_ptr() == x.data_ptr():
        raise ValueError("mkccl.all_to_all: out must not be x (the op is not in place)")
    return f(x.data_ptr(), out.data_ptr(), x.numel() // c.size, _dt(x), c.ptr, s)


_op(Op("all_to_all", "mkcclAllToAll", [Arg("x")], _all_to_all_outputs, _all_to_all_launch,
       doc="Block p of x (dim 0 split in equal parts) goes to rank p, which stores it as its block r "
           "(torch.distributed.all_to_all_single with equal splits). Not in place."))


def _splits(v):
    return [int(s) for s in v]


def _all_to_all_v_outputs(c, x, send_splits, recv_splits):
    n = "mkccl.all_to_all_v"
    chk.dtype(n, "x", x, COPY_DTYPES)
    chk.contiguous(n, "x", x)
    chk.min_dim(n, "x", x, 1, "the splits count rows of dim 0")
    for name, sp in (("send_splits", send_splits), ("recv_splits", recv_splits)):
        if len(sp) != c.size:
            raise ValueError("%s: %s has %d entries; expected one per rank (%d)" % (n, name, len(sp), c.size))
        if any(s < 0 for s in sp):
            raise ValueError("%s: %s=%s has a negative entry" % (n, name, list(sp)))
    if sum(send_splits) != x.shape[0]:
        raise ValueError("%s: send_splits=%s add up to %d rows but x has %d (dim 0)" % (
            n, list(send_splits), sum(send_splits), x.shape[0]))
    return [((sum(recv_splits),) + tuple(x.shape[1:]), x.dtype)]


def _counts_displs(splits, row):
    n = len(splits)
    counts = (ctypes.c_size_t * n)(*[s * row for s in splits])
    displs, at = (ctypes.c_size_t * n)(), 0
    for i, s in enumerate(splits):
        displs[i] = at
        at += s * row
    return counts, displs


def _all_to_all_v_launch(f, c, s, x, send_splits, recv_splits, out):
    row = 1
    for d in x.shape[1:]:
        row *= d
    sc, sd = _counts_displs(send_splits, row)
    rc, rd = _counts_displs(recv_splits, row)
    return f(x.data_ptr(), sc, sd, out.data_ptr(), rc, rd, _dt(x), c.ptr, s)


_op(Op("all_to_all_v", "mkcclAllToAllv",
       [Arg("x"), Arg("send_splits", "int[]", convert=_splits), Arg("recv_splits", "int[]", convert=_splits)],
       _all_to_all_v_outputs, _all_to_all_v_launch,
       doc="send_splits[p] rows of x (dim 0, in order) go to rank p; out holds recv_splits[q] rows from "
           "each rank q, in rank order (torch.distributed.all_to_all_single with splits). The splits "
           "must agree across ranks: rank r's send_splits[p] == rank p's recv_splits[r]."))


# ---- GEMM and the fused ops: C = A . W^T, W stored [N, K] (nn.Linear's weight) -------------------

def _grouped_gemm_outputs(c, a, w, row_offsets, out_dtype):
    n = "mkccl.grouped_gemm"
    chk.dtype(n, "a", a, GEMM_IN_DTYPES)
    chk.same_dtype(n, ("a", "w"), (a, w))
    if a.dim() != 2 or w.dim() != 3:
        raise ValueError("%s: a must be [rows, K] (the groups' rows stacked) and w [groups, N, K], got %s and %s"
                         % (n, tuple(a.shape), tuple(w.shape)))
    if row_offsets.dtype != torch.int32 or row_offsets.dim() != 1 or row_offsets.shape[0] != w.shape[0] + 1:
        raise ValueError("%s: row_offsets must be int32 [groups + 1] (rows of group g: [off[g], off[g+1]), multiples "
                         "of 128, on the GPU), got %s %s" % (n, row_offsets.dtype, tuple(row_offsets.shape)))
    chk.contiguous(n, "a", a)
    chk.contiguous(n, "w", w)
    if a.shape[1] != w.shape[2]:
        raise ValueError("%s: a's K (%d) must equal w's (%d)" % (n, a.shape[1], w.shape[2]))
    chk.positive(n, "rows of a", a.shape[0])
    chk.row_pitch(n, "a and w (K)", a.shape[1], a.element_size())
    dt = a.dtype if out_dtype is None else out_dtype
    if dt not in GEMM_OUT_DTYPES:
        raise TypeError("%s: out_dtype=%s; supported: bfloat16, float16, float32" % (n, dt))
    chk.row_pitch(n, "out (N)", w.shape[1], _OUT_ESIZE[dt])
    return [((a.shape[0], w.shape[1]), dt)]


_op(Op("grouped_gemm", "mkcclGroupedGemm",
       [Arg("a"), Arg("w"), Arg("row_offsets"), Arg("out_dtype", "ScalarType?", None)], _grouped_gemm_outputs,
       lambda f, c, s, a, w, row_offsets, out_dtype, out: f(
           a.data_ptr(), w.data_ptr(), out.data_ptr(), row_offsets.data_ptr(), w.shape[0], a.shape[0], w.shape[1],
           w.shape[2], _dt(a), _dt(out), s),
       comm=False, align=4,
       doc="MoE's expert GEMMs: out[rows of group g] = a[rows of group g] . w[g]^T; the groups' rows are stacked "
           "in a and out, row_offsets (int32 [groups + 1] on the GPU, multiples of 128) says where; read on the "
           "device, no host sync."))



def _gemm_operands(n, a, w, k_what="K"):
    """Common checks of A [..., K] and W [N, K]; returns (rows of A, N, K)."""
    chk.dtype(n, "a", a, GEMM_IN_DTYPES)
    chk.dtype(n, "w", w, GEMM_IN_DTYPES)
    chk.same_dtype(n, ("a", "w"), (a, w))
    chk.min_dim(n, "a", a, 1, "[..., %s]" % k_what)
    if w.dim() != 2:
        raise ValueError("%s: w must be 2-D [N, %s] (nn.Linear's weight layout), got shape %s" % (n, k_what, tuple(w.shape)))
    chk.contiguous(n, "a", a)
    chk.contiguous(n, "w", w)
    if a.shape[-1] != w.shape[1]:
        raise ValueError("%s: a's last dimension (%d) must equal w's second (%d): %s is the inner dimension, "
                         "w is [N, %s]" % (n, a.shape[-1], w.shape[1], k_what, k_what))
    M, N, K = _rows(a), w.shape[0], w.shape[1]
    chk.positive(n, "M (rows of a)", M)
    chk.positive(n, "N", N)
    chk.positive(n, "K", K)
    chk.row_pitch(n, "a and w (K)", K, a.element_size())
    return M, N, K


def _gemm_outputs(c, a, w, out_dtype):
    n = "mkccl.gemm"
    M, N, K = _gemm_operands(n, a, w)
    dt = a.dtype if out_dtype is None else out_dtype
    if dt not in GEMM_OUT_DTYPES:
        raise TypeError("%s: out_dtype=%s; supported: bfloat16, float16, float32" % (n, dt))
    chk.row_pitch(n, "out (N)", N, _OUT_ESIZE[dt])
    return [(tuple(a.shape[:-1]) + (N,), dt)]


_OUT_ESIZE = {torch.bfloat16: 2, torch.float16: 2, torch.float32: 4}


_op(Op("gemm", "mkcclGemm", [Arg("a"), Arg("w"), Arg("out_dtype", "ScalarType?", None)], _gemm_outputs,
       lambda f, c, s, a, w, out_dtype, out: f(a.data_ptr(), w.data_ptr(), out.data_ptr(), _rows(a), w.shape[0],
                                              w.shape[1], _dt(a), _dt(out), s),
       comm=False, align=16,
       doc="out[..., N] = a[..., K] . w[N, K]^T on one GPU (F.linear without bias); out_dtype bf16, fp16 or "
           "fp32 (default: a's)."))


def _ag_gemm_check(c, a, w):
    n = "mkccl.all_gather_gemm"
    _gemm_operands(n, a, w)
    chk.min_dim(n, "a", a, 2, "[m, ..., K]: dim 0 is gathered")
    chk.row_pitch(n, "out (N)", w.shape[0], a.element_size())
    return (c.size * a.shape[0],) + tuple(a.shape[1:-1])


def _ag_gemm_outputs(c, a, w):
    lead = _ag_gemm_check(c, a, w)
    return [(lead + (w.shape[0],), a.dtype)]


def _ag_gemm_gathered_outputs(c, a, w):
    lead = _ag_gemm_check(c, a, w)
    return [(lead + (w.shape[0],), a.dtype), (lead + (a.shape[-1],), a.dtype)]


def _ag_gemm_launch(f, c, s, a, w, out, gathered=None):
    return f(a.data_ptr(), w.data_ptr(), out.data_ptr(), gathered.data_ptr() if gathered is not None else None,
             c.size * _rows(a), w.shape[0], w.shape[1], _dt(a), c.ptr, s)


_op(Op("all_gather_gemm", "mkcclAllGatherGemm", [Arg("a"), Arg("w")], _ag_gemm_outputs, _ag_gemm_launch,
       align=16,
       doc="Column-parallel linear with a sequence-parallel input: out[n*m, ..., N] = AllGather(a, dim 0) . w^T, "
           "a [m, ..., K] on every rank, w [N, K] this rank's shard of the weight."))

_op(Op("all_gather_gemm_gathered", "mkcclAllGatherGemm", [Arg("a"), Arg("w")], _ag_gemm_gathered_outputs,
       _ag_gemm_launch, out_names=("out", "gathered"), align=16,
       doc="As all_gather_gemm, and also returns AllGather(a) [n*m, ..., K] (for the backward pass or a "
           "second GEMM on the same input)."))


def _gemm_rs_outputs(c, a, w):
    n = "mkccl.gemm_reduce_scatter"
    _gemm_operands(n, a, w, k_what="K_r")
    chk.min_dim(n, "a", a, 2, "[M, ..., K_r]: dim 0 is scattered")
    chk.divisible(n, "a.shape[0]", a.shape[0], c.size, "the output's dim 0 is split among the ranks")
    chk.row_pitch(n, "out (N)", w.shape[0], a.element_size())
    return [((a.shape[0] // c.size,) + tuple(a.shape[1:-1]) + (w.shape[0],), a.dtype)]


_op(Op("gemm_reduce_scatter", "mkcclGemmReduceScatter", [Arg("a"), Arg("w")], _gemm_rs_outputs,
       lambda f, c, s, a, w, out: f(a.data_ptr(), w.data_ptr(), out.data_ptr(), _rows(a), w.shape[0], w.shape[1],
                                    _dt(a), c.ptr, s),
       align=16,
       doc="Row-parallel linear into a sequence-parallel output: out[M/n, ..., N] = this rank's block (dim 0) "
           "of sum over ranks of a . w^T; a [M, ..., K_r] and w [N, K_r] hold this rank's share of K."))


def _gemm_ar_outputs(c, a, w):
    n = "mkccl.gemm_all_reduce"
    _gemm_operands(n, a, w, k_what="K_r")
    chk.row_pitch(n, "out (N)", w.shape[0], a.element_size())
    return [(tuple(a.shape[:-1]) + (w.shape[0],), a.dtype)]


_op(Op("gemm_all_reduce", "mkcclGemmAllReduce", [Arg("a"), Arg("w")], _gemm_ar_outputs,
       lambda f, c, s, a, w, out: f(a.data_ptr(), w.data_ptr(), out.data_ptr(), _rows(a), w.shape[0], w.shape[1],
                                    _dt(a), c.ptr, s),
       align=16,
       doc="Row-parallel linear: out[..., N] = sum over ranks of a[..., K_r] . w[N, K_r]^T, on every rank."))


# ---- attention: Q, O [B, S, Hq, D], K, V [B, S, Hkv, D]; LSE fp32 [B, Hq, S] ---------------------

def _attn_check(n, q, k, v):
    chk.dtype(n, "q", q, GEMM_IN_DTYPES)
    chk.same_dtype(n, ("q", "k", "v"), (q, k, v))
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError("%s: %s must be 4-D [batch, seq, heads, head_dim], got shape %s" % (n, name, tuple(t.shape)))
        chk.contiguous(n, name, t)
    if k.shape != v.shape:
        raise ValueError("%s: k and v must have the same shape, got %s and %s" % (n, tuple(k.shape), tuple(v.shape)))
    B, _, hq, d = q.shape
    if k.shape[0] != B or k.shape[3] != d:
        raise ValueError("%s: k's batch and head_dim must match q's: q %s, k %s" % (n, tuple(q.shape), tuple(k.shape)))
    if d not in (64, 128):
        raise ValueError("%s: head_dim must be 64 or 128, got %d" % (n, d))
    if k.shape[2] == 0 or hq % k.shape[2]:
        raise ValueError("%s: q's heads (%d) must be a multiple of k's (%d) (GQA)" % (n, hq, k.shape[2]))


def _attention_outputs(c, q, k, v, scale, causal):
    _attn_check("mkccl.attention", q, k, v)
    B, S, hq, _ = q.shape
    return [(tuple(q.shape), q.dtype), ((B, hq, S), torch.float32)]


def _scale(q, scale):
    return float(scale) if scale is not None and scale > 0 else q.shape[3] ** -0.5


_op(Op("attention", "mkcclAttention",
       [Arg("q"), Arg("k"), Arg("v"), Arg("scale", "float?", None), Arg("causal", "bool", False)], _attention_outputs,
       lambda f, c, s, q, k, v, scale, causal, out, lse: f(
           q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), q.shape[0], q.shape[1],
           k.shape[1], q.shape[2], k.shape[2], q.shape[3], _scale(q, scale), int(bool(causal)), _dt(q), s),
       out_names=("out", "lse"), comm=False, align=16,
       doc="Flash attention forward on one GPU: out = softmax(q k^T * scale) v (scale None: 1/sqrt(head_dim)), "
           "causal aligned to the bottom right, GQA; returns (out, lse)."))


def _ring_attention_outputs(c, q, k, v, scale, causal, zigzag):
    n = "mkccl.ring_attention"
    _attn_check(n, q, k, v)
    if q.shape[1] != k.shape[1]:
        raise ValueError("%s: q, k and v hold the same seq_local tokens of this rank, got %d and %d" %
                         (n, q.shape[1], k.shape[1]))
    if zigzag and q.shape[1] % 2:
        raise ValueError("%s: the zigzag layout needs an even seq_local (two chunks per rank), got %d" % (n, q.shape[1]))
    B, S, hq, _ = q.shape
    return [(tuple(q.shape), q.dtype), ((B, hq, S), torch.float32)]


_op(Op("ring_attention", "mkcclRingAttention",
       [Arg("q"), Arg("k"), Arg("v"), Arg("scale", "float?", None), Arg("causal", "bool", False),
        Arg("zigzag", "bool", False)], _ring_attention_outputs,
       lambda f, c, s, q, k, v, scale, causal, zigzag, out, lse: f(
           q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), q.shape[0], q.shape[1],
           q.shape[2], k.shape[2], q.shape[3], _scale(q, scale), int(bool(causal)), int(bool(zigzag)), _dt(q), c.ptr, s),
       out_names=("out", "lse"), align=16,
       doc="Ring Attention over the communicator's ranks (one node): this rank's seq_local tokens of q, k, v "
           "(contiguous layout, or zigzag: chunks r and 2n-1-r); returns (out, lse) of its queries against the "
           "whole sequence."))
