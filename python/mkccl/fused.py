"""The fused ops' full arguments (mkcclFusedGemmArgs_t: include/mkccl.h) on torch tensors.

    outs = mkccl.fused.all_gather_gemm_ex(comm, a, [wq, wk, wv], biases=[bq, bk, bv],
                                          out_dtype=torch.float32)
    out = mkccl.fused.gemm_reduce_scatter_ex(comm, a, w, bias=b, out_dtype=torch.float32)
    out = mkccl.fused.gemm_all_reduce_ex(comm, a, w, bias=b)

Tensors may be strided views along their rows (a[:, :K] of a wider tensor, w rows of a stacked
QKV weight): the row pitch (stride(0)) is passed as lda / ldw / ldc; the last dimension must be
contiguous. Outputs are allocated unless given (`outs=` / `out=`, which may be strided too).
These are plain functions on the current CUDA stream, not torch custom ops (no torch.compile
support yet); the library checks every argument and raises MkcclError with its message.
"""
import ctypes

import torch

from ._errors import raise_for
from ._library import FusedGemmArgs, FusedWeight, load
from ._types import GEMM_IN_DTYPES, GEMM_OUT_DTYPES, mkccl_dtype
from .communicator import resolve

MAX_WEIGHTS = FusedGemmArgs.MAX_WEIGHTS


def _pitch(op, name, t):
    if t.dim() != 2:
        raise ValueError("%s: %s must be 2-D, got shape %s" % (op, name, tuple(t.shape)))
    if t.stride(1) != 1:
        raise ValueError("%s: %s's last dimension must be contiguous (stride %d)" % (op, name, t.stride(1)))
    return t.stride(0) if t.shape[0] > 1 else t.shape[1]


def _run(op, c_name, comm, a, weights, biases, out_dtype, outs, rows_out, gathered=None):
    comm = resolve(comm)
    if a.dtype not in GEMM_IN_DTYPES:
        raise TypeError("%s: a must be bfloat16 or float16, got %s" % (op, a.dtype))
    dt = a.dtype if out_dtype is None else out_dtype
    if dt not in GEMM_OUT_DTYPES:
        raise TypeError("%s: out_dtype must be bfloat16, float16 or float32, got %s" % (op, dt))
    if not 1 <= len(weights) <= MAX_WEIGHTS:
        raise ValueError("%s: 1 to %d weights, got %d" % (op, MAX_WEIGHTS, len(weights)))
    if biases is not None and len(biases) != len(weights):
        raise ValueError("%s: one bias (or None) per weight: %d weights, %d biases" % (op, len(weights), len(biases)))
    bias_dtypes = {b.dtype for b in (biases or []) if b is not None}
    if len(bias_dtypes) > 1:
        raise TypeError("%s: every bias must have the same dtype, got %s" % (op, sorted(map(str, bias_dtypes))))
    if outs is None:
        outs = [torch.empty((rows_out, w.shape[0]), dtype=dt, device=a.device) for w in weights]
    elif len(outs) != len(weights):
        raise ValueError("%s: one output per weight: %d weights, %d outputs" % (op, len(weights), len(outs)))
    args = FusedGemmArgs.make()
    args.A = a.data_ptr()
    args.M = a.shape[0] * (comm.size if gathered is not False else 1)
    args.K = a.shape[1]
    args.lda = _pitch(op, "a", a)
    args.inType = int(mkccl_dtype(a.dtype))
    args.outType = int(mkccl_dtype(dt))
    if bias_dtypes:
        args.biasType = int(mkccl_dtype(bias_dtypes.pop()))
    args.gatheredA = gathered.data_ptr() if isinstance(gathered, torch.Tensor) else None
    args.numWeights = len(weights)
    for i, w in enumerate(weights):
        o = outs[i]
        if w.dtype != a.dtype or o.dtype != dt:
            raise TypeError("%s: weight %d is %s and output %d %s: expected %s and %s" % (op, i, w.dtype, i, o.dtype,
                                                                                      a.dtype, dt))
        if w.shape[1] != a.shape[1] or tuple(o.shape) != (rows_out, w.shape[0]):
            raise ValueError("%s: weight %d %s and output %s do not fit a %s (expected [N, %d] and [%d, N])" % (
                op, i, tuple(w.shape), tuple(o.shape), tuple(a.shape), a.shape[1], rows_out))
        b = biases[i] if biases is not None else None
        if b is not None and (b.dim() != 1 or b.shape[0] != w.shape[0] or b.stride(0) != 1):
            raise ValueError("%s: bias %d must be a contiguous [%d], got %s" % (op, i, w.shape[0], tuple(b.shape)))
        args.weights[i] = FusedWeight(w.data_ptr(), o.data_ptr(), b.data_ptr() if b is not None else None,
                                      w.shape[0], _pitch(op, "w", w), _pitch(op, "out", o))
    lib = load()
    stream = torch.cuda.current_stream(comm.device).cuda_stream
    raise_for(lib, getattr(lib, c_name)(ctypes.byref(args), comm._live(), stream), c_name, comm.ptr)
    return outs


def all_gather_gemm_ex(comm, a, weights, biases=None, out_dtype=None, gathered=None, outs=None):
    """[AllGather(a) . w_i^T + bias_i for each weight], a [m, K] this rank's rows, each w_i [N_i, K];
    A is gathered once. gathered: a [nranks*m, K] tensor that receives AllGather(a), or None."""
    comm_ = resolve(comm)
    return _run("mkccl.fused.all_gather_gemm_ex", "mkcclAllGatherGemmEx", comm, a, list(weights), biases, out_dtype,
                outs, a.shape[0] * comm_.size, gathered if gathered is not None else None)


def gemm_reduce_scatter_ex(comm, a, w, bias=None, out_dtype=None, out=None):
    """This rank's rows (dim 0 split) of sum over ranks of a . w^T (+ bias once), a [M, K_r], w [N, K_r]."""
    comm_ = resolve(comm)
    return _run("mkccl.fused.gemm_reduce_scatter_ex", "mkcclGemmReduceScatterEx", comm, a, [w],
                None if bias is None else [bias], out_dtype, None if out is None else [out],
                a.shape[0] // comm_.size, gathered=False)[0]


def gemm_all_reduce_ex(comm, a, w, bias=None, out_dtype=None, out=None):
    """sum over ranks of a . w^T (+ bias once), on every rank; a [M, K_r], w [N, K_r]."""
    return _run("mkccl.fused.gemm_all_reduce_ex", "mkcclGemmAllReduceEx", comm, a, [w],
                None if bias is None else [bias], out_dtype, None if out is None else [out], a.shape[0],
                gathered=False)[0]
