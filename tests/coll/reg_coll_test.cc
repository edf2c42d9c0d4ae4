// GPU tests of the collectives over registered buffers (mkcclMemAlloc + mkcclCommRegister,
// kernels/coll/coll_direct.cuh): AllGather, ReduceScatter, AllReduce, AllToAll and AllToAllv, each
// run on registered buffers and on unregistered ones (cudaMalloc) with the same inputs, both
// outputs poisoned, both checked on the GPU against an fp64 / exact reference (perf/coll_data.cu)
// and the copy kinds' two outputs against each other byte for byte. Under coll.direct=on every
// size takes the in-place path (odd counts, one element, blocks of any alignment); under auto the
// sizes lie on both sides of the cut (coll.direct_bytes). Each rank uses its own offset inside the
// registrations (the peers learn it from the kernel's entry words); rank 2's is only 8-byte
// aligned, so the 3- and 4-rank worlds also run the narrow (unvectorised) copies and reductions.
// Also: captured registered calls replayed with fresh inputs, interleaved with eager unregistered
// calls; and ranks that disagree (one rank unregistered, AllToAllv counts that do not match) end
// with an error on every rank within the timeout instead of a hang or a wrong result.
// Ranks: 2, 3 and 4 sharing GPU 0 (or spread over two GPUs), one thread each: correctness only.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>
#include "coll_data.h"
#include "rank_inputs.h"
#include "rank_threads.h"
#include "test_util.h"

namespace mkccl {
namespace test {
namespace {

enum class Coll { AllReduce, ReduceScatter, AllGather, AllToAll };

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AllGather: return "AllGather";
    default: return "AllToAll";
  }
}
perf::CollKind kindOf(Coll c) {
  switch (c) {
    case Coll::AllReduce: return perf::CollKind::AllReduce;
    case Coll::ReduceScatter: return perf::CollKind::ReduceScatter;
    case Coll::AllGather: return perf::CollKind::AllGather;
    default: return perf::CollKind::AllToAll;
  }
}

struct Case {
  Coll coll;
  mkcclDataType_t t;
  mkcclRedOp_t op;
  size_t count;
  bool inPlace;
  size_t sendElems(int n) const { return coll == Coll::ReduceScatter || coll == Coll::AllToAll ? count * n : count; }
  size_t recvElems(int n) const { return coll == Coll::AllGather || coll == Coll::AllToAll ? count * n : count; }
  std::string label(int n) const {
    return std::string(collName(coll)) + " type " + std::to_string((int)t) + " op " + std::to_string((int)op) +
           " count " + std::to_string(count) + (inPlace ? " in place" : "") + " ranks " + std::to_string(n);
  }
};

// Sizes around the cut (1 MiB per block between two ranks): below, at about, above; odd counts.
std::vector<Case> cases(int n) {
  std::vector<Case> v;
  const size_t MiB = 1 << 20;
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat16, mkcclFloat32}) {
    const size_t ts = typeBytes(t);
    for (size_t c : {(size_t)1, (size_t)1001, 64 * 1024 / ts + 3, MiB / ts + 3, 3 * MiB / ts + 5})
      for (bool ip : {false, true}) v.push_back({Coll::ReduceScatter, t, mkcclSum, c, ip});
    // AllReduce: the block is a rank's slice, count / n.
    for (size_t c : {(size_t)1, (size_t)4099, 256 * 1024 / ts + 1, n * MiB / ts + 7, 2 * n * MiB / ts + 1001})
      for (bool ip : {false, true}) v.push_back({Coll::AllReduce, t, mkcclSum, c, ip});
  }
  for (mkcclRedOp_t op : {mkcclProd, mkcclMax, mkcclMin, mkcclAvg}) {
    v.push_back({Coll::AllReduce, mkcclFloat32, op, n * MiB / 4 + 5, false});
    v.push_back({Coll::ReduceScatter, mkcclBfloat16, op, MiB / 2 + 1, false});
  }
  for (mkcclDataType_t t : {mkcclFloat64, mkcclInt8, mkcclUint8, mkcclInt32, mkcclUint32, mkcclInt64, mkcclUint64}) {
    const size_t ts = typeBytes(t);
    v.push_back({Coll::AllReduce, t, mkcclSum, 1001, false});
    v.push_back({Coll::AllReduce, t, mkcclMax, n * MiB / ts + 3, true});
    v.push_back({Coll::ReduceScatter, t, mkcclSum, MiB / ts + 1, false});
  }
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32, mkcclInt8}) {
    const size_t ts = typeBytes(t);
    for (size_t c : {(size_t)1, (size_t)1001, 4096 / ts, MiB / ts, MiB / ts + 16 / ts, 3 * MiB / ts + 3}) {
      v.push_back({Coll::AllGather, t, mkcclSum, c, false});
      v.push_back({Coll::AllGather, t, mkcclSum, c, true});
      v.push_back({Coll::AllToAll, t, mkcclSum, c, false});
    }
  }
  return v;
}

std::string callError(mkcclComm_t c, mkcclResult_t res, const char* what) {
  return std::string(what) + " returned " + mkcclGetErrorString(res) + ": " + mkcclGetLastError(c);
}

std::string finish(mkcclComm_t c, cudaStream_t s) {
  const cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) return std::string("stream: ") + cudaGetErrorString(e);
  mkcclResult_t async = mkcclSuccess;
  mkcclCommGetAsyncError(c, &async);
  if (async != mkcclSuccess) return std::string("async error: ") + mkcclGetLastError(c);
  return "";
}

// One rank's buffers: registered (from mkcclMemAlloc, at a rank-dependent offset inside the
// registration) and plain.
struct RankBufs {
  void* regMem[2] = {nullptr, nullptr};
  void* handle[2] = {nullptr, nullptr};
  char* reg[2] = {nullptr, nullptr};  // send, recv: inside the registrations
  void* plain[2] = {nullptr, nullptr};
};

// Enqueues case c on buffers (send, recv) with the inputs of seed; returns the output pointer.
mkcclResult_t enqueue(const Case& c, int rank, int n, uint64_t seed, char* send, char* recv, mkcclComm_t comm,
                      cudaStream_t s, void** out) {
  const size_t bytes = c.count * typeBytes(c.t);
  *out = recv;
  switch (c.coll) {
    case Coll::AllReduce:
      perf::fillInput(send, c.count, c.t, seed, rank, 0, s);
      if (c.inPlace) *out = send;
      else poison(recv, bytes, s);
      return mkcclAllReduce(send, *out, c.count, c.t, c.op, comm, s);
    case Coll::ReduceScatter:
      perf::fillInput(send, c.count * n, c.t, seed, rank, 0, s);
      if (c.inPlace) *out = send + (size_t)rank * bytes;
      else poison(recv, bytes, s);
      return mkcclReduceScatter(send, *out, c.count, c.t, c.op, comm, s);
    case Coll::AllGather:
      poison(recv, bytes * n, s);
      if (c.inPlace) send = recv + (size_t)rank * bytes;
      perf::fillInput(send, c.count, c.t, seed, rank, 0, s);
      return mkcclAllGather(send, recv, c.count, c.t, comm, s);
    default:
      perf::fillInput(send, c.count * n, c.t, seed, rank, 0, s);
      poison(recv, bytes * n, s);
      return mkcclAllToAll(send, recv, c.count, c.t, comm, s);
  }
}

std::string check(const Case& c, int rank, int n, uint64_t seed, const void* out, cudaStream_t s) {
  perf::CheckResult chk;
  const cudaError_t e = perf::checkOutput(out, c.count, c.t, c.op, kindOf(c.coll), n, rank, seed, s, &chk);
  if (e != cudaSuccess) return std::string("check kernel: ") + cudaGetErrorString(e);
  if (chk.wrong)
    return std::to_string(chk.wrong) + " of " + std::to_string(c.recvElems(n)) + " elements wrong (max rel err " +
           std::to_string(chk.maxRelErr) + ")";
  return "";
}

// The ranks of one world, with registered and plain buffers of the given sizes on every rank.
struct RegWorld {
  std::unique_ptr<SharedGpus> share;
  std::unique_ptr<InProcessRanks> ranks;
  std::unique_ptr<HostBarrier> barrier;
  std::vector<RankBufs> bufs;
  size_t sendBytes = 0, recvBytes = 0;
  std::string setupError;

  RegWorld(const std::vector<int>& devs, size_t sendB, size_t recvB) : sendBytes(sendB), recvBytes(recvB) {
    if (gpusOf(devs) < int(devs.size())) share.reset(new SharedGpus(devs));
    ranks.reset(new InProcessRanks(devs));
    barrier.reset(new HostBarrier(int(devs.size())));
    bufs.resize(devs.size());
    if (!ranks->ok()) return;
    std::vector<std::string> errs(devs.size());
    ranks->onEveryRank([&](int r) {
      RankBufs& b = bufs[r];
      const size_t off = 256 * (size_t)(r % 2) + (r == 2 ? 8 : 0);  // the ranks' buffers at different offsets
      const size_t sizes[2] = {sendBytes, recvBytes};
      for (int i = 0; i < 2; ++i) {
        mkcclResult_t e = mkcclMemAlloc(&b.regMem[i], sizes[i] + 512);
        if (e == mkcclSuccess) e = mkcclCommRegister(ranks->comms[r], b.regMem[i], sizes[i] + 512, &b.handle[i]);
        if (e != mkcclSuccess) errs[r] = callError(ranks->comms[r], e, "registering");
        b.reg[i] = static_cast<char*>(b.regMem[i]) + off;
        if (cudaMalloc(&b.plain[i], sizes[i]) != cudaSuccess) errs[r] = "cudaMalloc";
      }
    });
    for (auto& e : errs)
      if (!e.empty()) setupError = e;
  }
  ~RegWorld() {
    if (ranks && ranks->ok())
      ranks->onEveryRank([&](int r) {
        cudaStreamSynchronize(ranks->streams[r]);
        for (int i = 0; i < 2; ++i) {
          if (bufs[r].handle[i]) EXPECT_EQ(mkcclSuccess, mkcclCommDeregister(ranks->comms[r], bufs[r].handle[i]));
          if (bufs[r].regMem[i]) EXPECT_EQ(mkcclSuccess, mkcclMemFree(bufs[r].regMem[i]));
          cudaFree(bufs[r].plain[i]);
        }
      });
    ranks.reset();
    share.reset();
  }
  int n() const { return ranks->size(); }
};

size_t maxBytes(const std::vector<Case>& v, int n, bool send) {
  size_t m = 16;
  for (const Case& c : v) m = std::max(m, (send ? c.sendElems(n) : c.recvElems(n)) * typeBytes(c.t));
  return m;
}

std::string label(const std::vector<int>& devs) {
  std::string s = "devices";
  for (int d : devs) s += " " + std::to_string(d);
  return s;
}

std::vector<std::vector<int>> worlds() {
  std::vector<std::vector<int>> w = sharedGpuWorlds();
  if (gpuCount() >= 2) w.insert(w.begin(), std::vector<int>{0, 1});
  return w;
}

// Every case registered and unregistered, under coll.direct=on and auto.
TEST(RegColl, MatchesUnregisteredAndReference) {
  MKCCL_REQUIRE_GPUS(1);
  for (const std::vector<int>& devs : worlds()) {
    SCOPED_TRACE(label(devs));
    const int n = int(devs.size());
    const std::vector<Case> v = cases(n);
    RegWorld w(devs, maxBytes(v, n, true), maxBytes(v, n, false));
    ASSERT_TRUE(w.ranks->ok());
    ASSERT_EQ("", w.setupError);
    const uint64_t base = freshSeed();
    SCOPED_TRACE("seed " + std::to_string(base));
    std::vector<std::string> errs(n);
    w.ranks->onEveryRank([&](int r) {
      mkcclComm_t comm = w.ranks->comms[r];
      cudaStream_t s = w.ranks->streams[r];
      RankBufs& b = w.bufs[r];
      int nerr = 0;
      for (const char* mode : {"coll.direct=on", "coll.direct=auto"}) {
        w.barrier->wait();
        const mkcclResult_t tr = mkcclSetTuning(comm, mode);
        if (tr != mkcclSuccess) {
          errs[r] += callError(comm, tr, "mkcclSetTuning");
          return;
        }
        w.barrier->wait();
        for (size_t k = 0; k < v.size(); ++k) {
          const Case& c = v[k];
          const uint64_t seed = base ^ (0x9e3779b97f4a7c15ull * (k + 1)) ^ (mode[12] == 'o' ? 0 : 0x5555);
          void* outReg = nullptr;
          void* outPlain = nullptr;
          mkcclResult_t res = enqueue(c, r, n, seed, b.reg[0], b.reg[1], comm, s, &outReg);
          if (res != mkcclSuccess) {
            errs[r] += "\n  " + c.label(n) + " registered: " + callError(comm, res, collName(c.coll));
            return;
          }
          std::string e = finish(comm, s);
          if (e.empty()) e = check(c, r, n, seed, outReg, s);
          // The unregistered run after the registered one has been checked: it overwrites nothing of it.
          if (e.empty()) {
            res = enqueue(c, r, n, seed, static_cast<char*>(b.plain[0]), static_cast<char*>(b.plain[1]), comm, s,
                          &outPlain);
            if (res != mkcclSuccess) {
              errs[r] += "\n  " + c.label(n) + " unregistered: " + callError(comm, res, collName(c.coll));
              return;
            }
            e = finish(comm, s);
            if (e.empty()) e = check(c, r, n, seed, outPlain, s);
            if (e.empty() && (c.coll == Coll::AllGather || c.coll == Coll::AllToAll)) {
              const size_t ob = c.recvElems(n) * typeBytes(c.t);
              const Bytes x = toHost(outReg, ob, s), y = toHost(outPlain, ob, s);
              e = checkSame(x.data(), y.data(), ob, "registered vs unregistered");
            }
          } else {
            e = "registered: " + e;
          }
          if (!e.empty() && ++nerr <= 5) errs[r] += "\n  " + std::string(mode) + " " + c.label(n) + ": " + e;
          if (e.find("async error") != std::string::npos) return;  // the communicator is gone
        }
      }
      mkcclSetTuning(comm, "");
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ("", errs[r]) << "rank " << r;
  }
}

// AllToAllv with uneven counts and gaps, registered send buffer (always in place), checked
// exactly on the host against what every peer sent.
TEST(RegColl, AllToAllvUneven) {
  MKCCL_REQUIRE_GPUS(1);
  for (const std::vector<int>& devs : worlds()) {
    SCOPED_TRACE(label(devs));
    const int n = int(devs.size());
    // counts[p][q]: elements p sends to q (int32), some 0, some large, odd; the last rank sends
    // nothing at all (it still takes part in place: its send pointer lies in the registration).
    auto count = [n](int p, int q) -> size_t {
      return p == n - 1 || (p + 2 * q) % 3 == 0 ? 0 : (size_t)(1 + p) * 100003 + q * 7;
    };
    auto value = [](int p, int q, size_t i) { return (int32_t)((p << 28) ^ (q << 24) ^ (int32_t)(i * 2654435761u)); };
    size_t sendMax = 0, recvMax = 0;
    for (int p = 0; p < n; ++p) {
      size_t sT = 0, rT = 0;
      for (int q = 0; q < n; ++q) sT += count(p, q) + 5, rT += count(q, p) + 3;
      sendMax = std::max(sendMax, sT * 4), recvMax = std::max(recvMax, rT * 4);
    }
    RegWorld w(devs, sendMax, recvMax);
    ASSERT_TRUE(w.ranks->ok());
    ASSERT_EQ("", w.setupError);
    std::vector<std::string> errs(n);
    w.ranks->onEveryRank([&](int r) {
      mkcclComm_t comm = w.ranks->comms[r];
      cudaStream_t s = w.ranks->streams[r];
      std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
      size_t so = 0, ro = 0;
      std::vector<int32_t> host(sendMax / 4, -1);
      for (int q = 0; q < n; ++q) {
        sc[q] = count(r, q), sd[q] = so, so += sc[q] + 5;  // gaps of 5 and 3 elements
        rc[q] = count(q, r), rd[q] = ro, ro += rc[q] + 3;
        for (size_t i = 0; i < sc[q]; ++i) host[sd[q] + i] = value(r, q, i);
      }
      for (int reg = 1; reg >= 0; --reg) {
        char* send = reg ? w.bufs[r].reg[0] : static_cast<char*>(w.bufs[r].plain[0]);
        char* recv = reg ? w.bufs[r].reg[1] : static_cast<char*>(w.bufs[r].plain[1]);
        cudaMemcpyAsync(send, host.data(), so * 4, cudaMemcpyHostToDevice, s);
        poison(recv, ro * 4, s);
        mkcclResult_t res = mkcclAllToAllv(send, sc.data(), sd.data(), recv, rc.data(), rd.data(), mkcclInt32, comm, s);
        std::string e = res != mkcclSuccess ? callError(comm, res, "mkcclAllToAllv") : finish(comm, s);
        if (e.empty()) {
          const Bytes got = toHost(recv, ro * 4, s);
          const int32_t* g = reinterpret_cast<const int32_t*>(got.data());
          for (int q = 0; q < n && e.empty(); ++q) {
            for (size_t i = 0; i < rc[q] && e.empty(); ++i)
              if (g[rd[q] + i] != value(q, r, i))
                e = "from rank " + std::to_string(q) + " element " + std::to_string(i) + " wrong";
            e = e.empty() ? checkUntouched(got.data() + (rd[q] + rc[q]) * 4, 12, "gap after rank " + std::to_string(q)) : e;
          }
        }
        if (!e.empty()) errs[r] += std::string(reg ? "\n  registered: " : "\n  unregistered: ") + e;
      }
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ("", errs[r]) << "rank " << r;
  }
}

// Each collective on registered buffers above the cut, captured once and replayed 30 times with
// fresh inputs, each replay followed by an eager unregistered call of the same op on the same
// communicator; outputs poisoned, both checked every round.
TEST(RegColl, CapturedReplays) {
  MKCCL_REQUIRE_GPUS(1);
  for (const std::vector<int>& devs : worlds()) {
    SCOPED_TRACE(label(devs));
    const int n = int(devs.size());
    const size_t MiB = 1 << 20;
    const std::vector<Case> v = {{Coll::AllReduce, mkcclBfloat16, mkcclSum, 2 * n * MiB / 2 + 9, false},
                                 {Coll::AllReduce, mkcclFloat32, mkcclSum, n * MiB / 4 + 4, true},
                                 {Coll::ReduceScatter, mkcclFloat32, mkcclSum, MiB / 4 + 3, false},
                                 {Coll::AllGather, mkcclBfloat16, mkcclSum, MiB / 2 + 8, false},
                                 {Coll::AllToAll, mkcclFloat32, mkcclSum, MiB / 4 + 1, false}};
    RegWorld w(devs, maxBytes(v, n, true), maxBytes(v, n, false));
    ASSERT_TRUE(w.ranks->ok());
    ASSERT_EQ("", w.setupError);
    const uint64_t base = freshSeed();
    SCOPED_TRACE("seed " + std::to_string(base));
    std::vector<std::string> errs(n);
    w.ranks->onEveryRank([&](int r) {
      mkcclComm_t comm = w.ranks->comms[r];
      cudaStream_t s = w.ranks->streams[r];
      RankBufs& b = w.bufs[r];
      for (size_t k = 0; k < v.size() && errs[r].empty(); ++k) {
        const Case& c = v[k];
        const size_t ib = c.sendElems(n) * typeBytes(c.t);
        // The graph reads its input from a staging buffer refilled each round (a registered input
        // that the fill would otherwise have to be captured with).
        void* stage = nullptr;
        cudaMalloc(&stage, ib);
        void* out = nullptr;
        mkcclResult_t res = enqueue(c, r, n, base, b.reg[0], b.reg[1], comm, s, &out);  // eager first
        std::string e = res != mkcclSuccess ? callError(comm, res, "eager") : finish(comm, s);
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        char* in = c.coll == Coll::AllGather && c.inPlace ? b.reg[1] + (size_t)r * c.count * typeBytes(c.t) : b.reg[0];
        w.barrier->wait();
        if (e.empty()) {
          cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
          cudaMemcpyAsync(in, stage, ib, cudaMemcpyDeviceToDevice, s);
          switch (c.coll) {
            case Coll::AllReduce: res = mkcclAllReduce(in, c.inPlace ? in : b.reg[1], c.count, c.t, c.op, comm, s); break;
            case Coll::ReduceScatter: res = mkcclReduceScatter(in, b.reg[1], c.count, c.t, c.op, comm, s); break;
            case Coll::AllGather: res = mkcclAllGather(in, b.reg[1], c.count, c.t, comm, s); break;
            default: res = mkcclAllToAll(in, b.reg[1], c.count, c.t, comm, s); break;
          }
          const cudaError_t ce = cudaStreamEndCapture(s, &graph);
          if (res != mkcclSuccess) e = callError(comm, res, "captured call");
          else if (ce != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) e = "capture failed";
        }
        const void* regOut = c.coll == Coll::AllReduce && c.inPlace ? in : b.reg[1];
        for (int i = 0; i < 30 && e.empty(); ++i) {
          const uint64_t seed = base + 1000003ull * (uint64_t)(i + 1) + k;
          w.barrier->wait();  // no rank refills while a peer's previous round may still read
          perf::fillInput(stage, c.sendElems(n), c.t, seed, r, 0, s);
          poison(b.reg[1], c.recvElems(n) * typeBytes(c.t), s);
          if (cudaGraphLaunch(exec, s) != cudaSuccess) e = "graph launch";
          void* plainOut = nullptr;
          res = enqueue(c, r, n, seed ^ 0xabcdef, static_cast<char*>(b.plain[0]), static_cast<char*>(b.plain[1]),
                        comm, s, &plainOut);
          if (res != mkcclSuccess) e = callError(comm, res, "eager call");
          if (e.empty()) e = finish(comm, s);
          if (e.empty()) e = check(c, r, n, seed, regOut, s);
          if (e.empty()) e = check(c, r, n, seed ^ 0xabcdef, plainOut, s);
          if (!e.empty()) e = "round " + std::to_string(i) + ": " + e;
        }
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        cudaStreamSynchronize(s);
        cudaFree(stage);
        if (!e.empty()) errs[r] = c.label(n) + ": " + e;
        // Ranks that failed leave their peers in step only if all fail alike; stop every rank.
        w.barrier->wait();
        bool any = false;
        for (int q = 0; q < n; ++q) any |= !errs[q].empty();
        w.barrier->wait();
        if (any) break;
      }
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ("", errs[r]) << "rank " << r;
  }
}

// Ranks that disagree: each call must end on every rank with an error (the in-place ranks report
// mkcclInvalidUsage naming the registered buffers; a staged rank's wait times out), within a
// few timeouts, never a hang.
TEST(RegColl, DisagreeingRanksFail) {
  MKCCL_REQUIRE_GPUS(1);
  struct Scenario {
    const char* name;
    int what;  // 0: rank 0 unregistered ReduceScatter; 1: AllToAllv counts that do not match; 2: AllReduce, rank 0 unregistered recv
  };
  for (const Scenario sc : {Scenario{"ReduceScatter, rank 0 unregistered", 0},
                            Scenario{"AllToAllv, counts disagree", 1},
                            Scenario{"AllReduce, rank 0 unregistered", 2}}) {
    SCOPED_TRACE(sc.name);
    const std::vector<int> devs = gpuCount() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
    const int n = 2;
    setenv("MKCCL_TIMEOUT_MS", "2000", 1);
    std::unique_ptr<SharedGpus> share;
    if (gpusOf(devs) < n) share.reset(new SharedGpus(devs));
    std::vector<mkcclComm_t> comms(n, nullptr);
    ASSERT_EQ(mkcclSuccess, mkcclCommInitAll(comms.data(), n, devs.data())) << mkcclGetLastError(nullptr);
    unsetenv("MKCCL_TIMEOUT_MS");
    std::vector<mkcclResult_t> got(n, mkcclSuccess);
    std::vector<std::string> msg(n);
    std::vector<void*> mem(n * 2, nullptr);
    HostBarrier bar(n);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r)
      th.emplace_back([&, r] {
        cudaSetDevice(devs[r]);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        const size_t bytes = 8 << 20;
        void* h[2] = {nullptr, nullptr};
        for (int i = 0; i < 2; ++i) {
          EXPECT_EQ(mkcclSuccess, mkcclMemAlloc(&mem[2 * r + i], bytes));
          EXPECT_EQ(mkcclSuccess, mkcclCommRegister(comms[r], mem[2 * r + i], bytes, &h[i]));
        }
        EXPECT_EQ(mkcclSuccess, mkcclSetTuning(comms[r], "coll.direct=on"));
        void* plain = nullptr;
        cudaMalloc(&plain, bytes);
        char* send = static_cast<char*>(mem[2 * r]);
        char* recv = static_cast<char*>(mem[2 * r + 1]);
        cudaMemsetAsync(send, 0, bytes, s);
        bar.wait();
        mkcclResult_t res = mkcclSuccess;
        if (sc.what == 0) {
          res = mkcclReduceScatter(r == 0 ? plain : send, recv, 1 << 18, mkcclFloat32, mkcclSum, comms[r], s);
        } else if (sc.what == 1) {
          std::vector<size_t> cnt(n, 1000), dsp = {0, 4096};
          std::vector<size_t> rcnt = cnt;
          if (r == 1) rcnt[0] = 1200;  // rank 0 sends 1000
          res = mkcclAllToAllv(send, cnt.data(), dsp.data(), recv, rcnt.data(), dsp.data(), mkcclFloat32, comms[r], s);
        } else {
          res = mkcclAllReduce(send, r == 0 ? plain : recv, 1 << 20, mkcclFloat32, mkcclSum, comms[r], s);
        }
        if (res == mkcclSuccess) cudaStreamSynchronize(s);
        mkcclResult_t async = res;
        if (res == mkcclSuccess) mkcclCommGetAsyncError(comms[r], &async);
        got[r] = async;
        msg[r] = mkcclGetLastError(comms[r]);
        cudaFree(plain);
        cudaStreamDestroy(s);
      });
    for (auto& t : th) t.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int r = 0; r < n; ++r) EXPECT_NE(mkcclSuccess, got[r]) << "rank " << r << " finished without an error";
    bool named = false;
    for (int r = 0; r < n; ++r)
      if (got[r] == mkcclInvalidUsage && msg[r].find("registered") != std::string::npos) named = true;
    EXPECT_TRUE(named) << "no rank reported the disagreement: rank 0 " << msg[0] << "; rank 1 " << msg[1];
    EXPECT_LT(secs, 20.0);
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(devs[r]);
      mkcclCommAbort(comms[r]);  // also ends the registrations
    }
    for (void* p : mem)
      if (p) EXPECT_EQ(mkcclSuccess, mkcclMemFree(p));
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
