"""The machinery every op shares: its arguments, its schema, and the call path.

An op (ops.py) is one Op: its name, the C function, its arguments, `outputs` (checks the inputs'
layout and returns the outputs' shapes and dtypes; runs on real, fake and meta tensors) and
`launch` (the C call). From that one entry the package makes the Python function
mkccl.ops.<name>, the Communicator method, the torch.library custom ops mkccl::<name> (functional)
and mkccl::<name>_out (writes into given outputs), and their fake implementations.
"""
import inspect

import torch

from . import _checks
from ._errors import raise_for
from ._library import load

_NO_DEFAULT = inspect.Parameter.empty


def _current_stream(device):
    """The cudaStream_t of the device's current stream (under graph capture: the capturing one)."""
    return torch.cuda.current_stream(device).cuda_stream


class Arg:
    """One argument. kind is its torch schema type: Tensor, int, bool, int[], ScalarType?.
    convert turns what a Python caller passes (a name, an enum) into the schema's type."""

    def __init__(self, name, kind="Tensor", default=_NO_DEFAULT, convert=None):
        self.name, self.kind, self.default, self.convert = name, kind, default, convert

    @property
    def is_tensor(self):
        return self.kind == "Tensor"

    def schema(self):
        s = "%s %s" % (self.kind, self.name)
        if self.default is not _NO_DEFAULT:
            s += "=" + ("None" if self.default is None else str(self.default))
        return s


class Op:
    """One libmkccl call on torch tensors.

    name      Python and custom-op name (mkccl.ops.<name>, Communicator.<name>, torch.ops.mkccl.<name>)
    c_name    the C entry point (include/mkccl.h)
    args      [Arg]: tensors first, then options; a communicator op also takes `comm` after them
    outputs   outputs(comm, *args) -> [(shape, dtype)]: checks dtypes, shapes and contiguity
              (no device or data access: also runs on fake tensors); comm is None for local ops
    launch    launch(c_fn, comm, stream, *args, *outs) -> mkcclResult_t
    out_names names of the outputs (the out= tensors of mkccl::<name>_out)
    comm      False for ops without a communicator (mkcclGemm)
    align     byte alignment every tensor's address needs (16 for TMA operands)
    """

    def __init__(self, name, c_name, args, outputs, launch, out_names=("out",), comm=True, align=1, doc=""):
        self.name, self.c_name, self.args = name, c_name, list(args)
        self.outputs, self.launch, self.out_names = outputs, launch, tuple(out_names)
        self.comm, self.align, self.doc = comm, align, doc
        self.tensor_args = [a for a in self.args if a.is_tensor]
        self._tensor_pos = [i for i, a in enumerate(self.args) if a.is_tensor]
        self._fn = None  # the C function, looked up on first use
        self.option_args = [a for a in self.args if not a.is_tensor]
        self.qualname = "mkccl." + name

    # ---- schemas (torch.library): tensors, then `int comm`, then options -----------------------
    def schema_args(self):
        parts = [a.schema() for a in self.tensor_args]
        if self.comm:
            parts.append("int comm")
        parts += [a.schema() for a in self.option_args]
        return parts

    def schema(self):
        ret = "Tensor" if len(self.out_names) == 1 else "(%s)" % ", ".join("Tensor" for _ in self.out_names)
        return "%s(%s) -> %s" % (self.name, ", ".join(self.schema_args()), ret)

    def out_schema(self):
        outs = ["Tensor(%s!) %s" % (chr(ord("a") + i), n) for i, n in enumerate(self.out_names)]
        return "%s_out(%s) -> ()" % (self.name, ", ".join(self.schema_args() + ["*"] + outs))

    # ---- Python binding ---------------------------------------------------------------------
    def signature(self, with_comm):
        """The Python signature: tensors, [comm], options, then keyword-only out=."""
        P = inspect.Parameter
        ps = [P(a.name, P.POSITIONAL_OR_KEYWORD) for a in self.tensor_args]
        if with_comm:
            ps.append(P("comm", P.POSITIONAL_OR_KEYWORD))
        ps += [P(a.name, P.POSITIONAL_OR_KEYWORD, default=a.default) for a in self.option_args]
        ps.append(P("out", P.KEYWORD_ONLY, default=None))
        return inspect.Signature(ps)

    def convert(self, values):
        """Python values (args order) -> schema values (names and enums made ints, ...)."""
        out = []
        for a, v in zip(self.args, values):
            if a.is_tensor:
                _checks.tensor(self.qualname, a.name, v)
            elif a.convert is not None and v is not None:
                try:
                    v = a.convert(v)
                except (TypeError, ValueError) as e:
                    raise type(e)("%s: %s: %s" % (self.qualname, a.name, e)) from None
            out.append(v)
        return out

    def schema_order(self, values, handle):
        """Values in args order -> the custom op's positional arguments."""
        tensors = [v for a, v in zip(self.args, values) if a.is_tensor]
        options = [v for a, v in zip(self.args, values) if not a.is_tensor]
        return tensors + ([handle] if self.comm else []) + options

    def from_schema_order(self, pos):
        """The custom op's positional arguments -> (handle, values in args order)."""
        nt = len(self.tensor_args)
        tensors, rest = list(pos[:nt]), list(pos[nt:])
        handle = rest.pop(0) if self.comm else None
        options = rest + [a.default for a in self.option_args[len(rest):]]
        ti, oi, values = iter(tensors), iter(options), []
        for a in self.args:
            values.append(next(ti) if a.is_tensor else next(oi))
        return handle, values

    # ---- the eager call -----------------------------------------------------------------------
    def run(self, comm, values, outs=None):
        """Checks, allocates the outputs if not given, and makes the C call on the current stream.
        values are schema values in args order; comm a Communicator (None for local ops).
        (A small collective's cost is mostly this function's: keep it lean.)"""
        op = self.qualname
        specs = self.outputs(comm, *values)
        if outs is not None:
            if len(outs) != len(specs):
                raise ValueError("%s: expected %d output tensors (%s), got %d" % (
                    op, len(specs), ", ".join(self.out_names), len(outs)))
            for name, t, (shape, dt) in zip(self.out_names, outs, specs):
                _checks.out_matches(op, name, t, shape, dt)
        device = comm.device if comm is not None else values[self._tensor_pos[0]].device
        for i in self._tensor_pos:
            _checks.on_device(op, self.args[i].name, values[i], device)
        if outs is not None:
            for name, t in zip(self.out_names, outs):
                _checks.on_device(op, name, t, device)
        if self.align > 1:
            for i in self._tensor_pos:
                _checks.aligned(op, self.args[i].name, values[i], self.align)
            for name, t in zip(self.out_names, outs or ()):
                _checks.aligned(op, name, t, self.align)
        if outs is None:
            outs = [torch.empty(shape, dtype=dt, device=device) for shape, dt in specs]
        fn = self._fn
        if fn is None:
            fn = self._fn = load().function(self.c_name)
        stream = _current_stream(device)
        if comm is None and torch.cuda.current_device() != device.index:
            with torch.cuda.device(device):  # a local op runs on the calling thread's device
                res = self.launch(fn, None, stream, *values, *outs)
        else:
            res = self.launch(fn, comm, stream, *values, *outs)
        if res != 0:
            raise_for(load(), res, self.c_name, comm.ptr if comm is not None else None)
        return outs
