"""Finds and loads libmkccl.so, and declares the C functions the package calls (ctypes).

Search order (the first that exists is loaded; the error lists every place tried):
  1. $MKCCL_SO_PATH: the library file, or a folder that holds it. When set, nothing else is tried.
  2. The path written by CMake's install beside the package (_install_paths.py), then the library
     next to the package: <pkg>/, and <pkg>/../.. (the package installed under <libdir>/python).
  3. The build tree, when the package runs from the source tree: <repo>/build*/ (newest first).
  4. The dynamic loader's search path (LD_LIBRARY_PATH, ldconfig): libmkccl.so.0, libmkccl.so.
"""
import ctypes
import glob
import os
import threading
from ctypes import POINTER, c_char, c_char_p, c_int, c_longlong, c_size_t, c_uint, c_void_p

SONAME = "libmkccl.so.0"
_NAMES = (SONAME, "libmkccl.so")
UNIQUE_ID_BYTES = 128


class UniqueId(ctypes.Structure):
    """mkcclUniqueId: 128 opaque bytes, passed by value."""

    _fields_ = [("internal", c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    """mkcclConfig_v2 (include/mkccl.h). Fields left at UNDEF take the library's default; tuning is
    the tuner's override string for the communicator (None: the process's, MKCCL_TUNING)."""

    UNDEF = -2147483647 - 1
    MAGIC = 0x6D6B636C
    VERSION = 2
    _fields_ = [
        ("size", c_size_t),
        ("magic", c_uint),
        ("version", c_uint),
        ("blocking", c_int),
        ("timeoutMs", c_int),
        ("commCtas", c_int),
        ("maxCtas", c_int),
        ("workspaceBytes", c_longlong),
        ("tuning", c_char_p),
    ]

    @classmethod
    def make(cls, blocking=None, timeout_ms=None, comm_ctas=None, max_ctas=None, workspace_bytes=None, tuning=None):
        u = cls.UNDEF

        def pick(v):
            return u if v is None else int(v)

        # The library parses the string at init; the bytes live as long as this struct.
        t = None if tuning is None else str(tuning).encode()
        return cls(ctypes.sizeof(cls), cls.MAGIC, cls.VERSION, pick(None if blocking is None else bool(blocking)),
                   pick(timeout_ms), pick(comm_ctas), pick(max_ctas), pick(workspace_bytes), t)


class FusedWeight(ctypes.Structure):
    """mkcclFusedWeight_t."""

    _fields_ = [("W", c_void_p), ("C", c_void_p), ("bias", c_void_p), ("N", c_size_t), ("ldw", c_size_t),
                ("ldc", c_size_t)]


class FusedGemmArgs(ctypes.Structure):
    """mkcclFusedGemmArgs_v1. make() fills it as MKCCL_FUSED_GEMM_ARGS_INITIALIZER does."""

    MAGIC = 0x6D6B6667
    VERSION = 1
    MAX_WEIGHTS = 8
    NUM_TYPES = 12  # mkcclNumTypes: "the input type"

    _fields_ = [
        ("size", c_size_t),
        ("magic", c_uint),
        ("version", c_uint),
        ("A", c_void_p),
        ("M", c_size_t),
        ("K", c_size_t),
        ("lda", c_size_t),
        ("inType", c_int),
        ("outType", c_int),
        ("biasType", c_int),
        ("gatheredA", c_void_p),
        ("numWeights", c_int),
        ("weights", FusedWeight * 8),
    ]

    @classmethod
    def make(cls):
        a = cls()
        a.size = ctypes.sizeof(cls)
        a.magic = cls.MAGIC
        a.version = cls.VERSION
        a.inType = 9  # mkcclBfloat16
        a.outType = cls.NUM_TYPES
        a.biasType = cls.NUM_TYPES
        a.numWeights = 1
        return a


_comm = c_void_p   # mkcclComm_t
_stream = c_void_p  # cudaStream_t
_ptr = c_void_p
_size = c_size_t
_dtype = c_int
_redop = c_int
_sizes = POINTER(c_size_t)

# Every C function the package calls: name -> (argument types); all return mkcclResult_t (int)
# except where the table says a restype. A function the loaded library lacks is left out
# (Library.has() is False and calling it raises), so the package works with older and newer
# builds. A new C entry point is one line here.
PROTOTYPES = {
    "mkcclGetVersion": ([POINTER(c_int)],),
    "mkcclGetErrorString": ([c_int], c_char_p),
    "mkcclGetLastError": ([_comm], c_char_p),
    "mkcclGetUniqueId": ([POINTER(UniqueId)],),
    "mkcclCommInitRank": ([POINTER(_comm), c_int, UniqueId, c_int],),
    "mkcclCommInitRankConfig": ([POINTER(_comm), c_int, UniqueId, c_int, POINTER(Config)],),
    "mkcclCommInitAll": ([POINTER(_comm), c_int, POINTER(c_int)],),
    "mkcclCommDestroy": ([_comm],),
    "mkcclCommAbort": ([_comm],),
    "mkcclCommGetAsyncError": ([_comm, POINTER(c_int)],),
    "mkcclCommCount": ([_comm, POINTER(c_int)],),
    "mkcclCommUserRank": ([_comm, POINTER(c_int)],),
    "mkcclCommCuDevice": ([_comm, POINTER(c_int)],),
    "mkcclAllGather": ([_ptr, _ptr, _size, _dtype, _comm, _stream],),
    "mkcclReduceScatter": ([_ptr, _ptr, _size, _dtype, _redop, _comm, _stream],),
    "mkcclAllReduce": ([_ptr, _ptr, _size, _dtype, _redop, _comm, _stream],),
    "mkcclAllToAll": ([_ptr, _ptr, _size, _dtype, _comm, _stream],),
    "mkcclAllToAllv": ([_ptr, _sizes, _sizes, _ptr, _sizes, _sizes, _dtype, _comm, _stream],),
    "mkcclSetTuning": ([_comm, c_char_p],),
    "mkcclGemm": ([_ptr, _ptr, _ptr, _size, _size, _size, _dtype, _dtype, _stream],),
    "mkcclGroupedGemm": ([_ptr, _ptr, _ptr, _ptr, c_int, _size, _size, _size, _dtype, _dtype, _stream],),
    "mkcclAttention": ([_ptr, _ptr, _ptr, _ptr, _ptr, _size, _size, _size, c_int, c_int, c_int, ctypes.c_float,
                        c_int, _dtype, _stream],),
    "mkcclRingAttention": ([_ptr, _ptr, _ptr, _ptr, _ptr, _size, _size, c_int, c_int, c_int, ctypes.c_float, c_int,
                            c_int, _dtype, _comm, _stream],),
    "mkcclAllGatherGemm": ([_ptr, _ptr, _ptr, _ptr, _size, _size, _size, _dtype, _comm, _stream],),
    "mkcclGemmReduceScatter": ([_ptr, _ptr, _ptr, _size, _size, _size, _dtype, _comm, _stream],),
    "mkcclGemmAllReduce": ([_ptr, _ptr, _ptr, _size, _size, _size, _dtype, _comm, _stream],),
    "mkcclAllGatherGemmEx": ([POINTER(FusedGemmArgs), _comm, _stream],),
    "mkcclGemmReduceScatterEx": ([POINTER(FusedGemmArgs), _comm, _stream],),
    "mkcclGemmAllReduceEx": ([POINTER(FusedGemmArgs), _comm, _stream],),
    "mkcclGroupedGemmSwiglu": ([_ptr, _ptr, _ptr, _ptr, c_int, _size, _size, _size, _dtype, _dtype, _stream],),
    "mkcclGroupedGemmSwigluEx": ([_ptr, _ptr, c_int, _ptr, _ptr, c_int, _size, _size, _size, _dtype, _dtype,
                                  _stream],),
    "mkcclMoeCreate": ([POINTER(_ptr), _comm, _ptr],),
    "mkcclMoeDestroy": ([_ptr],),
    "mkcclMoeGetBuffers": ([_ptr, _ptr],),
    "mkcclMoeDispatch": ([_ptr, _ptr, _ptr, _ptr, _size, _stream],),
    "mkcclMoeCombine": ([_ptr, _ptr, _ptr, _size, _stream],),
    "mkcclMoeDispatchGemm": ([_ptr, _ptr, _ptr, _ptr, _size, _ptr, _ptr, _size, c_int, _stream],),
    "mkcclMoeGemmCombine": ([_ptr, _ptr, _ptr, _ptr, _ptr, _size, _size, _stream],),
}


class LibraryNotFound(ImportError):
    """libmkccl.so could not be loaded from any place searched (the message lists them)."""


class Library:
    """The loaded libmkccl: its path, version, and its C functions as attributes."""

    def __init__(self, path):
        self.path = path
        self._dll = ctypes.CDLL(path)
        self.missing = []
        for name, proto in PROTOTYPES.items():
            try:
                fn = getattr(self._dll, name)
            except AttributeError:
                self.missing.append(name)
                continue
            fn.argtypes = proto[0]
            fn.restype = proto[1] if len(proto) > 1 else c_int
            setattr(self, name, fn)
        v = c_int(0)
        if not self.has("mkcclGetVersion") or self.mkcclGetVersion(ctypes.byref(v)) != 0:
            raise LibraryNotFound("%s does not look like libmkccl (mkcclGetVersion failed)" % path)
        self.version_code = v.value
        self.version = (v.value // 10000, v.value // 100 % 100, v.value % 100)

    def has(self, name):
        return name in self.__dict__

    def function(self, name):
        """The C function `name`; NotImplementedError naming the library if it lacks it."""
        fn = self.__dict__.get(name)
        if fn is None:
            raise NotImplementedError("%s has no %s (the library is older than this package, or the call is not "
                                 "built yet)" % (self.path, name))
        return fn


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def candidates():
    """(path, why) for each place searched, in order; paths may not exist."""
    env = os.environ.get("MKCCL_SO_PATH")
    if env:
        env = os.path.abspath(env)
        if os.path.isdir(env):
            return [(os.path.join(env, n), "MKCCL_SO_PATH") for n in _NAMES]
        return [(env, "MKCCL_SO_PATH")]
    out = []
    pkg = _package_dir()
    try:
        from . import _install_paths  # written by CMake's install

        out.append((_install_paths.LIBRARY, "CMake install"))
    except ImportError:
        pass
    for d in (pkg, os.path.normpath(os.path.join(pkg, "..", ".."))):
        out += [(os.path.join(d, n), "next to the package") for n in _NAMES]
    repo = os.path.normpath(os.path.join(pkg, "..", ".."))
    if os.path.isfile(os.path.join(repo, "include", "mkccl.h")):
        trees = glob.glob(os.path.join(repo, "build*", SONAME))
        trees.sort(key=lambda p: (os.path.basename(os.path.dirname(p)) != "build", -os.path.getmtime(p)))
        out += [(p, "build tree") for p in trees]
    out += [(n, "loader search path") for n in _NAMES]
    return out


_lock = threading.Lock()
_lib = None


def load():
    """The loaded library (loaded once per process). Raises LibraryNotFound, listing what it tried."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path, why in candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append("%s (%s): no such file" % (path, why))
                continue
            try:
                _lib = Library(path)
                return _lib
            except OSError as e:
                tried.append("%s (%s): %s" % (path, why, e))
                if why == "MKCCL_SO_PATH":
                    break
        raise LibraryNotFound("libmkccl could not be loaded; set MKCCL_SO_PATH to the library (e.g. build/%s). "
                              "Tried:\n  %s" % (SONAME, "\n  ".join(tried)))


def library_path():
    return load().path
