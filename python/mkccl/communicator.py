"""Communicators: made from a torch.distributed group or a unique id; closed, aborted, queried.

A communicator is not a tensor, so the custom ops (torch.ops.mkccl.*) take an int: `comm.handle`,
the key of this process's registry of live communicators (`lookup(handle)`).
"""
import ctypes
import itertools
import threading

import torch

from ._errors import MkcclError, Result, raise_for
from ._library import UNIQUE_ID_BYTES, Config, UniqueId, load

_registry = {}
_registry_lock = threading.Lock()
_next_handle = itertools.count(1)


def lookup(handle):
    """The live Communicator registered under `handle` (an int, comm.handle)."""
    comm = _registry.get(handle)
    if comm is None:
        raise ValueError("mkccl: no open communicator has handle %r (closed, or made in another process)" % (handle,))
    return comm


def resolve(comm):
    """A Communicator from a Communicator or its handle."""
    if isinstance(comm, Communicator):
        if comm.ptr is None:
            raise ValueError("mkccl: the communicator is closed")
        return comm
    if isinstance(comm, int):
        return lookup(comm)
    raise TypeError("mkccl: expected a Communicator or its handle (int), got %s" % type(comm).__name__)


def set_tuning(tuning=None):
    """The process's tuner overrides ("op.key=value;..."; None or "": none), used by mkccl.ops.gemm and
    by communicators created afterwards (MKCCL_TUNING otherwise). A bad key raises MkcclError."""
    lib = load()
    raise_for(lib, lib.mkcclSetTuning(None, None if tuning is None else str(tuning).encode()), "mkcclSetTuning")


def get_unique_id():
    """A new unique id (128 bytes). The calling process hosts the rendezvous: make it on one rank
    and hand it to every rank (from_unique_id), or let from_group broadcast it."""
    lib = load()
    uid = UniqueId()
    raise_for(lib, lib.mkcclGetUniqueId(ctypes.byref(uid)), "mkcclGetUniqueId")
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)  # (the field's value stops at a NUL)


def _as_unique_id(uid):
    if isinstance(uid, torch.Tensor):
        uid = bytes(uid.detach().to("cpu", torch.uint8).reshape(-1).tolist())
    uid = bytes(uid)
    if len(uid) != UNIQUE_ID_BYTES:
        raise ValueError("mkccl: a unique id is %d bytes, got %d" % (UNIQUE_ID_BYTES, len(uid)))
    out = UniqueId()
    ctypes.memmove(ctypes.addressof(out), uid, UNIQUE_ID_BYTES)
    return out


def _device(device):
    """torch.device('cuda', i) from None (the current device), an int, a str or a torch.device."""
    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None
    if isinstance(device, int):
        return torch.device("cuda", device)
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError("mkccl: a communicator lives on a CUDA device, got %s" % device)
    return torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)


def _config(config):
    if config is None or isinstance(config, Config):
        return config
    if isinstance(config, dict):
        return Config.make(**config)
    raise TypeError("mkccl: config must be a dict (blocking, timeout_ms, comm_ctas, max_ctas, workspace_bytes, "
                    "tuning)")


def broadcast_unique_id(group=None, uid=None):
    """Rank 0 of `group` makes a unique id (or passes `uid`); every rank returns it.

    The 128 bytes travel as a uint8 tensor by torch.distributed.broadcast: a CUDA tensor (on the
    current device) when the group's backend is exactly 'nccl', a CPU tensor otherwise (gloo, mpi,
    and mixed backends such as 'cpu:gloo,cuda:nccl')."""
    import torch.distributed as dist

    if group is None:
        group = dist.group.WORLD
    rank = dist.get_rank(group)
    backend = str(dist.get_backend(group)).lower()
    dev = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    if rank == 0:
        data = get_unique_id() if uid is None else bytes(uid)
        t = torch.tensor(list(data), dtype=torch.uint8, device=dev)
    else:
        t = torch.zeros(UNIQUE_ID_BYTES, dtype=torch.uint8, device=dev)
    dist.broadcast(t, src=_global_rank(group, 0), group=group)
    return bytes(t.cpu().tolist())


def _global_rank(group, group_rank):
    import torch.distributed as dist

    if group is None or group is dist.group.WORLD:
        return group_rank
    if hasattr(dist, "get_global_rank"):
        return dist.get_global_rank(group, group_rank)
    return dist.distributed_c10d._get_global_rank(group, group_rank)


class Communicator:
    """One rank of a libmkccl communicator, on one CUDA device.

    Make it with Communicator.from_group(group) (every rank of a torch.distributed group),
    Communicator.from_unique_id(uid, rank, nranks) or init_all(devices) (every rank in this
    process). Close it with close() or a `with` block (abort() after an error). Every op of
    mkccl.ops is a method: comm.all_gather(x), comm.gemm_reduce_scatter(a, w), ...
    Calls on one communicator must be made in the same order on every rank, one at a time.
    """

    def __init__(self, ptr, device):
        """Internal: wraps an initialised mkcclComm_t (use the class methods)."""
        lib = load()
        self.ptr = ptr
        v = ctypes.c_int(0)
        raise_for(lib, lib.mkcclCommCount(ptr, ctypes.byref(v)), "mkcclCommCount", ptr)
        self.size = v.value
        raise_for(lib, lib.mkcclCommUserRank(ptr, ctypes.byref(v)), "mkcclCommUserRank", ptr)
        self.rank = v.value
        raise_for(lib, lib.mkcclCommCuDevice(ptr, ctypes.byref(v)), "mkcclCommCuDevice", ptr)
        self.device = torch.device("cuda", v.value) if device is None else device
        with _registry_lock:
            self.handle = next(_next_handle)
            _registry[self.handle] = self

    # ---- construction --------------------------------------------------------------------------
    @classmethod
    def from_unique_id(cls, unique_id, rank, nranks, device=None, config=None):
        """This process's rank of an nranks communicator, on `device` (default: the current one).
        Collective: every rank calls it with the same id and nranks. config: a dict with any of
        blocking, timeout_ms, comm_ctas, max_ctas, workspace_bytes (mkcclConfig_t)."""
        lib = load()
        uid = _as_unique_id(unique_id)
        dev = _device(device)
        ptr = ctypes.c_void_p()
        cfg = _config(config)
        guard = torch.cuda.device(dev) if dev is not None else _NullContext()
        with guard:
            res = lib.mkcclCommInitRankConfig(ctypes.byref(ptr), int(nranks), uid, int(rank),
                                              ctypes.byref(cfg) if cfg is not None else None)
        if res != Result.IN_PROGRESS:  # a non-blocking init goes on: async_error() says when done
            raise_for(lib, res, "mkcclCommInitRankConfig")
        if res == Result.IN_PROGRESS:
            comm = cls.__new__(cls)
            comm._init_pending(ptr.value, dev, rank, nranks)
            return comm
        return cls(ptr.value, dev)

    @classmethod
    def from_group(cls, group=None, device=None, config=None):
        """A communicator over the ranks of a torch.distributed group (default: the world), rank
        for rank; the unique id is made on the group's rank 0 and broadcast over the group
        (broadcast_unique_id says how). Call torch.cuda.set_device first, or pass device."""
        import torch.distributed as dist

        if group is None:
            group = dist.group.WORLD
        dev = _device(device)
        if dev is not None and str(dist.get_backend(group)).lower() == "nccl":
            with torch.cuda.device(dev):
                uid = broadcast_unique_id(group)
        else:
            uid = broadcast_unique_id(group)
        return cls.from_unique_id(uid, dist.get_rank(group), dist.get_world_size(group), dev, config)

    def _init_pending(self, ptr, device, rank, nranks):
        self.ptr, self.device, self.rank, self.size = ptr, device, int(rank), int(nranks)
        with _registry_lock:
            self.handle = next(_next_handle)
            _registry[self.handle] = self

    def set_tuning(self, tuning=None):
        """This communicator's tuner overrides ("op.key=value;..."; None or "": none), replacing what
        it had. Keys that change what ranks expect of each other must be set alike on every rank."""
        lib = load()
        raise_for(lib, lib.mkcclSetTuning(self._live(), None if tuning is None else str(tuning).encode()),
                  "mkcclSetTuning", self.ptr)

    # ---- state ---------------------------------------------------------------------------------
    def async_error(self):
        """The first error recorded by this communicator's kernels or threads (a Result):
        SUCCESS, IN_PROGRESS while a non-blocking init runs, or the error (TIMEOUT, ...)."""
        lib = load()
        v = ctypes.c_int(0)
        raise_for(lib, lib.mkcclCommGetAsyncError(self._live(), ctypes.byref(v)), "mkcclCommGetAsyncError", self.ptr)
        return Result(v.value)

    def check(self):
        """Raises MkcclError (with the library's message) if the communicator has an async error."""
        r = self.async_error()
        if r not in (Result.SUCCESS, Result.IN_PROGRESS):
            lib = load()
            msg = lib.mkcclGetLastError(self.ptr)
            raise MkcclError(r, msg.decode("utf-8", "replace") if msg else "", "mkcclCommGetAsyncError")

    @property
    def closed(self):
        return self.ptr is None

    def _live(self):
        if self.ptr is None:
            raise ValueError("mkccl: the communicator is closed")
        return self.ptr

    def close(self):
        """Waits for this rank's outstanding work, then frees the communicator (mkcclCommDestroy).
        A communicator with an async error is freed without waiting. Idempotent."""
        self._free("mkcclCommDestroy")

    destroy = close

    def abort(self):
        """Makes every device wait of this communicator give up at once, then frees it
        (mkcclCommAbort): the way out after an error or a hang. Idempotent."""
        self._free("mkcclCommAbort")

    def _free(self, call):
        if self.ptr is None:
            return
        lib = load()
        ptr, self.ptr = self.ptr, None
        with _registry_lock:
            _registry.pop(self.handle, None)
        raise_for(lib, getattr(lib, call)(ptr), call)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()  # peers may never make the calls this rank's outstanding work waits for
        return False

    def __repr__(self):
        state = "closed" if self.ptr is None else "handle=%d" % self.handle
        return "<mkccl.Communicator rank %d of %d on %s, %s>" % (self.rank, self.size, self.device, state)


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def init_all(devices):
    """One communicator per entry of `devices` (ints), all in this process (mkcclCommInitAll):
    rank i on devices[i]. A device listed twice needs MKCCL_SHARE_GPUS=1 (a testing aid; see
    docs/PYTHON.md). Drive each rank from its own thread or stream: a call returns once enqueued,
    and its kernel waits for the other ranks' calls."""
    lib = load()
    devs = [int(d) for d in devices]
    n = len(devs)
    comms = (ctypes.c_void_p * n)()
    arr = (ctypes.c_int * n)(*devs)
    raise_for(lib, lib.mkcclCommInitAll(comms, n, arr), "mkcclCommInitAll")
    return [Communicator(comms[i], torch.device("cuda", devs[i])) for i in range(n)]
