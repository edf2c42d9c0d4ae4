"""MoE expert parallelism on torch tensors: the dispatch/combine handle (mkcclMoe*), the SwiGLU
grouped GEMM, and the expert layer composed from them.

    moe = mkccl.moe.Moe(comm, num_experts=256, topk=8, hidden=7168, max_tokens_per_rank=4096)
    w1 = mkccl.moe.pack_swiglu_weights(gate, up)      # [E_loc, I, H] x 2 -> the blocked layout
    out = moe.layer(x, topk_idx, topk_w, w1, w2)      # dispatch, SwiGLU GEMM, GEMM, combine
    # or W1 as engines keep it, gate rows then up rows per expert ([E_loc, 2*I, H]), as is:
    out = moe.layer(x, topk_idx, topk_w, w13, w2, w1_layout="gate_up")
    # or step by step, with your own expert compute on moe.recv_x between the two:
    moe.dispatch(x, topk_idx, topk_w); y = my_experts(moe.recv_x, moe.expert_offsets); moe.combine(y)
    # or the fused halves (mkcclMoeDispatchGemm, mkcclMoeGemmCombine), alone or in the layer:
    act = moe.dispatch_gemm(x, topk_idx, topk_w, w1, inter); out = moe.gemm_combine(act, w2)
    out = moe.layer(x, topk_idx, topk_w, w1, w2, fused="first")   # or "second", "both" (True)
    moe.close()

Every call is stream-ordered on the current stream of the communicator's device, reads the routing
on the device and never synchronises with the host (CUDA-graph capturable as the C calls are;
given its out=/act=/y= buffers, a call allocates nothing). The composed layer is the C calls one
after the other on the stream; the fused halves run their GEMM and their communication one after
the other by default, or at once with the tuner's moe.fused_route=overlap (mkccl.set_tuning before
the communicator is made; docs/MOE.md). docs/MOE.md and docs/PYTHON.md say more.
"""
import ctypes

import torch

from . import _checks
from ._errors import raise_for
from ._library import load
from ._types import mkccl_dtype

_MAGIC = 0x6D6B6D65
_VERSION = 1


class MoeConfig(ctypes.Structure):
    """mkcclMoeConfig_v1 (include/mkccl.h)."""

    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("numExperts", ctypes.c_int), ("topk", ctypes.c_int), ("hidden", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("maxTokensPerRank", ctypes.c_size_t), ("maxRecvRows", ctypes.c_size_t),
                ("rowAlign", ctypes.c_int), ("maxCtas", ctypes.c_int)]


class MoeBuffers(ctypes.Structure):
    """mkcclMoeBuffers (include/mkccl.h)."""

    _fields_ = [("recvX", ctypes.c_void_p), ("rowPitch", ctypes.c_size_t), ("maxRecvRows", ctypes.c_size_t),
                ("rowInfo", ctypes.c_void_p), ("expertOffsets", ctypes.c_void_p), ("expertCounts", ctypes.c_void_p),
                ("numLocalExperts", ctypes.c_int), ("rowAlign", ctypes.c_int)]


class _DeviceMemory:
    """A view of library-owned device memory for torch.as_tensor (__cuda_array_interface__); the
    owner (the Moe handle) keeps it alive."""

    _TYPESTR = {torch.bfloat16: "<V2", torch.float16: "<f2", torch.int32: "<i4", torch.float32: "<f4"}

    def __init__(self, ptr, shape, dtype, strides=None):
        self.__cuda_array_interface__ = {"data": (int(ptr), False), "shape": tuple(int(s) for s in shape),
                                         "typestr": self._TYPESTR[dtype], "version": 3, "strides": strides}


def _view(ptr, shape, dtype, device, row_pitch=None):
    if dtype == torch.bfloat16:
        # The interface has no bf16 type: view the memory as int16 and reinterpret.
        t = torch.as_tensor(_DeviceMemory(ptr, (shape[0], row_pitch), torch.float16), device=device)
        return t.view(torch.bfloat16)[:, : shape[1]]
    if row_pitch is not None:
        t = torch.as_tensor(_DeviceMemory(ptr, (shape[0], row_pitch), dtype), device=device)
        return t[:, : shape[1]]
    return torch.as_tensor(_DeviceMemory(ptr, shape, dtype), device=device)


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


def _check(cond, msg):
    if not cond:
        raise ValueError("mkccl.moe: " + msg)


# layer(fused=...): which halves of the layer are the fused calls.
_FUSED_MODES = {False: (False, False), None: (False, False), "none": (False, False), "first": (True, False),
                "second": (False, True), "both": (True, True), True: (True, True)}


def _fused_mode(fused):
    try:
        return _FUSED_MODES[fused]
    except (KeyError, TypeError):
        raise ValueError("mkccl.moe.Moe.layer: fused=%r; expected False (composed), 'first' (dispatch_gemm), "
                         "'second' (gemm_combine) or 'both' (True)" % (fused,)) from None


# W1's layouts (mkcclSwigluLayout_t): "blocked" (pack_swiglu_weights) and "gate_up" (each expert's
# gate rows, then its up rows: [E, 2*I, H]).
_W1_LAYOUTS = {"blocked": 0, "gate_up": 1}


def _w1_layout(op, layout):
    if layout not in _W1_LAYOUTS:
        raise ValueError("%s: w1_layout=%r; expected 'blocked' (pack_swiglu_weights) or 'gate_up' ([E, 2*I, H], "
                         "gate rows then up rows)" % (op, layout))
    return _W1_LAYOUTS[layout]


def _w1_shape(E, inter, H, layout):
    """W1's shape and its description in the layout."""
    if layout == "gate_up":
        return (E, 2 * inter, H), "[E_loc, 2*inter, hidden] (gate rows, then up rows)"
    return (E, 2 * ((inter + 127) // 128 * 128), H), "[E_loc, 2*roundup(inter, 128), hidden] (pack_swiglu_weights)"


def pack_swiglu_weights(gate, up):
    """gate, up [E, I, H] (or [I, H]) -> W1 [E, 2*Ip, H] in the blocked interleave that
    grouped_gemm_swiglu reads (Ip = I rounded up to 128): per 128-row block b of I, the gate rows
    of block b, then the up rows of block b; rows past I are zero. Done once, at load time."""
    _check(gate.shape == up.shape and gate.dim() in (2, 3), "gate and up must both be [E, I, H] or [I, H]")
    squeeze = gate.dim() == 2
    if squeeze:
        gate, up = gate.unsqueeze(0), up.unsqueeze(0)
    E, I, H = gate.shape
    Ip = (I + 127) // 128 * 128
    w = torch.zeros(E, Ip // 128, 2, 128, H, dtype=gate.dtype, device=gate.device)
    for half, src in ((0, gate), (1, up)):
        padded = torch.zeros(E, Ip, H, dtype=gate.dtype, device=gate.device)
        padded[:, :I] = src
        w[:, :, half] = padded.view(E, Ip // 128, 128, H)
    w = w.view(E, 2 * Ip, H)
    return w[0] if squeeze else w


def grouped_gemm_swiglu(a, w1, row_offsets, inter, out=None, w1_layout="blocked"):
    """out[rows, inter] = silu(a_g . gate_g^T) * (a_g . up_g^T) per group g (mkcclGroupedGemmSwigluEx).
    a [maxRows, K]; w1 [G, 2*Ip, K] from pack_swiglu_weights (w1_layout="blocked") or [G, 2*inter, K],
    each group's gate rows then its up rows (w1_layout="gate_up"); row_offsets: int32 [G + 1] on the
    device (multiples of 128); inter: I. Rows of padding get their rows' products."""
    code = _w1_layout("mkccl.moe.grouped_gemm_swiglu", w1_layout)
    _check(a.is_cuda and w1.is_cuda and row_offsets.is_cuda, "a, w1 and row_offsets must be CUDA tensors")
    _check(a.dim() == 2 and a.stride(1) == 1 and a.stride(0) == a.shape[1], "a must be a contiguous [rows, K]")
    _check(w1.dim() == 3 and w1.is_contiguous(),
           "w1 must be a contiguous [G, 2*Ip, K] (w1_layout='blocked') or [G, 2*inter, K] ('gate_up')")
    _check(row_offsets.dtype == torch.int32 and row_offsets.numel() == w1.shape[0] + 1,
           "row_offsets must be int32 [G + 1]")
    G, Np, K = w1.shape
    _check(K == a.shape[1] and (G, Np, K) == _w1_shape(G, inter, K, w1_layout)[0],
           "w1's shape does not match a, inter and w1_layout=%r" % (w1_layout,))
    _check(a.dtype == w1.dtype and a.dtype in (torch.bfloat16, torch.float16), "a and w1: both bf16 or both fp16")
    if out is None:
        out = torch.empty(a.shape[0], inter, dtype=a.dtype, device=a.device)
    lib = load()
    dt = int(mkccl_dtype(a.dtype))
    raise_for(lib, lib.function("mkcclGroupedGemmSwigluEx")(a.data_ptr(), w1.data_ptr(), code, out.data_ptr(),
                                                            row_offsets.data_ptr(), G, a.shape[0], inter, K, dt, dt,
                                                            _stream(a.device)), "mkcclGroupedGemmSwiglu")
    return out


class Moe:
    """The MoE handle of a communicator (mkcclMoeCreate: collective, every rank alike). Rank r owns
    experts [r*E/n, (r+1)*E/n). The receive side lives in the handle: recv_x [maxRecvRows, H]
    (expert-major rows), expert_offsets int32 [E_loc + 1], expert_counts int32 [E_loc],
    row_info int32 [maxRecvRows, 4] (token, srcRank | slot << 16, weight bits, local expert)."""

    def __init__(self, comm, num_experts, topk, hidden, max_tokens_per_rank, dtype=torch.bfloat16, max_recv_rows=0,
                 row_align=0, max_ctas=0):
        _check(dtype in (torch.bfloat16, torch.float16), "dtype must be torch.bfloat16 or torch.float16")
        self.comm = comm
        self.lib = load()
        self.dtype = dtype
        self.hidden = int(hidden)
        self.topk = int(topk)
        self.max_tokens = int(max_tokens_per_rank)
        cfg = MoeConfig(ctypes.sizeof(MoeConfig), _MAGIC, _VERSION, int(num_experts), self.topk, self.hidden,
                        int(mkccl_dtype(dtype)), self.max_tokens, int(max_recv_rows), int(row_align), int(max_ctas))
        h = ctypes.c_void_p()
        with torch.cuda.device(comm.device):
            raise_for(self.lib, self.lib.function("mkcclMoeCreate")(ctypes.byref(h), comm._live(), ctypes.byref(cfg)),
                      "mkcclMoeCreate", comm.ptr)
        self.ptr = h.value
        b = MoeBuffers()
        raise_for(self.lib, self.lib.function("mkcclMoeGetBuffers")(self.ptr, ctypes.byref(b)), "mkcclMoeGetBuffers")
        dev = comm.device
        self.num_local_experts = b.numLocalExperts
        self.max_recv_rows = b.maxRecvRows
        self.row_align = b.rowAlign
        self.recv_x = _view(b.recvX, (b.maxRecvRows, self.hidden), dtype, dev, b.rowPitch)
        self.expert_offsets = _view(b.expertOffsets, (b.numLocalExperts + 1,), torch.int32, dev)
        self.expert_counts = _view(b.expertCounts, (b.numLocalExperts,), torch.int32, dev)
        self.row_info = _view(b.rowInfo, (b.maxRecvRows, 4), torch.int32, dev)
        self._row_pitch = b.rowPitch
        self._last_T = None  # T of the last dispatch (combine's default)
        # A non-null address for an empty out (T = 0) where a call refuses NULL; never written.
        self._empty = torch.empty(16, dtype=torch.uint8, device=dev)

    def _live(self):
        if self.ptr is None:
            raise ValueError("mkccl.moe: the handle is closed")
        return self.ptr

    def _tokens(self, x, topk_idx, topk_w, place=True):
        """T of x after the checks of the tokens' layout, then (place) of their device."""
        for name, t in (("x", x), ("topk_idx", topk_idx), ("topk_w", topk_w)):
            _checks.tensor("mkccl.moe", name, t)
        _check(x.dim() == 2 and x.shape[1] == self.hidden and x.is_contiguous(), "x must be a contiguous [T, hidden]")
        T = x.shape[0]
        _check(x.dtype == self.dtype, "x must be of the handle's dtype")
        _check(topk_idx.dtype == torch.int32 and topk_idx.shape == (T, self.topk) and topk_idx.is_contiguous(),
               "topk_idx must be a contiguous int32 [T, topk]")
        _check(topk_w.dtype == torch.float32 and topk_w.shape == (T, self.topk) and topk_w.is_contiguous(),
               "topk_w must be a contiguous float32 [T, topk]")
        if place:
            self._place("mkccl.moe", (("x", x, 1), ("topk_idx", topk_idx, 1), ("topk_w", topk_w, 1)))
        return T

    # Layout checks (dtype, shape, contiguity) come first, then placement (device, alignment) just
    # before the C call, as _checks.py does for the ops.
    def _operand(self, op, name, t, shape, what):
        """An input of the handle's dtype for a GEMM: exactly `shape`, dense."""
        _checks.tensor(op, name, t)
        _checks.dtype(op, name, t, (self.dtype,))
        if tuple(t.shape) != tuple(shape):
            raise ValueError("%s: %s must be %s = %s, got shape %s" % (op, name, what, tuple(shape), tuple(t.shape)))
        _checks.contiguous(op, name, t)

    def _output(self, op, name, t, shape):
        """A caller's output buffer: the handle's dtype, shape's element count (any shape), dense."""
        _checks.out_matches(op, name, t, shape, self.dtype)
        return t

    def _place(self, op, named):
        """(name, tensor, byte alignment): each a CUDA tensor on the communicator's device, aligned."""
        for name, t, align in named:
            _checks.on_device(op, name, t, self.comm.device)
            if align > 1:
                _checks.aligned(op, name, t, align)

    def _fused_handle(self, op):
        """What both fused calls need of the handle (the library checks it too, and maxCtas >= 2)."""
        if self.hidden % 8:
            raise ValueError("%s: the handle's hidden=%d must be a multiple of 8 (16-byte rows for the GEMM)" % (
                op, self.hidden))
        if self.row_align % 128:
            raise ValueError("%s: the handle's row_align=%d must be a multiple of 128 (a GEMM tile never straddles "
                             "two experts)" % (op, self.row_align))

    def _inter(self, op, what, inter):
        inter = int(inter)
        if inter < 8 or inter % 8:
            raise ValueError("%s: %s=%d must be a positive multiple of 8 (16-byte rows)" % (op, what, inter))
        return inter

    def _combine_tokens(self, op, num_tokens):
        T = self._last_T if num_tokens is None else int(num_tokens)
        if T is None:
            raise ValueError("%s: no dispatch on this handle yet (or pass num_tokens)" % op)
        return T

    def _out(self, op, out, T):
        if out is None:
            return torch.empty(T, self.hidden, dtype=self.dtype, device=self.comm.device)
        return self._output(op, "out", out, (T, self.hidden))

    def dispatch(self, x, topk_idx, topk_w):
        """Sends every token row to the ranks of its experts (mkcclMoeDispatch); afterwards recv_x,
        expert_offsets, expert_counts and row_info hold this rank's expert-major rows."""
        T = self._tokens(x, topk_idx, topk_w)
        self._last_T = T
        raise_for(self.lib, self.lib.function("mkcclMoeDispatch")(self._live(), x.data_ptr(), topk_idx.data_ptr(),
                                                                  topk_w.data_ptr(), T, _stream(x.device)),
                  "mkcclMoeDispatch", self.comm.ptr)

    def dispatch_gemm(self, x, topk_idx, topk_w, w1, inter, act=None, swiglu=True, w1_layout="blocked"):
        """The dispatch fused with the first expert GEMM (mkcclMoeDispatchGemm): what dispatch()
        does (recv_x, expert_offsets, expert_counts, row_info; combine and gemm_combine work after
        it), and on the received rows (after the dispatch by default; with moe.fused_route=overlap
        at once, on each 128-row tile as soon as its rows have landed),
        swiglu=True:  act[r] = silu(recv_x[r] . gate_e^T) * (recv_x[r] . up_e^T), w1 from
                      pack_swiglu_weights [E_loc, 2*roundup(inter, 128), hidden], or with
                      w1_layout="gate_up" [E_loc, 2*inter, hidden] (gate rows, then up rows);
        swiglu=False: act[r] = recv_x[r] . w1_e^T, w1 [E_loc, inter, hidden];
        for every row r of local expert e. Returns act [max_recv_rows, inter] of the handle's dtype
        (padding rows hold any values); act=: write it there instead (nothing allocated). Needs
        hidden and inter multiples of 8 and a handle whose max_ctas allows 2+ CTAs."""
        op = "mkccl.moe.Moe.dispatch_gemm"
        T = self._tokens(x, topk_idx, topk_w, place=False)
        self._fused_handle(op)
        inter = self._inter(op, "inter", inter)
        El, H = self.num_local_experts, self.hidden
        mode = 1 + _w1_layout(op, w1_layout) if swiglu else 0  # MKCCL_MOE_GEMM_*
        if swiglu:
            self._operand(op, "w1", w1, *_w1_shape(El, inter, H, w1_layout))
        else:
            self._operand(op, "w1", w1, (El, inter, H), "[E_loc, inter, hidden]")
        shape = (self.max_recv_rows, inter)
        if act is not None:
            self._output(op, "act", act, shape)
        self._place(op, (("x", x, 1), ("topk_idx", topk_idx, 1), ("topk_w", topk_w, 1), ("w1", w1, 16)) +
                    ((("act", act, 16),) if act is not None else ()))
        if act is None:
            act = torch.empty(shape, dtype=self.dtype, device=self.comm.device)
        fn = self.lib.function("mkcclMoeDispatchGemm")
        raise_for(self.lib, fn(self._live(), x.data_ptr(), topk_idx.data_ptr(), topk_w.data_ptr(), T, w1.data_ptr(),
                               act.data_ptr(), inter, mode, _stream(self.comm.device)),
                  "mkcclMoeDispatchGemm", self.comm.ptr)
        self._last_T = T
        return act

    def combine(self, y, out=None, num_tokens=None):
        """out[t] = sum_j topk_w[t, j] * y(row of (t, j)) (mkcclMoeCombine), summed in fp32; y is
        [maxRecvRows, hidden] laid out like recv_x (recv_x itself is fine). num_tokens: T of the
        last dispatch by default."""
        T = self._last_T if num_tokens is None else int(num_tokens)
        _check(T is not None, "combine before any dispatch: pass num_tokens")
        _check(y.is_cuda and y.dtype == self.dtype and y.dim() == 2 and y.shape[0] >= self.max_recv_rows and
               y.shape[1] == self.hidden and y.stride(1) == 1 and y.stride(0) == self._row_pitch,
               "y must be [maxRecvRows, hidden] with recv_x's row pitch (%d) and dtype" % self._row_pitch)
        if out is None:
            out = torch.empty(T, self.hidden, dtype=self.dtype, device=y.device)
        _check(out.shape == (T, self.hidden) and out.is_contiguous() and out.dtype == self.dtype,
               "out must be a contiguous [T, hidden] of the handle's dtype")
        raise_for(self.lib, self.lib.function("mkcclMoeCombine")(self._live(), y.data_ptr(), out.data_ptr(), T,
                                                                 _stream(y.device)), "mkcclMoeCombine", self.comm.ptr)
        return out

    def gemm_combine(self, act, w2, y=None, out=None, num_tokens=None):
        """The second expert GEMM fused with combine (mkcclMoeGemmCombine): y = act . w2_e^T per
        local expert on the layout of the last dispatch (plain or fused), and then (with
        moe.fused_route=overlap: at once, as each 128-row block of y is stored) what combine(y) does: out[t] = sum_j topk_w[t, j] * y(t, j),
        summed in fp32. act [max_recv_rows, inter] (dispatch_gemm's output, or
        grouped_gemm_swiglu's on recv_x), w2 [E_loc, hidden, inter]. y: where y is written
        ([max_recv_rows, hidden]); default the handle's recv_x (overwritten; nothing allocated).
        out [T, hidden]; num_tokens: T of the last dispatch by default. Returns out. Needs hidden
        and inter multiples of 8 and a handle whose max_ctas allows 2+ CTAs."""
        op = "mkccl.moe.Moe.gemm_combine"
        T = self._combine_tokens(op, num_tokens)
        self._fused_handle(op)
        _checks.tensor(op, "w2", w2)
        if w2.dim() != 3:
            raise ValueError("%s: w2 must be [E_loc, hidden, inter], got shape %s" % (op, tuple(w2.shape)))
        inter = self._inter(op, "inter (w2.shape[2])", w2.shape[2])
        rows, H = self.max_recv_rows, self.hidden
        self._operand(op, "w2", w2, (self.num_local_experts, H, inter), "[E_loc, hidden, inter]")
        self._operand(op, "act", act, (rows, inter), "[max_recv_rows, inter] (dispatch_gemm's output)")
        y = self.recv_x if y is None else self._output(op, "y", y, (rows, H))
        if out is not None:
            self._output(op, "out", out, (T, H))
        self._place(op, (("w2", w2, 16), ("act", act, 16), ("y", y, 16)) + ((("out", out, 2),) if out is not None
                                                                            else ()))
        out = self._out(op, out, T)
        out_ptr = out.data_ptr() if out.numel() else self._empty.data_ptr()
        fn = self.lib.function("mkcclMoeGemmCombine")
        raise_for(self.lib, fn(self._live(), act.data_ptr(), w2.data_ptr(), y.data_ptr(), out_ptr, inter, T,
                               _stream(self.comm.device)), "mkcclMoeGemmCombine", self.comm.ptr)
        return out

    def _gemm2(self, act, w2, y):
        """y = act . w2_e^T per local expert (mkcclGroupedGemm on the handle's expert offsets)."""
        op = "mkccl.moe.Moe.experts"
        _checks.tensor(op, "w2", w2)
        _check(w2.dim() == 3, "w2 must be a contiguous [E_loc, hidden, inter]")
        inter = w2.shape[2]
        rows = self.max_recv_rows
        self._operand(op, "w2", w2, (self.num_local_experts, self.hidden, inter), "[E_loc, hidden, inter]")
        self._operand(op, "act", act, (rows, inter), "[max_recv_rows, inter]")
        if y is not None:
            self._output(op, "y", y, (rows, self.hidden))
        self._place(op, (("w2", w2, 16), ("act", act, 16)) + ((("y", y, 16),) if y is not None else ()))
        if y is None:
            y = torch.empty(rows, self.hidden, dtype=self.dtype, device=self.comm.device)
        dt = int(mkccl_dtype(self.dtype))
        raise_for(self.lib, self.lib.function("mkcclGroupedGemm")(act.data_ptr(), w2.data_ptr(), y.data_ptr(),
                                                                  self.expert_offsets.data_ptr(),
                                                                  self.num_local_experts, rows, self.hidden, inter,
                                                                  dt, dt, _stream(self.comm.device)),
                  "mkcclGroupedGemm")
        return y

    def experts(self, w1, w2, inter, act=None, y=None, w1_layout="blocked"):
        """The local experts on the dispatched rows: act = SwiGLU(recv_x . W1_e^T), y = act . W2_e^T
        (two grouped GEMMs; w1 from pack_swiglu_weights [E_loc, 2*Ip, H] or, w1_layout="gate_up",
        [E_loc, 2*inter, H]; w2 [E_loc, H, inter])."""
        _check(self._row_pitch == self.hidden, "experts() needs hidden to be a multiple of 8")
        _check(w2.dim() == 3 and w2.shape == (self.num_local_experts, self.hidden, inter) and w2.is_contiguous(),
               "w2 must be a contiguous [E_loc, hidden, inter]")
        a = self.recv_x  # [rows, hidden], contiguous when the row pitch is hidden
        act = grouped_gemm_swiglu(a, w1, self.expert_offsets, inter, act, w1_layout)
        return self._gemm2(act, w2, y)

    def layer(self, x, topk_idx, topk_w, w1, w2, out=None, fused=False, act=None, y=None, w1_layout="blocked"):
        """The expert layer; returns out [T, hidden]. fused=False: dispatch, SwiGLU grouped GEMM,
        grouped GEMM, combine, one after the other on the stream; 'first': dispatch_gemm instead of
        the first two; 'second': gemm_combine instead of the last two; 'both' (or True): both fused
        halves. act [max_recv_rows, inter] and y [max_recv_rows, hidden]: the intermediate buffers
        (act=None: allocated; y=None: allocated for the unfused second half, the handle's recv_x,
        no longer needed once act is computed, for the fused one); with act=, out= and (unfused second
        half) y= given, nothing is allocated. w1_layout: "blocked" (pack_swiglu_weights) or "gate_up"
        (w1 [E_loc, 2*inter, hidden], each expert's gate rows then its up rows)."""
        first, second = _fused_mode(fused)
        # Every layout check before the first (collective) call: a rank that raised after its
        # dispatch would leave its peers waiting in the combine until the timeout.
        op = "mkccl.moe.Moe.layer"
        T = self._tokens(x, topk_idx, topk_w, place=False)
        _check(self._row_pitch == self.hidden, "layer() needs hidden to be a multiple of 8")
        _checks.tensor(op, "w2", w2)
        _check(w2.dim() == 3, "w2 must be a contiguous [E_loc, hidden, inter]")
        inter = self._inter(op, "inter (w2.shape[2])", w2.shape[2])
        El, H, rows = self.num_local_experts, self.hidden, self.max_recv_rows
        _w1_layout(op, w1_layout)
        self._operand(op, "w1", w1, *_w1_shape(El, inter, H, w1_layout))
        self._operand(op, "w2", w2, (El, H, inter), "[E_loc, hidden, inter]")
        for name, t, shape in (("act", act, (rows, inter)), ("y", y, (rows, H)), ("out", out, (T, H))):
            if t is not None:
                self._output(op, name, t, shape)
        if first or second:
            self._fused_handle(op)
        if first:
            act = self.dispatch_gemm(x, topk_idx, topk_w, w1, inter, act, w1_layout=w1_layout)
        else:
            self.dispatch(x, topk_idx, topk_w)
            act = grouped_gemm_swiglu(self.recv_x, w1, self.expert_offsets, inter, act, w1_layout)
        if second:  # y=None: gemm_combine's default, the handle's recv_x
            return self.gemm_combine(act, w2, y, out)
        return self.combine(self._gemm2(act, w2, y), out)

    def close(self):
        """Frees the handle (waits for its calls on this rank). Tensors from it must not be used after."""
        if self.ptr is not None:
            with torch.cuda.device(self.comm.device):
                raise_for(self.lib, self.lib.function("mkcclMoeDestroy")(self.ptr), "mkcclMoeDestroy")
            self.ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
