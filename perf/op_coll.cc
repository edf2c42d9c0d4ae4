// mkccl-perf ops: allgather, reducescatter, allreduce, alltoall (libmkccl against NCCL).
//
// Sizes are total bytes as in nccl-tests (allgather: the gathered output; reducescatter and
// alltoall: the input; allreduce: the buffer), rounded down to a whole number of elements per
// rank. Each size: a checked run on fresh inputs (poisoned output), then the timed runs rotating
// over several input/output buffer sets; the same for NCCL on the same buffers.
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "coll_data.h"
#include "nccl_loader.h"
#include "perf.h"

namespace mkccl {
namespace perf {
namespace {

struct Bufs {
  std::vector<void*> send, recv;
  ~Bufs() {
    for (void* p : send) cudaFree(p);
    for (void* p : recv) cudaFree(p);
  }
};

// Per-rank element counts of a collective of `size` total bytes.
struct Counts {
  size_t count = 0;  // the API's count argument
  size_t sendElems = 0, recvElems = 0;
};

Counts countsOf(CollKind kind, size_t size, size_t ts, int n) {
  Counts c;
  switch (kind) {
    case CollKind::AllReduce:
      c.count = size / ts;
      c.sendElems = c.recvElems = c.count;
      break;
    case CollKind::AllGather:
      c.count = size / ts / n;
      c.sendElems = c.count;
      c.recvElems = c.count * n;
      break;
    case CollKind::ReduceScatter:
      c.count = size / ts / n;
      c.sendElems = c.count * n;
      c.recvElems = c.count;
      break;
    case CollKind::AllToAll:
      c.count = size / ts / n;
      c.sendElems = c.recvElems = c.count * n;
      break;
  }
  return c;
}

const char* opName(CollKind k) {
  switch (k) {
    case CollKind::AllGather: return "allgather";
    case CollKind::ReduceScatter: return "reducescatter";
    case CollKind::AllReduce: return "allreduce";
    default: return "alltoall";
  }
}

bool isReduction(CollKind k) { return k == CollKind::ReduceScatter || k == CollKind::AllReduce; }

mkcclResult_t runOurs(CollKind k, const void* s, void* r, size_t count, const Args& a, const Env& env) {
  switch (k) {
    case CollKind::AllGather: return mkcclAllGather(s, r, count, a.dtype, env.comm, env.stream);
    case CollKind::ReduceScatter: return mkcclReduceScatter(s, r, count, a.dtype, a.redop, env.comm, env.stream);
    case CollKind::AllReduce: return mkcclAllReduce(s, r, count, a.dtype, a.redop, env.comm, env.stream);
    default: return mkcclAllToAll(s, r, count, a.dtype, env.comm, env.stream);
  }
}

ncclResult_t runNccl(CollKind k, const void* s, void* r, size_t count, const Args& a, const Env& env) {
  const Nccl& n = *env.nccl;
  ncclComm_t c = static_cast<ncclComm_t>(env.ncclComm);
  const int t = ncclType(a.dtype), op = ncclOp(a.redop);
  switch (k) {
    case CollKind::AllGather: return n.allGather(s, r, count, t, c, env.stream);
    case CollKind::ReduceScatter: return n.reduceScatter(s, r, count, t, op, c, env.stream);
    case CollKind::AllReduce: return n.allReduce(s, r, count, t, op, c, env.stream);
    default: {
      const size_t bytes = count * dtypeSize(a.dtype);
      ncclResult_t res = n.groupStart();
      for (int p = 0; p < env.nranks && res == 0; ++p) {
        res = n.send(static_cast<const char*>(s) + p * bytes, count, t, p, c, env.stream);
        if (res == 0) res = n.recv(static_cast<char*>(r) + p * bytes, count, t, p, c, env.stream);
      }
      const ncclResult_t e = n.groupEnd();
      return res ? res : e;
    }
  }
}

// Buffers from mkcclMemAlloc, registered with the communicator for one size (-R).
struct RegBufs {
  mkcclComm_t comm = nullptr;
  std::vector<void*> mem, handles;
  ~RegBufs() {
    for (void* h : handles) mkcclCommDeregister(comm, h);
    for (void* p : mem) mkcclMemFree(p);
  }
  void* add(size_t bytes) {
    void* p = nullptr;
    void* h = nullptr;
    if (mkcclMemAlloc(&p, bytes) != mkcclSuccess) return nullptr;
    mem.push_back(p);
    if (mkcclCommRegister(comm, p, bytes, &h) != mkcclSuccess) return nullptr;
    handles.push_back(h);
    return p;
  }
};

// reg_us (and reg_graph_us with -G): our call on registered send and receive buffers, two sets
// rotating; the first set's result checked like the unregistered one.
int timeRegistered(CollKind kind, const Args& a, Env& env, const Counts& c, size_t size, Result* row) {
  const size_t ts = dtypeSize(a.dtype);
  const char* name = opName(kind);
  RegBufs rb;
  rb.comm = env.comm;
  void* s[2];
  void* r[2];
  for (int i = 0; i < 2; ++i) {
    s[i] = rb.add(c.sendElems * ts);
    r[i] = s[i] ? rb.add(c.recvElems * ts) : nullptr;
    if (!s[i] || !r[i]) {
      fprintf(stderr, "mkccl-perf %s: rank %d: registered buffers: %s\n", name, env.rank, mkcclGetLastError(env.comm));
      return 1;
    }
    fillInput(s[i], c.sendElems, a.dtype, a.seed + i, env.rank, 0, env.stream);
  }
  if (a.check) {
    cudaMemsetAsync(r[0], 0xff, c.recvElems * ts, env.stream);
    if (runOurs(kind, s[0], r[0], c.count, a, env) != mkcclSuccess) {
      fprintf(stderr, "mkccl-perf %s: rank %d: registered: %s\n", name, env.rank, mkcclGetLastError(env.comm));
      return 1;
    }
    CheckResult res;
    if (checkOutput(r[0], c.count, a.dtype, a.redop, kind, env.nranks, env.rank, a.seed, env.stream, &res, false) !=
        cudaSuccess)
      return 1;
    row->wrong += res.wrong;
    row->maxRelErr = std::max(row->maxRelErr, res.maxRelErr);
  }
  mkcclResult_t firstErr = mkcclSuccess;
  auto run = [&](int i) {
    const mkcclResult_t e = runOurs(kind, s[i % 2], r[i % 2], c.count, a, env);
    if (e != mkcclSuccess && firstErr == mkcclSuccess) firstErr = e;
  };
  const double us = timeMedianUs(run, a.warmup, a.iters, env.stream);
  const double gus = a.graphCalls > 0 ? timeGraphMedianUs(run, a.graphCalls, a.warmup, a.iters, env.stream) : 0;
  if (firstErr != mkcclSuccess || us < 0 || gus < 0) {
    fprintf(stderr, "mkccl-perf %s: rank %d: %zu bytes, registered: %s\n", name, env.rank, size,
            mkcclGetLastError(env.comm));
    return 1;
  }
  row->extra["reg_us"] = us;
  if (a.graphCalls > 0) row->extra["reg_graph_us"] = gus;
  return 0;
}

int runColl(CollKind kind, const Args& a, Env& env) {
  const int n = env.nranks;
  const size_t ts = dtypeSize(a.dtype);
  const char* name = opName(kind);
  if (isReduction(kind) && (a.dtype == mkcclFloat8e4m3 || a.dtype == mkcclFloat8e5m2)) {
    fprintf(stderr, "mkccl-perf %s: reductions on fp8 are not supported\n", name);
    return 1;
  }
  const size_t unit = ts * (kind == CollKind::AllReduce ? 1 : n);
  std::vector<size_t> sizes;
  for (double s = (double)a.minBytes; s <= (double)a.maxBytes * (1 + 1e-12); s *= a.factor) {
    const size_t sz = (size_t)s / unit * unit;
    if (sz > 0 && (sizes.empty() || sz != sizes.back())) sizes.push_back(sz);
  }
  if (sizes.empty()) {
    if (env.rank == 0)
      fprintf(stderr, "mkccl-perf %s: no size in [%zu, %zu] holds a whole element per rank (%zu bytes)\n", name,
              a.minBytes, a.maxBytes, unit);
    return 1;
  }

  // Buffer sets to rotate over: several while they are small, fewer as they grow (4 GiB budget).
  const Counts big = countsOf(kind, sizes.back(), ts, n);
  const size_t footprint = (big.sendElems + big.recvElems) * ts;
  const int sets = (int)std::max<size_t>(1, std::min<size_t>(4, (4ull << 30) / std::max<size_t>(footprint, 1)));
  Bufs b;
  for (int i = 0; i < sets; ++i) {
    void *s = nullptr, *r = nullptr;
    if (cudaMalloc(&s, big.sendElems * ts) != cudaSuccess || cudaMalloc(&r, big.recvElems * ts) != cudaSuccess) {
      fprintf(stderr, "mkccl-perf %s: rank %d: cannot allocate %zu bytes of buffers\n", name, env.rank, footprint);
      if (s) cudaFree(s);
      return 1;
    }
    b.send.push_back(s);
    b.recv.push_back(r);
  }

  for (size_t size : sizes) {
    const Counts c = countsOf(kind, size, ts, n);
    Result row;
    row.op = name;
    row.worldSize = n;
    row.dtype = dtypeName(a.dtype);
    row.bytes = size;
    row.count = size / ts;
    row.busFactor = kind == CollKind::AllReduce ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
    if (isReduction(kind)) row.redop = redopName(a.redop);
    // Set i holds the inputs of seed + i (set 0: the checked one).
    for (int i = 0; i < sets; ++i) fillInput(b.send[i], c.sendElems, a.dtype, a.seed + i, env.rank, 0, env.stream);

    auto check = [&](bool ours, CheckResult* res) -> bool {
      cudaMemsetAsync(b.recv[0], 0xff, c.recvElems * ts, env.stream);
      if (ours) {
        const mkcclResult_t e = runOurs(kind, b.send[0], b.recv[0], c.count, a, env);
        if (e != mkcclSuccess) {
          fprintf(stderr, "mkccl-perf %s: rank %d: %s\n", name, env.rank, mkcclGetLastError(env.comm));
          return false;
        }
      } else if (runNccl(kind, b.send[0], b.recv[0], c.count, a, env) != 0) {
        return false;
      }
      // NCCL reduces 16-bit types in the type itself, rounding after every addition: its results
      // are checked against the tolerance of that (ours are fp32-accumulated: one rounding).
      const cudaError_t e =
          checkOutput(b.recv[0], c.count, a.dtype, a.redop, kind, n, env.rank, a.seed, env.stream, res, !ours);
      if (e != cudaSuccess) {
        fprintf(stderr, "mkccl-perf %s: rank %d: check failed: %s\n", name, env.rank, cudaGetErrorString(e));
        return false;
      }
      return true;
    };

    // Ours.
    if (a.check) {
      CheckResult res;
      if (!check(true, &res)) return 1;
      row.wrong = res.wrong;
      row.maxRelErr = res.maxRelErr;
    }
    mkcclResult_t firstErr = mkcclSuccess;
    row.timeUs = timeMedianUs(
        [&](int i) {
          const mkcclResult_t e = runOurs(kind, b.send[i % sets], b.recv[i % sets], c.count, a, env);
          if (e != mkcclSuccess && firstErr == mkcclSuccess) firstErr = e;
        },
        a.warmup, a.iters, env.stream);
    mkcclResult_t async = mkcclSuccess;
    mkcclCommGetAsyncError(env.comm, &async);
    if (firstErr != mkcclSuccess || async != mkcclSuccess || row.timeUs < 0) {
      fprintf(stderr, "mkccl-perf %s: rank %d: %zu bytes: %s\n", name, env.rank, size, mkcclGetLastError(env.comm));
      return 1;
    }

    // -G: the same calls captured in a CUDA graph and replayed.
    if (a.graphCalls > 0) {
      firstErr = mkcclSuccess;
      const double g = timeGraphMedianUs(
          [&](int i) {
            const mkcclResult_t e = runOurs(kind, b.send[i % sets], b.recv[i % sets], c.count, a, env);
            if (e != mkcclSuccess && firstErr == mkcclSuccess) firstErr = e;
          },
          a.graphCalls, a.warmup, a.iters, env.stream);
      if (firstErr != mkcclSuccess || g < 0) {
        fprintf(stderr, "mkccl-perf %s: rank %d: %zu bytes, graph: %s\n", name, env.rank, size,
                mkcclGetLastError(env.comm));
        return 1;
      }
      row.extra["graph_us"] = g;
    }
    // -R: registered buffers (mkcclMemAlloc + mkcclCommRegister), checked, timed (and graphed).
    if (a.registered) {
      if (int e = timeRegistered(kind, a, env, c, size, &row)) return e;
    }

    // The baseline on the same buffers.
    if (env.nccl) {
      row.baseline = "nccl";
      bool ok = true;
      if (a.check) {
        CheckResult res;
        ok = check(false, &res);
        if (ok && res.wrong) row.note = "nccl_wrong=" + std::to_string(res.wrong);
      }
      int ncclErr = 0;
      if (ok)
        row.baselineTimeUs = timeMedianUs(
            [&](int i) {
              const int e = runNccl(kind, b.send[i % sets], b.recv[i % sets], c.count, a, env);
              if (e && !ncclErr) ncclErr = e;
            },
            a.warmup, a.iters, env.stream);
      if (!ok || ncclErr) {
        row.baselineTimeUs = -1;
        row.note = std::string("nccl failed") + (ncclErr ? std::string(": ") + env.nccl->err(ncclErr) : "");
      }
    }
    env.emit(row);
  }
  return 0;
}

int allGatherOp(const Args& a, Env& env, std::vector<Result>*) { return runColl(CollKind::AllGather, a, env); }
int reduceScatterOp(const Args& a, Env& env, std::vector<Result>*) { return runColl(CollKind::ReduceScatter, a, env); }
int allReduceOp(const Args& a, Env& env, std::vector<Result>*) { return runColl(CollKind::AllReduce, a, env); }
int allToAllOp(const Args& a, Env& env, std::vector<Result>*) { return runColl(CollKind::AllToAll, a, env); }

}  // namespace

MKCCL_PERF_OP("allgather", allGatherOp, "mkcclAllGather vs ncclAllGather");
MKCCL_PERF_OP("reducescatter", reduceScatterOp, "mkcclReduceScatter vs ncclReduceScatter");
MKCCL_PERF_OP("allreduce", allReduceOp, "mkcclAllReduce vs ncclAllReduce");
MKCCL_PERF_OP("alltoall", allToAllOp, "mkcclAllToAll vs NCCL grouped send/recv");

}  // namespace perf
}  // namespace mkccl
