"""The package on a GPU: every op against torch on random shapes, in 1 and 2 ranks, in one process
(a thread per rank) and in two processes (torch.multiprocessing, a gloo group); the custom ops,
torch.compile, the async error and abort. Ranks share a GPU where there are fewer GPUs than ranks
(MKCCL_SHARE_GPUS=1, a testing aid). Each run draws fresh shapes and values (the seed is printed)."""
import contextlib
import ctypes
import os
import threading
import time
import traceback

import cuda_env  # noqa: E402,F401  (before CUDA starts: cuda_env.py says why)

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import mkccl  # noqa: E402
import rank_checks  # noqa: E402

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] == 9
pytestmark = pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (sm_90)")


def fresh_seed(what):
    s = time.time_ns() % (2 ** 31)
    print("%s: seed %d" % (what, s))
    return s


@contextlib.contextmanager
def shared_gpus(devices):
    """MKCCL_SHARE_GPUS and MKCCL_MAX_CTAS (a little below half the SMs, whole clusters of 2) while
    ranks share a GPU, so that their persistent kernels fit on it together; read at init."""
    if len(set(devices)) == len(devices):
        yield
        return
    sms = torch.cuda.get_device_properties(devices[0]).multi_processor_count
    old = {k: os.environ.get(k) for k in ("MKCCL_SHARE_GPUS", "MKCCL_MAX_CTAS")}
    os.environ["MKCCL_SHARE_GPUS"] = "1"
    os.environ["MKCCL_MAX_CTAS"] = str((sms // 2 - 8) // 2 * 2)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def rank_streams(devices):
    """A new stream per rank, made one after another before the handles. Ranks sharing a GPU share
    its context, whose streams run over a few hardware queues; a rank's persistent kernel that
    waits for a peer must not sit in the queue ahead of that peer's work. Streams made in a row get
    queues of their own (what tests/common/rank_threads.cc does for the C++ tests); torch's pool
    streams, handed out as the threads ask, are not made so (a 3-rank run on GPUs [0, 1, 0] hung
    with them). Returns (torch streams, raw handles to destroy)."""
    cudart = torch.cuda.cudart()
    if not hasattr(cudart, "cudaStreamCreate"):
        return [torch.cuda.Stream(d) for d in devices], []
    out, raw = [], []
    for d in devices:
        with torch.cuda.device(d):
            h = ctypes.c_uint64(0)
            err = cudart.cudaStreamCreate(ctypes.addressof(h))
            assert int(err) == 0 and h.value, "cudaStreamCreate on GPU %d: error %s" % (d, err)
            raw.append(h.value)
            out.append(torch.cuda.ExternalStream(h.value, device=torch.device("cuda", d)))
    return out, raw


def destroy_streams(raw):
    for h in raw:
        torch.cuda.cudart().cudaStreamDestroy(h)


def two_devices():
    return [0, 1] if torch.cuda.device_count() >= 2 else [0, 0]


@pytest.fixture(scope="module")
def one_rank():
    torch.cuda.set_device(0)
    with mkccl.Communicator.from_unique_id(mkccl.get_unique_id(), 0, 1) as comm:
        yield comm


# ---- one rank ----------------------------------------------------------------------------------

@pytest.mark.parametrize("preallocate", [False, True])
def test_one_rank_every_op(one_rank, preallocate):
    failures = rank_checks.rank_main(one_rank, fresh_seed("one rank"), lambda: None, preallocate)
    assert not failures, "\n".join(failures)


def test_one_rank_custom_ops(one_rank):
    if mkccl.CUSTOM_OPS is None:
        pytest.skip("custom ops not registered: " + mkccl._torch_ops.REASON)
    failures = rank_checks.rank_main(one_rank, fresh_seed("custom ops"), lambda: None, False, use_custom_ops=True)
    assert not failures, "\n".join(failures)


def _tp_mlp(comm, x, w1, w2):
    h = comm.all_gather_gemm(x, w1)
    return comm.gemm_reduce_scatter(F.gelu(h), w2)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_traces_the_ops(one_rank, backend):
    if mkccl.CUSTOM_OPS not in ("fake", "abstract"):
        pytest.skip("torch %s: no torch.compile custom-op support (%s)" % (torch.__version__, mkccl.CUSTOM_OPS))
    torch._dynamo.reset()
    g = torch.Generator(device="cuda").manual_seed(fresh_seed("compile"))
    x = torch.randn(128, 256, device="cuda", generator=g).bfloat16()
    w1 = (torch.randn(512, 256, device="cuda", generator=g) / 16).bfloat16()
    w2 = (torch.randn(256, 512, device="cuda", generator=g) / 23).bfloat16()
    eager = _tp_mlp(one_rank, x, w1, w2)
    compiled = torch.compile(lambda x, a, b: _tp_mlp(one_rank, x, a, b), backend=backend, fullgraph=True)
    out = compiled(x, w1, w2)
    torch.cuda.synchronize()
    ref = F.linear(F.gelu(F.linear(x.float(), w1.float()).bfloat16()).float(), w2.float())
    assert (out.float() - ref).abs().max().item() <= 3e-2 * ref.abs().max().item()
    assert (out.float() - eager.float()).abs().max().item() <= 2e-2 * ref.abs().max().item()


def test_a_librarys_own_check_reaches_python(one_rank):
    lib = mkccl.load_library()
    x = torch.ones(4, device="cuda")
    res = lib.mkcclAllGather(x.data_ptr(), x.data_ptr(), 2 ** 62, int(mkccl.DataType.FLOAT32), one_rank.ptr,
                             torch.cuda.current_stream().cuda_stream)
    with pytest.raises(mkccl.MkcclError) as e:
        mkccl._errors.raise_for(lib, res, "mkcclAllGather", one_rank.ptr)
    assert e.value.result == mkccl.Result.INVALID_ARGUMENT and "too large" in e.value.message


def test_close_and_context_manager():
    comm = mkccl.Communicator.from_unique_id(mkccl.get_unique_id(), 0, 1)
    h = comm.handle
    assert mkccl.lookup(h) is comm and comm.async_error() == mkccl.Result.SUCCESS
    comm.close()
    comm.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        comm.all_reduce(torch.ones(4, device="cuda"))
    with pytest.raises(ValueError, match="no open communicator"):
        torch.ops.mkccl.all_reduce(torch.ones(4, device="cuda"), h, 0) if mkccl.CUSTOM_OPS else mkccl.lookup(h)
    with pytest.raises(ZeroDivisionError):
        with mkccl.Communicator.from_unique_id(mkccl.get_unique_id(), 0, 1) as c2:
            1 / 0
    assert c2.closed  # aborted on the way out


def test_config_and_non_blocking_init():
    comm = mkccl.Communicator.from_unique_id(mkccl.get_unique_id(), 0, 1,
                                             config={"blocking": False, "timeout_ms": 20000, "max_ctas": 16})
    try:
        deadline = time.time() + 60
        while comm.async_error() == mkccl.Result.IN_PROGRESS and time.time() < deadline:
            time.sleep(0.01)
        assert comm.async_error() == mkccl.Result.SUCCESS
        x = torch.randn(1000, device="cuda")
        assert torch.equal(comm.all_reduce(x), x)
    finally:
        comm.close()


# ---- two ranks in one process ------------------------------------------------------------------

def _threads(comms, fn):
    """fn(comm, barrier) on a thread per rank; returns the failures of all ranks."""
    barrier = threading.Barrier(len(comms), timeout=600)
    results = [None] * len(comms)

    def run(i):
        try:
            torch.cuda.set_device(comms[i].device)
            results[i] = fn(comms[i], barrier.wait)
        except Exception:
            results[i] = ["rank %d raised:\n%s" % (i, traceback.format_exc())]
            barrier.abort()

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(comms))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return [f for r in results for f in (r or [])]


@pytest.mark.parametrize("custom", [False, True])
def test_two_ranks_in_one_process(custom):
    if custom and mkccl.CUSTOM_OPS is None:
        pytest.skip("custom ops not registered")
    devs = two_devices()
    with shared_gpus(devs):
        comms = mkccl.init_all(devs)
    try:
        seed = fresh_seed("two ranks in one process on GPUs %s" % devs)
        failures = _threads(comms, lambda c, b: rank_checks.rank_main(c, seed, b, True, use_custom_ops=custom))
    finally:
        for c in comms:
            c.close()
    assert not failures, "\n".join(failures)


# ---- the Ex calls (mkccl.fused) ------------------------------------------------------------------

def _ex_inputs(devices, seed):
    """Per rank: a as a strided view (row pitch K + 8), two weights as row slices of one stacked
    tensor, fp32 biases; for GEMM+RS/AR an A [M, K] and W [N, K] of its own and one bias shared by
    every rank (added once to the reduced sum). M rows per rank not a multiple of 128."""
    g = torch.Generator().manual_seed(seed)
    n, m, K, Ns = len(devices), 96, 200, (136, 72)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).bfloat16()

    bias_rs = torch.randn(Ns[0], generator=g)
    per = []
    for r in range(n):
        dev = torch.device("cuda", devices[r])
        big = rnd(m, K + 8).to(dev)
        stack = rnd(Ns[0] + Ns[1] + 8, K, scale=K ** -0.5).to(dev)
        per.append(dict(dev=dev, a=big[:, :K], ws=[stack[:Ns[0]], stack[Ns[0]:Ns[0] + Ns[1]]],
                        biases=[torch.randn(N, generator=g).to(dev) for N in Ns],
                        a_rs=rnd(m * n, K).to(dev), w_rs=rnd(Ns[0], K, scale=K ** -0.5).to(dev),
                        bias_rs=bias_rs.to(dev)))
    return per, m, K, Ns


def _ex_rank(comm, wait, per):
    """The three Ex calls on this rank against fp32 torch on the CPU; returns the failures."""
    r, n = comm.rank, comm.size
    p = per[r]
    m, N0 = p["a"].shape[0], p["ws"][0].shape[0]
    fails = []
    gathered = torch.full((m * n, p["a"].shape[1]), float("nan"), dtype=torch.bfloat16, device=p["dev"])
    wide = torch.full((m * n, N0 + 8), float("nan"), dtype=torch.bfloat16, device=p["dev"])
    torch.cuda.synchronize(p["dev"])
    wait()  # nothing but libmkccl calls while a peer may wait
    f32 = mkccl.fused.all_gather_gemm_ex(comm, p["a"], p["ws"], biases=p["biases"], out_dtype=torch.float32,
                                         gathered=gathered)
    mkccl.fused.all_gather_gemm_ex(comm, p["a"], p["ws"][:1], outs=[wide[:, :N0]])
    rs = mkccl.fused.gemm_reduce_scatter_ex(comm, p["a_rs"], p["w_rs"], bias=p["bias_rs"], out_dtype=torch.float32)
    ar = mkccl.fused.gemm_all_reduce_ex(comm, p["a_rs"], p["w_rs"], bias=p["bias_rs"])
    torch.cuda.synchronize(p["dev"])
    wait()
    full_a = torch.cat([q["a"].cpu().float() for q in per])
    if not torch.equal(gathered.cpu().float(), full_a):
        fails.append("rank %d: all_gather_gemm_ex's gathered A differs from the shards" % r)
    for i, (w, b) in enumerate(zip(p["ws"], p["biases"])):
        ref = full_a @ w.cpu().float().t() + b.cpu()
        e = rank_checks.rel_err(f32[i], ref)
        if not e <= 5e-3:
            fails.append("rank %d: all_gather_gemm_ex weight %d (fp32 out, bias) rel err %.3g" % (r, i, e))
    ref = full_a @ p["ws"][0].cpu().float().t()
    e = rank_checks.rel_err(wide[:, :N0], ref)
    if not e <= 1e-2 or not torch.isnan(wide[:, N0:].float()).all().item():
        fails.append("rank %d: all_gather_gemm_ex into a strided bf16 out: rel err %.3g, or columns past N written"
                     % (r, e))
    summed = sum(q["a_rs"].cpu().float() @ q["w_rs"].cpu().float().t() for q in per) + p["bias_rs"].cpu()
    e = rank_checks.rel_err(rs, summed[r * m:(r + 1) * m])
    if not e <= 5e-3:
        fails.append("rank %d: gemm_reduce_scatter_ex (fp32 out, bias) rel err %.3g" % (r, e))
    e = rank_checks.rel_err(ar, summed)
    if not e <= 1e-2:
        fails.append("rank %d: gemm_all_reduce_ex (bf16 out, bias) rel err %.3g" % (r, e))
    return fails


def test_ex_calls_one_rank(one_rank):
    per, _, _, _ = _ex_inputs([0], fresh_seed("Ex calls, one rank"))
    fails = _ex_rank(one_rank, lambda: None, per)
    assert not fails, "\n".join(fails)


def test_ex_calls_two_ranks_in_one_process():
    devs = two_devices()
    with shared_gpus(devs):
        comms = mkccl.init_all(devs)
    streams, raw = rank_streams(devs)
    try:
        per, _, _, _ = _ex_inputs(devs, fresh_seed("Ex calls, two ranks on GPUs %s" % devs))

        def rank(c, b):
            with torch.cuda.stream(streams[c.rank]):
                return _ex_rank(c, b, per)
        failures = _threads(comms, rank)
    finally:
        for c in comms:
            c.close()
        destroy_streams(raw)
    assert not failures, "\n".join(failures)


# ---- async error, abort ------------------------------------------------------------------------

def test_a_missing_peer_times_out_into_the_async_error():
    devs = two_devices()
    os.environ["MKCCL_TIMEOUT_MS"] = "3000"
    try:
        with shared_gpus(devs):
            comms = mkccl.init_all(devs)
    finally:
        os.environ["MKCCL_TIMEOUT_MS"] = "30000"
    try:
        torch.cuda.set_device(comms[0].device)
        x = torch.ones(1 << 16, device=comms[0].device)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            comms[0].all_reduce(x)  # rank 1 never calls: rank 0's kernel gives up after the timeout
        t0 = time.time()
        s.synchronize()
        assert time.time() - t0 < 60
        deadline = time.time() + 30
        while comms[0].async_error() == mkccl.Result.SUCCESS and time.time() < deadline:
            time.sleep(0.1)
        assert comms[0].async_error() in (mkccl.Result.TIMEOUT, mkccl.Result.REMOTE_ERROR)
        with pytest.raises(mkccl.MkcclError) as e:
            comms[0].check()
        assert e.value.result in (mkccl.Result.TIMEOUT, mkccl.Result.REMOTE_ERROR)
        with pytest.raises(mkccl.MkcclError):
            with torch.cuda.stream(s):
                comms[0].all_reduce(x)
    finally:
        for c in comms:
            c.abort()
    assert all(c.closed for c in comms)


def test_cuda_graph_capture(one_rank):
    """A call captured in a torch CUDA graph, replayed several times on fresh inputs (docs/GRAPHS.md);
    last of the one-process tests."""
    x = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        one_rank.all_reduce(x, out=out)  # warm-up outside the capture
        with torch.cuda.graph(graph, stream=s):
            one_rank.all_reduce(x, out=out)
    for _ in range(3):
        x.copy_(torch.randn(4096, device="cuda"))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, x)


# ---- two processes -----------------------------------------------------------------------------

def test_two_processes_from_a_gloo_group(tmp_path):
    import multiprocessing as mp

    devs = two_devices()
    seed = fresh_seed("two processes on GPUs %s" % devs)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = "file://" + str(tmp_path / "rendezvous")
    procs = [ctx.Process(target=rank_checks.process_main, args=(r, 2, devs[r], init, seed, q, devs))
             for r in range(2)]
    for p in procs:
        p.start()
    results, deadline = {}, time.time() + 300
    while len(results) < 2 and time.time() < deadline:
        try:
            r, fails = q.get(timeout=5)
            results[r] = fails
        except Exception:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    assert len(results) == 2, "ranks that reported: %s; exit codes %s" % (sorted(results),
                                                                        [p.exitcode for p in procs])
    failures = results[0] + results[1]
    assert not failures, "\n".join(failures)
