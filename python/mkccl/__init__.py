"""libmkccl for PyTorch: communicators and every collective and fused op on torch tensors.

    import mkccl
    comm = mkccl.Communicator.from_group()        # over torch.distributed's world group
    y = comm.all_gather_gemm(x, w)                # = F.linear(all_gather(x), w), fused
    z = comm.gemm_reduce_scatter(h, w2)           # = reduce_scatter(F.linear(h, w2)), fused
    comm.close()

Pure Python (ctypes) over libmkccl.so: found by MKCCL_SO_PATH, next to the package, in the build
tree, or on the loader's path (_library.py). Importing the package does not load the library;
the first call does (mkccl.library_path() forces it). docs/PYTHON.md is the guide.
"""
from ._errors import MkcclError, Result
from ._library import LibraryNotFound, load as load_library
from ._types import DataType, ReduceOp, TORCH_TO_MKCCL, mkccl_dtype
from . import ops
from . import moe
from . import fused
from .communicator import Communicator, broadcast_unique_id, get_unique_id, init_all, lookup, set_tuning
from . import _api, _torch_ops

__version__ = "0.1.0"

_api.install()
CUSTOM_OPS = _torch_ops.register()  # "fake", "abstract", "meta", or None (then _torch_ops.REASON)


def library_path():
    """The path of the libmkccl.so in use (loads it; LibraryNotFound lists what was tried)."""
    return load_library().path


def library_version():
    """(major, minor, patch) of the loaded libmkccl."""
    return load_library().version


def available(op_name):
    """True if the loaded libmkccl has the C call behind mkccl.ops.<op_name>."""
    op = ops.OPS.get(op_name)
    return op is not None and load_library().has(op.c_name)


__all__ = ["Communicator", "MkcclError", "Result", "ReduceOp", "DataType", "LibraryNotFound", "ops", "init_all",
           "get_unique_id", "broadcast_unique_id", "lookup", "set_tuning", "library_path", "library_version",
           "available",
           "mkccl_dtype", "TORCH_TO_MKCCL", "CUSTOM_OPS", "moe"]
