"""Makes mkccl.ops.<name> and Communicator.<name> from the table (ops.OPS).

mkccl.ops.<name>(tensors..., [comm,] options..., out=None): eager calls go straight to the C call
(Op.run); under torch.compile they go through the custom op torch.ops.mkccl.<name> (or _out), which
dynamo puts in the graph.
"""
import inspect

from . import _torch_ops, ops
from .communicator import Communicator, resolve


def _binder(op, sig):
    params = [p for p in sig.parameters.values() if p.kind != inspect.Parameter.KEYWORD_ONLY]
    names = [p.name for p in params]
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    qual = op.qualname

    def bind(args, kwargs):
        if len(args) > len(names):
            raise TypeError("%s takes %d positional arguments (%s), got %d" % (qual, len(names), ", ".join(names),
                                                                                len(args)))
        vals = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in defaults and k not in names:
                raise TypeError("%s got an unexpected argument %r" % (qual, k))
            if k in vals:
                raise TypeError("%s got two values for %r" % (qual, k))
            vals[k] = v
        for n in names:
            if n not in vals:
                if n not in defaults:
                    raise TypeError("%s is missing its argument %r" % (qual, n))
                vals[n] = defaults[n]
        return vals

    return bind


def _function(op):
    sig = op.signature(with_comm=op.comm)
    bind = _binder(op, sig)
    arg_names = [a.name for a in op.args]
    single = len(op.out_names) == 1

    def f(*args, out=None, **kwargs):
        vals = bind(args, kwargs)
        comm = resolve(vals["comm"]) if op.comm else None
        values = op.convert([vals[n] for n in arg_names])
        outs = None if out is None else ([out] if single else list(out))
        if _torch_ops.MODE in ("fake", "abstract") and _torch_ops.compiling():
            import torch

            pos = op.schema_order(values, comm.handle if comm is not None else None)
            if outs is None:
                return getattr(torch.ops.mkccl, op.name)(*pos)
            getattr(torch.ops.mkccl, op.name + "_out")(*pos, **dict(zip(op.out_names, outs)))
            return out
        res = op.run(comm, values, outs)
        if out is not None:
            return out
        return res[0] if single else tuple(res)

    f.__name__ = op.name
    f.__qualname__ = op.name
    f.__module__ = "mkccl.ops"
    f.__signature__ = sig
    f.__doc__ = "%s\n\nC call: %s. out=: %s (any shape with the right number of elements)." % (
        op.doc, op.c_name, "a tensor" if single else "a tuple (%s)" % ", ".join(op.out_names))
    return f


def _method(op, fn):
    nt = len(op.tensor_args)

    def method(self, *args, **kwargs):
        if len(args) >= nt:
            return fn(*args[:nt], self, *args[nt:], **kwargs)
        return fn(*args, comm=self, **kwargs)

    P = inspect.Parameter
    sig = op.signature(with_comm=False)
    method.__name__ = op.name
    method.__qualname__ = "Communicator." + op.name
    method.__doc__ = fn.__doc__
    method.__signature__ = sig.replace(parameters=[P("self", P.POSITIONAL_OR_KEYWORD)] + list(sig.parameters.values()))
    return method


def install():
    for op in ops.OPS.values():
        fn = _function(op)
        setattr(ops, op.name, fn)
        if op.comm:
            setattr(Communicator, op.name, _method(op, fn))
