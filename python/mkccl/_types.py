"""torch dtypes <-> mkcclDataType_t, and reduction operators <-> mkcclRedOp_t."""
import enum

import torch


class DataType(enum.IntEnum):
    """mkcclDataType_t (include/mkccl.h)."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11


class ReduceOp(enum.IntEnum):
    """mkcclRedOp_t (include/mkccl.h)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


# torch dtypes by name: the newer ones (uint32, uint64 from torch 2.3, float8 from 2.1) only where
# this torch has them.
_BY_NAME = {
    "int8": DataType.INT8,
    "uint8": DataType.UINT8,
    "int32": DataType.INT32,
    "uint32": DataType.UINT32,
    "int64": DataType.INT64,
    "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16,
    "float32": DataType.FLOAT32,
    "float64": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16,
    "float8_e4m3fn": DataType.FLOAT8_E4M3,
    "float8_e5m2": DataType.FLOAT8_E5M2,
}
TORCH_TO_MKCCL = {getattr(torch, n): t for n, t in _BY_NAME.items() if hasattr(torch, n)}
MKCCL_TO_TORCH = {t: d for d, t in TORCH_TO_MKCCL.items()}
_TORCH_TO_INT = {d: int(t) for d, t in TORCH_TO_MKCCL.items()}

# What each family of ops accepts.
COPY_DTYPES = frozenset(TORCH_TO_MKCCL)  # AllGather, AllToAll(v): any mapped type
FP8_DTYPES = frozenset(d for d, t in TORCH_TO_MKCCL.items() if t in (DataType.FLOAT8_E4M3, DataType.FLOAT8_E5M2))
REDUCE_DTYPES = COPY_DTYPES - FP8_DTYPES  # ReduceScatter, AllReduce: no fp8
GEMM_IN_DTYPES = frozenset((torch.bfloat16, torch.float16))
GEMM_OUT_DTYPES = frozenset((torch.bfloat16, torch.float16, torch.float32))


def mkccl_dtype(dtype):
    """The mkcclDataType_t value of a torch dtype; TypeError naming the supported ones if none."""
    t = _TORCH_TO_INT.get(dtype)
    if t is None:
        raise TypeError("libmkccl has no type for %s (supported: %s)" % (dtype, dtype_names(COPY_DTYPES)))
    return t


def dtype_names(dtypes):
    return ", ".join(sorted(str(d).replace("torch.", "") for d in dtypes))


_OP_NAMES = {"sum": ReduceOp.SUM, "prod": ReduceOp.PROD, "product": ReduceOp.PROD, "max": ReduceOp.MAX,
             "min": ReduceOp.MIN, "avg": ReduceOp.AVG, "mean": ReduceOp.AVG}


def reduce_op(op):
    """ReduceOp from a ReduceOp, an int, a name ('sum', 'max', ...) or torch.distributed.ReduceOp."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        r = _OP_NAMES.get(op.lower())
        if r is None:
            raise ValueError("unknown reduction %r (use one of: %s)" % (op, ", ".join(sorted(_OP_NAMES))))
        return r
    if isinstance(op, int):
        try:
            return ReduceOp(op)
        except ValueError:
            raise ValueError("reduction %d is not a mkcclRedOp_t (0..%d)" % (op, len(ReduceOp) - 1)) from None
    # torch.distributed.ReduceOp (or its RedOpType): matched by equality with its members.
    r = None
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available():
        for name in ("SUM", "PRODUCT", "MAX", "MIN", "AVG"):
            member = getattr(dist.ReduceOp, name, None)
            try:
                if member is not None and op == member:
                    r = _OP_NAMES[name.lower()]
                    break
            except (TypeError, ValueError, RuntimeError):
                pass
    if r is None:
        raise ValueError("reduction %r has no libmkccl equivalent (sum, prod, max, min, avg)" % (op,))
    return r
