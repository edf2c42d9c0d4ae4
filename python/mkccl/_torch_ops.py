"""The ops as torch.library custom ops: torch.ops.mkccl.<name> and torch.ops.mkccl.<name>_out.

<name>(tensors..., int comm, options...) -> Tensor (or a tuple) is functional: it allocates its
outputs, so torch.compile traces it and CUDA graphs capture it. <name>_out(..., *, Tensor(a!) out...)
writes into given tensors (keyword-only, as torch's out= arguments). `comm` is Communicator.handle. Each gets a fake implementation (the
op's own shape rules), registered with the newest API this torch has:
  torch >= 2.4  torch.library.register_fake               MODE = "fake"
  torch 2.1-2.3 torch.library.impl_abstract               MODE = "abstract"
  older         a Meta kernel (torch.library.Library.impl) MODE = "meta" (eager, meta tensors;
                torch.compile does not exist there)
If registration fails (an unforeseen torch), the ops still work in eager mode: MODE = None and
REASON says why.
"""
import torch

from . import communicator
from .ops import OPS

MODE = None
REASON = "not registered yet"
_lib = None  # the torch.library.Library must stay alive for its registrations to last


def _ctx(op, handle):
    return communicator.lookup(handle) if op.comm else None


def _kernel(op):
    def kernel(*pos):
        handle, values = op.from_schema_order(pos)
        outs = op.run(_ctx(op, handle), values)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return kernel


def _out_kernel(op):
    names = op.out_names

    def kernel(*pos, **kw):  # the outputs are keyword-only (after a `*` in the schema)
        if kw:
            outs = [kw[n] for n in names]
        else:
            pos, outs = pos[:-len(names)], list(pos[-len(names):])
        handle, values = op.from_schema_order(pos)
        op.run(_ctx(op, handle), values, outs)

    return kernel


def _fake(op):
    def fake(*pos):
        handle, values = op.from_schema_order(pos)
        specs = op.outputs(_ctx(op, handle), *values)
        like = values[0]
        outs = [like.new_empty(shape, dtype=dt) for shape, dt in specs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    return fake


def _fake_out(op):
    def fake(*pos, **kw):
        return None

    return fake


def register():
    """Defines every op of the table (once per process); returns MODE."""
    global MODE, REASON, _lib
    if _lib is not None:
        return MODE
    lib_mod = getattr(torch, "library", None)
    if lib_mod is None or not hasattr(lib_mod, "Library"):
        REASON = "torch %s has no torch.library" % torch.__version__
        return None
    if hasattr(lib_mod, "register_fake"):
        mode = "fake"
    elif hasattr(lib_mod, "impl_abstract"):
        mode = "abstract"
    else:
        mode = "meta"
    try:
        lib = lib_mod.Library("mkccl", "DEF")
        for op in OPS.values():
            for schema, kernel, fake in ((op.schema(), _kernel(op), _fake(op)),
                                         (op.out_schema(), _out_kernel(op), _fake_out(op))):
                name = schema.split("(", 1)[0]
                lib.define(schema)
                # CPU too: a CPU tensor then gets the op's own message ("must be a CUDA tensor").
                lib.impl(name, kernel, "CUDA")
                lib.impl(name, kernel, "CPU")
                if mode == "fake":
                    lib_mod.register_fake("mkccl::" + name, fake, lib=lib)
                elif mode == "abstract":
                    lib_mod.impl_abstract("mkccl::" + name, fake, lib=lib)
                else:
                    lib.impl(name, fake, "Meta")
    except Exception as e:  # an unforeseen torch: the eager path does not need the custom ops
        REASON = "torch %s: %s: %s" % (torch.__version__, type(e).__name__, e)
        return None
    _lib, MODE, REASON = lib, mode, ""
    return MODE


def compiling():
    """True while torch.compile (dynamo) traces the caller."""
    c = getattr(torch, "compiler", None)
    if c is not None and hasattr(c, "is_compiling"):
        return c.is_compiling()
    d = getattr(torch, "_dynamo", None)
    return bool(d is not None and hasattr(d, "is_compiling") and d.is_compiling())
