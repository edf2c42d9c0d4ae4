"""Argument checks on torch tensors, with messages that name the op, the argument and the fix.

Two kinds: layout checks (dtype, shape, contiguity) that also hold for fake and meta tensors, so
the fake implementations under torch.compile run them too; and placement checks (device, address
alignment) on real tensors just before the C call. The library checks again, in its own terms.
"""
import torch

from ._types import dtype_names


def _desc(t):
    return "%s tensor of shape %s" % (str(t.dtype).replace("torch.", ""), tuple(t.shape))


def tensor(op, name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: %s must be a torch.Tensor, got %s" % (op, name, type(t).__name__))


def dtype(op, name, t, allowed):
    if t.dtype not in allowed:
        raise TypeError("%s: %s is %s; supported: %s" % (op, name, _desc(t), dtype_names(allowed)))


def same_dtype(op, names, tensors):
    if len({t.dtype for t in tensors}) > 1:
        raise TypeError("%s: %s must have one dtype, got %s" % (
            op, " and ".join(names), ", ".join(str(t.dtype).replace("torch.", "") for t in tensors)))


def contiguous(op, name, t):
    if not t.is_contiguous():
        raise ValueError("%s: %s must be contiguous (row-major, dense): shape %s has strides %s; pass "
                         "%s.contiguous()" % (op, name, tuple(t.shape), tuple(t.stride()), name))


def min_dim(op, name, t, n, what):
    if t.dim() < n:
        raise ValueError("%s: %s must have at least %d dimension%s (%s), got %s" % (
            op, name, n, "" if n == 1 else "s", what, _desc(t)))


def divisible(op, what, value, by, why):
    if value % by != 0:
        raise ValueError("%s: %s=%d must be divisible by %d (%s)" % (op, what, value, by, why))


def row_pitch(op, name, elems, esize):
    """TMA's rule for the GEMM operands: a row is a multiple of 16 bytes."""
    if (elems * esize) % 16 != 0:
        raise ValueError("%s: a row of %s is %d elements (%d bytes): it must be a multiple of 16 bytes "
                         "(pad the dimension to a multiple of %d)" % (op, name, elems, elems * esize, 16 // esize))


def positive(op, what, value):
    if value < 1:
        raise ValueError("%s: %s=%d must be >= 1" % (op, what, value))


def out_matches(op, name, t, shape, dt):
    """A caller's output: its dtype and element count as the op needs (any shape of that size)."""
    tensor(op, name, t)
    numel = 1
    for s in shape:
        numel *= s
    if t.dtype is not dt or t.numel() != numel:
        raise ValueError("%s: %s is %s; expected %s with %d elements (shape %s)" % (
            op, name, _desc(t), str(dt).replace("torch.", ""), numel, tuple(shape)))
    contiguous(op, name, t)


def on_device(op, name, t, device):
    """t is a CUDA tensor on `device` (a torch.device with an index)."""
    if t.device.type != "cuda":
        raise ValueError("%s: %s must be a CUDA tensor, got one on %s" % (op, name, t.device))
    if device is not None and t.device != device:
        raise ValueError("%s: %s is on %s but the communicator is on %s" % (op, name, t.device, device))


def aligned(op, name, t, align):
    if t.numel() and t.data_ptr() % align != 0:
        raise ValueError("%s: %s's address 0x%x is not %d-byte aligned (a view at an odd offset?); pass a "
                         "fresh tensor or %s.clone()" % (op, name, t.data_ptr(), align, name))
