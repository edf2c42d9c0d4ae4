"""What the examples share: starting one process per rank, the process groups, and timing.

Ranks get GPUs round-robin. With more ranks than GPUs they share (MKCCL_SHARE_GPUS=1, a testing
aid): results are checked, but timings mean nothing and the NCCL baselines do not run (NCCL
refuses two ranks on one GPU), so torch.distributed then uses gloo.
"""
import os
import socket
import statistics
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # the package from the source tree

# Never NVLink multicast (the project's rule); set before any library reads them.
for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(k, v)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(main, nprocs, args):
    """main(rank, world, args) in nprocs processes (torch.multiprocessing.spawn)."""
    ngpu = torch.cuda.device_count()
    if ngpu == 0:
        sys.exit("no CUDA device")
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(_entry, args=(nprocs, main, args), nprocs=nprocs, join=True)


def _entry(rank, world, main, args):
    ngpu = torch.cuda.device_count()
    shared = world > ngpu
    if shared:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        os.environ["MKCCL_SHARE_GPUS"] = "1"
        os.environ["MKCCL_MAX_CTAS"] = str((sms // 2 - 8) // 2 * 2)
    torch.cuda.set_device(rank % ngpu)
    dist.init_process_group("gloo" if shared else "nccl", rank=rank, world_size=world,
                            device_id=None if shared else torch.device("cuda", rank % ngpu))
    try:
        main(rank, world, shared, args)
    finally:
        dist.barrier()
        dist.destroy_process_group()


def time_us(fn, iters=20, warmup=5):
    """Median time of fn() in microseconds: CUDA events around each call, after warm-up, with the
    ranks aligned by a barrier before the loop."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def rel_err(out, ref):
    ref = ref.float()
    return ((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()


def max_over_ranks(v):
    t = torch.tensor([float(v)], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()
