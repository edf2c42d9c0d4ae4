"""The package without a GPU: it imports, finds and loads libmkccl, maps types as the header does,
raises the library's errors with their code and message, and rejects bad tensors in Python with
clear messages (checked on meta and CPU tensors, against a stand-in communicator)."""
import os
import re
import subprocess
import sys

import pytest
import torch

import mkccl
from mkccl import _library, communicator, ops

from conftest import REPO

HEADER = os.path.join(REPO, "include", "mkccl.h")


def header_enum(prefix):
    """{name: value} of `mkcclXxx = N` entries in include/mkccl.h with this prefix set."""
    text = open(HEADER).read()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\b(mkccl\w+)\s*=\s*(\d+)", text)
            if m.group(1) in prefix}


class StandIn:
    """What the ops read of a communicator (size, rank, device), without a GPU or the library."""

    def __init__(self, size, rank=0):
        self.size, self.rank, self.device, self.ptr = size, rank, torch.device("cuda", 0), None


@pytest.fixture
def comm4():
    h = 10 ** 6 + 4
    communicator._registry[h] = StandIn(4, 1)
    yield h
    communicator._registry.pop(h, None)


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


# ---- the library ---------------------------------------------------------------------------------

def test_library_loads_and_reports_its_version():
    path = mkccl.library_path()
    assert os.path.exists(path)
    if os.environ.get("MKCCL_SO_PATH"):
        assert os.path.samefile(path, os.environ["MKCCL_SO_PATH"])
    text = open(HEADER).read()
    want = tuple(int(re.search(r"#define MKCCL_%s (\d+)" % k, text).group(1)) for k in ("MAJOR", "MINOR", "PATCH"))
    assert mkccl.library_version() == want


def test_every_op_has_its_c_function():
    lib = mkccl.load_library()
    assert not lib.missing, "the library lacks %s" % lib.missing
    for op in ops.OPS.values():
        assert op.c_name in _library.PROTOTYPES
        assert mkccl.available(op.name), op.name


def test_search_order_from_the_source_tree(monkeypatch):
    monkeypatch.delenv("MKCCL_SO_PATH", raising=False)
    found = _library.candidates()
    whys = [w for _, w in found]
    assert whys[-1] == "loader search path"
    assert "next to the package" in whys
    # MKCCL_SO_PATH as a folder: both names in it, and nothing else.
    monkeypatch.setenv("MKCCL_SO_PATH", "/opt/x/lib")
    assert [p for p, _ in _library.candidates()] == ["/opt/x/lib/libmkccl.so.0", "/opt/x/lib/libmkccl.so"] or \
        not os.path.isdir("/opt/x/lib")


def test_a_missing_library_says_where_it_looked():
    env = dict(os.environ, MKCCL_SO_PATH="/nonexistent/libmkccl.so.0", PYTHONPATH=os.path.dirname(
        os.path.dirname(mkccl.__file__)))
    code = "import mkccl\ntry:\n    mkccl.library_path()\nexcept mkccl.LibraryNotFound as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "/nonexistent/libmkccl.so.0" in out.stdout and "MKCCL_SO_PATH" in out.stdout


# ---- types and codes match include/mkccl.h -------------------------------------------------------

def test_enums_match_the_header():
    dt = header_enum({"mkccl" + n for n in ("Int8", "Uint8", "Int32", "Uint32", "Int64", "Uint64", "Float16",
                                            "Float32", "Float64", "Bfloat16", "Float8e4m3", "Float8e5m2")})
    assert len(dt) == 12
    ours = {d.name.replace("_", "").lower(): d.value for d in mkccl.DataType}
    for name, v in dt.items():
        key = name[len("mkccl"):].lower()
        assert ours[key] == v, name
    ro = header_enum({"mkcclSum", "mkcclProd", "mkcclMax", "mkcclMin", "mkcclAvg"})
    assert {k[len("mkccl"):].upper(): v for k, v in ro.items()} == {r.name: r.value for r in mkccl.ReduceOp}
    res = header_enum({"mkcclSuccess", "mkcclUnhandledCudaError", "mkcclSystemError", "mkcclInternalError",
                       "mkcclInvalidArgument", "mkcclInvalidUsage", "mkcclRemoteError", "mkcclInProgress",
                       "mkcclTimeout"})
    camel = {r.name.replace("_", "").lower(): r.value for r in mkccl.Result}
    assert len(res) == len(camel) == 9
    for name, v in res.items():
        assert camel[name[len("mkccl"):].lower()] == v, name
    assert _library.UNIQUE_ID_BYTES == int(re.search(r"MKCCL_UNIQUE_ID_BYTES (\d+)", open(HEADER).read()).group(1))


def test_torch_dtypes_map():
    assert mkccl.mkccl_dtype(torch.bfloat16) == mkccl.DataType.BFLOAT16
    assert mkccl.mkccl_dtype(torch.float32) == mkccl.DataType.FLOAT32
    assert mkccl.mkccl_dtype(torch.uint8) == mkccl.DataType.UINT8
    assert mkccl.mkccl_dtype(torch.int64) == mkccl.DataType.INT64
    if hasattr(torch, "float8_e4m3fn"):
        assert mkccl.mkccl_dtype(torch.float8_e4m3fn) == mkccl.DataType.FLOAT8_E4M3
    for bad in (torch.bool, torch.complex64, torch.int16):
        with pytest.raises(TypeError, match="no type for"):
            mkccl.mkccl_dtype(bad)


def test_reduce_ops_from_names_ints_and_torch():
    R = mkccl.ReduceOp
    assert [mkccl._types.reduce_op(v) for v in ("sum", "MAX", "min", "avg", "prod", 2)] == \
        [R.SUM, R.MAX, R.MIN, R.AVG, R.PROD, R.MAX]
    if torch.distributed.is_available():
        assert mkccl._types.reduce_op(torch.distributed.ReduceOp.MAX) == R.MAX
        assert mkccl._types.reduce_op(torch.distributed.ReduceOp.SUM) == R.SUM
    with pytest.raises(ValueError, match="unknown reduction"):
        mkccl._types.reduce_op("xor")
    with pytest.raises(ValueError, match="not a mkcclRedOp_t"):
        mkccl._types.reduce_op(9)


# ---- errors carry the library's code and message -------------------------------------------------

def test_a_failed_call_raises_with_code_and_message():
    lib = mkccl.load_library()
    with pytest.raises(mkccl.MkcclError) as e:
        mkccl._errors.raise_for(lib, lib.mkcclGetVersion(None), "mkcclGetVersion")
    assert e.value.result == mkccl.Result.INVALID_ARGUMENT and e.value.code == 4
    assert "version is NULL" in e.value.message
    assert "mkcclGetVersion failed: invalid argument (4)" in str(e.value)


def test_unique_id_is_128_fresh_bytes():
    a, b = mkccl.get_unique_id(), mkccl.get_unique_id()
    assert len(a) == len(b) == 128 and a != b
    with pytest.raises(ValueError, match="128 bytes"):
        mkccl.Communicator.from_unique_id(a[:100], 0, 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: init would succeed")
def test_init_without_a_gpu_raises_the_librarys_error():
    with pytest.raises(mkccl.MkcclError) as e:
        mkccl.Communicator.from_unique_id(mkccl.get_unique_id(), 0, 1)
    assert e.value.result in (mkccl.Result.UNHANDLED_CUDA_ERROR, mkccl.Result.INVALID_USAGE, mkccl.Result.SYSTEM_ERROR)
    assert e.value.message


def test_a_closed_or_unknown_communicator_is_refused():
    with pytest.raises(ValueError, match="no open communicator has handle 12345"):
        mkccl.ops.all_gather(torch.ones(2), 12345)
    with pytest.raises(TypeError, match="Communicator or its handle"):
        mkccl.ops.all_gather(torch.ones(2), "comm")


# ---- bad tensors get clear messages --------------------------------------------------------------

BAD = [
    # (call, exception, message) with comm = a 4-rank stand-in
    (lambda c: ops.all_gather(torch.ones(4), c), ValueError, "x must be a CUDA tensor, got one on cpu"),
    (lambda c: ops.all_gather([1, 2], c), TypeError, "x must be a torch.Tensor"),
    (lambda c: ops.all_gather(meta(4, 6).t(), c), ValueError, "x must be contiguous"),
    (lambda c: ops.all_gather(meta(4, dtype=torch.bool), c), TypeError, "x is bool tensor"),
    (lambda c: ops.reduce_scatter(meta(6, 2), c), ValueError, r"x.shape\[0\]=6 must be divisible by 4"),
    (lambda c: ops.reduce_scatter(meta(8), c, "xor"), ValueError, "mkccl.reduce_scatter: op: unknown reduction"),
    (lambda c: ops.all_reduce(meta(8, dtype=torch.complex64), c), TypeError, "supported:"),
    (lambda c: ops.all_to_all(meta(5, 3), c), ValueError, "divisible by 4"),
    (lambda c: ops.all_to_all_v(meta(5, 3), c, [1, 2, 2], [1, 1, 1, 1]), ValueError, "send_splits has 3 entries"),
    (lambda c: ops.all_to_all_v(meta(5, 3), c, [1, 2, 2, 1], [1, 1, 1, 1]), ValueError, "add up to 6 rows but x has 5"),
    (lambda c: ops.all_to_all_v(meta(5, 3), c, [1, 2, 2, 0], [1, -1, 1, 1]), ValueError, "negative entry"),
    (lambda c: ops.gemm(meta(8, 64), meta(32, 64).float()), TypeError, "w is float32"),
    (lambda c: ops.gemm(meta(8, 64), meta(32, 64, dtype=torch.float16)), TypeError, "a and w must have one dtype"),
    (lambda c: ops.gemm(meta(8, 64), meta(64, 32).t()), ValueError, "w must be contiguous"),
    (lambda c: ops.gemm(meta(8, 60), meta(32, 60)), ValueError, "multiple of 16 bytes"),
    (lambda c: ops.gemm(meta(8, 64), meta(30, 64)), ValueError, "a row of out .N. is 30 elements"),
    (lambda c: ops.gemm(meta(8, 64), meta(32, 48)), ValueError, "a's last dimension .64. must equal w's second .48."),
    (lambda c: ops.gemm(meta(8, 64), meta(2, 32, 64)), ValueError, "w must be 2-D"),
    (lambda c: ops.gemm(meta(8, 64), meta(32, 64), out_dtype=torch.int8), TypeError, "out_dtype"),
    (lambda c: ops.gemm(meta(0, 64), meta(32, 64)), ValueError, "M .rows of a.=0 must be >= 1"),
    (lambda c: ops.gemm(torch.ones(8, 64, dtype=torch.bfloat16), torch.ones(32, 64, dtype=torch.bfloat16)),
     ValueError, "a must be a CUDA tensor"),
    (lambda c: ops.all_gather_gemm(meta(64), meta(32, 64), c), ValueError, "at least 2 dimensions"),
    (lambda c: ops.gemm_reduce_scatter(meta(6, 64), meta(32, 64), c), ValueError, r"a.shape\[0\]=6 must be divisible"),
    (lambda c: ops.gemm_all_reduce(meta(8, 64), meta(32, 64).float(), c), TypeError, "w is float32"),
    (lambda c: ops.all_gather(meta(4, 2), c, out=meta(15, 2)), ValueError, "out is bfloat16 tensor of shape .15, 2.; "
                                                                           "expected bfloat16 with 32 elements"),
    (lambda c: ops.all_gather_gemm_gathered(meta(4, 64), meta(32, 64), c, out=(meta(16, 32),)), ValueError,
     "expected 2 output tensors"),
    (lambda c: ops.all_gather(meta(4), c, bogus=1), TypeError, "unexpected argument 'bogus'"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_are_rejected_clearly(comm4, i):
    call, exc, msg = BAD[i]
    with pytest.raises(exc, match=msg):
        call(comm4)


def test_meta_tensors_pass_the_layout_checks_and_fail_only_on_placement(comm4):
    # Valid layouts on meta tensors get as far as the device check (a meta tensor is not CUDA).
    with pytest.raises(ValueError, match="must be a CUDA tensor, got one on meta"):
        ops.gemm_reduce_scatter(meta(8, 3, 64), meta(32, 64), comm4)


# ---- shapes, the Python API and the custom ops -------------------------------------------------

SHAPES = [
    ("all_gather", [meta(3, 5)], [], [(12, 5)]),
    ("all_gather", [meta()], [], [(4,)]),
    ("reduce_scatter", [meta(8, 3)], [2], [(2, 3)]),
    ("all_reduce", [meta(7, 3)], [0], [(7, 3)]),
    ("all_to_all", [meta(8, 3)], [], [(8, 3)]),
    ("all_to_all_v", [meta(6, 3)], [[1, 2, 3, 0], [4, 0, 0, 1]], [(5, 3)]),
    ("gemm", [meta(5, 2, 64), meta(24, 64)], [torch.float32], [(5, 2, 24)]),
    ("all_gather_gemm", [meta(5, 64), meta(24, 64)], [], [(20, 24)]),
    ("all_gather_gemm_gathered", [meta(5, 2, 64), meta(24, 64)], [], [(20, 2, 24), (20, 2, 64)]),
    ("gemm_reduce_scatter", [meta(8, 2, 64), meta(24, 64)], [], [(2, 2, 24)]),
    ("gemm_all_reduce", [meta(8, 64), meta(24, 64)], [], [(8, 24)]),
]


@pytest.mark.parametrize("name,tensors,options,shapes", SHAPES)
def test_output_shapes(comm4, name, tensors, options, shapes):
    op = ops.OPS[name]
    values = op.convert(tensors + options)
    got = op.outputs(communicator.lookup(comm4) if op.comm else None, *values)
    assert [tuple(s) for s, _ in got] == shapes
    if name == "gemm":
        assert got[0][1] == torch.float32


@pytest.mark.skipif(mkccl.CUSTOM_OPS is None, reason="custom ops not registered: %s" % mkccl._torch_ops.REASON)
@pytest.mark.parametrize("name,tensors,options,shapes", SHAPES)
def test_custom_ops_fake_implementations(comm4, name, tensors, options, shapes):
    op = ops.OPS[name]
    pos = op.schema_order(op.convert(tensors + options), comm4)
    with torch.inference_mode():  # (torch 1.13 has no autograd fallthrough for meta tensors)
        res = getattr(torch.ops.mkccl, name)(*pos)
        outs = [res] if isinstance(res, torch.Tensor) else list(res)
        assert [tuple(t.shape) for t in outs] == shapes
        assert all(t.device.type == "meta" for t in outs)
        # The _out variant accepts the outputs by keyword and returns nothing.
        assert getattr(torch.ops.mkccl, name + "_out")(*pos, **dict(zip(op.out_names, outs))) is None


@pytest.mark.skipif(mkccl.CUSTOM_OPS is None, reason="custom ops not registered")
def test_custom_ops_reject_cpu_tensors_with_the_ops_message(comm4):
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):
        torch.ops.mkccl.all_gather(torch.ones(4), comm4)


def test_schemas():
    assert ops.OPS["reduce_scatter"].schema() == "reduce_scatter(Tensor x, int comm, int op=0) -> Tensor"
    assert ops.OPS["gemm"].schema() == "gemm(Tensor a, Tensor w, ScalarType? out_dtype=None) -> Tensor"
    assert ops.OPS["all_gather_gemm_gathered"].out_schema() == (
        "all_gather_gemm_gathered_out(Tensor a, Tensor w, int comm, *, Tensor(a!) out, Tensor(b!) gathered) -> ()")


def test_every_communicator_op_is_a_method_with_its_signature():
    import inspect

    for op in ops.OPS.values():
        assert hasattr(ops, op.name)
        if op.comm:
            m = getattr(mkccl.Communicator, op.name)
            params = list(inspect.signature(m).parameters)
            assert params[0] == "self" and params[-1] == "out" and "comm" not in params
            assert op.doc and op.doc in m.__doc__
        else:
            assert not hasattr(mkccl.Communicator, op.name)


def test_a_method_passes_the_communicator_after_the_tensors(comm4):
    c = communicator.Communicator.__new__(communicator.Communicator)
    c.ptr, c.size, c.rank, c.device, c.handle = 1, 4, 0, torch.device("cuda", 0), -1
    with pytest.raises(ValueError, match=r"x.shape\[0\]=6 must be divisible by 4"):
        c.reduce_scatter(meta(6), "max")
    with pytest.raises(ValueError, match="a must be a CUDA tensor, got one on meta"):
        c.gemm_reduce_scatter(w=meta(8, 64), a=meta(8, 64))


# ---- every op's C call, without a GPU ------------------------------------------------------------

MARSHAL = {
    # name: (tensors, options) that pass the layout checks; the C call then fails on the NULL comm
    # (or, for gemm, on the missing GPU) and its message must come back.
    "all_gather": ([torch.ones(4)], []),
    "reduce_scatter": ([torch.ones(8)], [2]),
    "all_reduce": ([torch.ones(4)], [0]),
    "all_to_all": ([torch.ones(8)], []),
    "all_to_all_v": ([torch.ones(6, 2)], [[1, 2, 3, 0], [0, 1, 1, 1]]),
    "gemm": ([torch.ones(8, 64, dtype=torch.bfloat16), torch.ones(16, 64, dtype=torch.bfloat16)], [None]),
    "all_gather_gemm": ([torch.ones(8, 64, dtype=torch.bfloat16), torch.ones(16, 64, dtype=torch.bfloat16)], []),
    "all_gather_gemm_gathered": ([torch.ones(8, 64, dtype=torch.bfloat16), torch.ones(16, 64, dtype=torch.bfloat16)], []),
    "gemm_reduce_scatter": ([torch.ones(8, 64, dtype=torch.bfloat16), torch.ones(16, 64, dtype=torch.bfloat16)], []),
    "gemm_all_reduce": ([torch.ones(8, 64, dtype=torch.bfloat16), torch.ones(16, 64, dtype=torch.bfloat16)], []),
    "attention": ([torch.ones(1, 8, 4, 64, dtype=torch.bfloat16)] * 3, [None, False]),
    "ring_attention": ([torch.ones(1, 8, 4, 64, dtype=torch.bfloat16)] * 3, [None, True, True]),
    "grouped_gemm": ([torch.ones(256, 64, dtype=torch.bfloat16), torch.ones(2, 16, 64, dtype=torch.bfloat16),
                      torch.tensor([0, 128, 256], dtype=torch.int32)], [None]),
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present (the GPU tests make these calls)")
@pytest.mark.parametrize("name", sorted(MARSHAL))
def test_every_c_call_marshals_its_arguments(monkeypatch, name):
    """Op.run up to and through the C call on CPU tensors (the device check bypassed): ctypes
    converts every argument as the prototype says, and the library's refusal returns as MkcclError."""
    from mkccl import _op

    assert set(MARSHAL) == set(ops.OPS)
    monkeypatch.setattr(_checks_module(), "on_device", lambda *a: None)
    monkeypatch.setattr(_op, "_current_stream", lambda device: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)
    op = ops.OPS[name]
    tensors, options = MARSHAL[name]
    comm = StandIn(4, 1)
    comm.device = torch.device("cpu")
    with pytest.raises(mkccl.MkcclError) as e:
        op.run(comm if op.comm else None, op.convert(tensors + options))
    assert e.value.call == op.c_name and e.value.message
    if op.comm:  # refused on the NULL communicator, before any CUDA call
        assert e.value.result == mkccl.Result.INVALID_ARGUMENT, e.value


def _checks_module():
    from mkccl import _checks

    return _checks


def test_tuning_is_parsed_by_the_library_and_a_bad_key_named():
    """mkcclSetTuning needs no GPU for the process's overrides: a good string is taken, a bad key or
    value raises MkcclError carrying the library's message, which names it."""
    mkccl.set_tuning("gemm.variant=256x1;ag_gemm.plan=ce;attention.variant=overlap")
    with pytest.raises(mkccl.MkcclError) as e:
        mkccl.set_tuning("ag_gemm.plan=fastest")
    assert e.value.result == mkccl.Result.INVALID_USAGE and "ag_gemm.plan" in e.value.message
    with pytest.raises(mkccl.MkcclError) as e:
        mkccl.set_tuning("attention.variant=pingpong")
    assert "attention.variant" in e.value.message
    with pytest.raises(mkccl.MkcclError) as e:
        mkccl.set_tuning("gemm.tiles=256")
    assert "unknown key" in e.value.message
    mkccl.set_tuning(None)


def test_fused_gemm_args_layout():
    """mkcclFusedGemmArgs_t as the package declares it: the C struct's size (the CPU test
    fused_args_check_test pins the same 464 bytes on the C side) and the initializer's values."""
    import ctypes
    assert ctypes.sizeof(_library.FusedWeight) == 48
    assert ctypes.sizeof(_library.FusedGemmArgs) == 464
    a = _library.FusedGemmArgs.make()
    assert (a.size, a.magic, a.version, a.numWeights) == (464, 0x6D6B6667, 1, 1)
    assert a.outType == a.biasType == header_enum({"mkcclNumTypes"})["mkcclNumTypes"]
    assert mkccl.fused.all_gather_gemm_ex is not None
