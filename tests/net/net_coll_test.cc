// GPU tests of the collectives across nodes, under mkccl-run (one process per GPU): the host is
// split into emulated nodes with MKCCL_RANKS_PER_NODE (set here, before each communicator is made)
// and the network is libfabric tcp (MKCCL_NET=efa, MKCCL_NET_PROVIDER=tcp unless set by the caller).
// Layouts: n nodes x 1 rank (every byte crosses the network) and, with 4+ ranks, n/2 nodes x 2
// (NVLink inside, network across); each also with a small network window, so large calls go in many
// rounds. Inputs are fresh random data per run, outputs are poisoned, results are compared with a
// host reference (fp64 for floats, exact for integers). Also: init, the first barrier across the
// nodes and destroy, repeated; nodes of different sizes (a clear error, no hang); back-to-back calls.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#include "net_coll_check.h"
#include "test_util.h"

#ifndef MKCCL_HAVE_LIBFABRIC
#define MKCCL_HAVE_LIBFABRIC 1  // built outside tests/net/CMakeLists.txt: assume it, as before
#endif

namespace mkccl {
namespace test {
namespace {

using namespace netcheck;

size_t tsize(mkcclDataType_t t) { return typeBytes(t); }

const char* tname(mkcclDataType_t t) {
  static const char* n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "fp16", "fp32", "fp64", "bf16", "fp8e4m3", "fp8e5m2"};
  return (int)t >= 0 && (int)t < 12 ? n[(int)t] : "?";
}
const char* oname(mkcclRedOp_t op) {
  static const char* n[] = {"sum", "prod", "max", "min", "avg"};
  return (int)op >= 0 && (int)op < 5 ? n[(int)op] : "?";
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { cudaMalloc(&p, std::max<size_t>(bytes, 16)); }
  ~DevBuf() { cudaFree(p); }
  char* c() const { return static_cast<char*>(p); }
};

#define TRY(expr)                \
  do {                           \
    std::string e_ = (expr);     \
    if (!e_.empty()) return e_;  \
  } while (0)

// One rank's communicator over emulated nodes.
struct NetRank {
  mkcclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0, nranks = 1, rpn = 1;
  ~NetRank() {
    if (comm) {
      cudaStreamSynchronize(stream);
      EXPECT_EQ(mkcclSuccess, mkcclCommDestroy(comm)) << mkcclGetLastError(nullptr);
    }
    if (stream) cudaStreamDestroy(stream);
  }
};

void setEnvDefault(const char* name, const char* value) {
  if (!getenv(name)) setenv(name, value, 1);
}

// Makes the communicator (every rank calls it with the same arguments). windowBytes 0: default.
bool makeRank(int rpn, long long windowBytes, NetRank* r) {
  setEnvDefault("MKCCL_NET", "efa");
  setEnvDefault("MKCCL_NET_PROVIDER", "tcp");
  setenv("MKCCL_RANKS_PER_NODE", std::to_string(rpn).c_str(), 1);
  if (windowBytes) setenv("MKCCL_NET_BUFFER_BYTES", std::to_string(windowBytes).c_str(), 1);
  else unsetenv("MKCCL_NET_BUFFER_BYTES");
  mkcclConfig_t cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.timeoutMs = 30000;  // a stalled path is reported well within the test's deadline
  r->comm = worldComm(&cfg);
  unsetenv("MKCCL_RANKS_PER_NODE");
  unsetenv("MKCCL_NET_BUFFER_BYTES");
  r->rank = world().rank;
  r->nranks = world().nranks;
  r->rpn = rpn;
  if (r->comm == nullptr) return false;
  return cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking) == cudaSuccess;
}

uint64_t sharedSeed() {
  uint64_t s = world().rank == 0 ? freshSeed() : 0;
  std::string err;
  EXPECT_EQ(0, launch::worldBroadcast(&s, sizeof(s), 0, &err)) << err;
  return s;
}

std::string finish(const NetRank& r) {
  const cudaError_t e = cudaStreamSynchronize(r.stream);
  if (e != cudaSuccess) return std::string("stream: ") + cudaGetErrorString(e);
  mkcclResult_t async = mkcclSuccess;
  mkcclCommGetAsyncError(r.comm, &async);
  if (async != mkcclSuccess) return std::string("async error: ") + mkcclGetLastError(r.comm);
  return "";
}

std::string callError(const NetRank& r, mkcclResult_t res, const char* what) {
  return std::string(what) + " returned " + mkcclGetErrorString(res) + ": " + mkcclGetLastError(r.comm);
}

std::string doAllReduce(NetRank& r, size_t count, mkcclDataType_t t, mkcclRedOp_t op, bool inPlace, uint64_t seed) {
  const size_t bytes = count * tsize(t);
  DevBuf send(bytes), recv(bytes);
  fillInput(send.p, count, t, seed, r.rank, r.stream);
  void* out = inPlace ? send.p : recv.p;
  if (!inPlace) poison(recv.p, bytes, r.stream);
  const mkcclResult_t res = mkcclAllReduce(send.p, out, count, t, op, r.comm, r.stream);
  if (res != mkcclSuccess) return callError(r, res, "mkcclAllReduce");
  TRY(finish(r));
  const Bytes got = toHost(out, bytes, r.stream);
  return checkReduced(got, 0, allInputs(count, t, seed, r.nranks, r.stream), 0, count, t, op);
}

std::string doReduceScatter(NetRank& r, size_t recvcount, mkcclDataType_t t, mkcclRedOp_t op, bool inPlace,
                            uint64_t seed) {
  const size_t ts = tsize(t), total = recvcount * r.nranks;
  DevBuf send(total * ts), recv(recvcount * ts);
  fillInput(send.p, total, t, seed, r.rank, r.stream);
  void* out = inPlace ? send.c() + (size_t)r.rank * recvcount * ts : recv.p;
  if (!inPlace) poison(recv.p, recvcount * ts, r.stream);
  const mkcclResult_t res = mkcclReduceScatter(send.p, out, recvcount, t, op, r.comm, r.stream);
  if (res != mkcclSuccess) return callError(r, res, "mkcclReduceScatter");
  TRY(finish(r));
  const Bytes got = toHost(out, recvcount * ts, r.stream);
  return checkReduced(got, 0, allInputs(total, t, seed, r.nranks, r.stream), (size_t)r.rank * recvcount, recvcount, t,
                      op);
}

std::string doAllGather(NetRank& r, size_t sendcount, mkcclDataType_t t, bool inPlace, uint64_t seed) {
  const size_t ts = tsize(t), bytes = sendcount * ts, total = bytes * r.nranks;
  DevBuf send(bytes), recv(total);
  poison(recv.p, total, r.stream);
  const void* in = inPlace ? recv.c() + (size_t)r.rank * bytes : send.p;
  fillInput(const_cast<void*>(in), sendcount, t, seed, r.rank, r.stream);
  const mkcclResult_t res = mkcclAllGather(in, recv.p, sendcount, t, r.comm, r.stream);
  if (res != mkcclSuccess) return callError(r, res, "mkcclAllGather");
  TRY(finish(r));
  const Bytes got = toHost(recv.p, total, r.stream);
  const std::vector<Bytes> all = allInputs(sendcount, t, seed, r.nranks, r.stream);
  for (int q = 0; q < r.nranks; ++q)
    TRY(checkSame(got.data() + (size_t)q * bytes, all[q].data(), bytes, "block of rank " + std::to_string(q)));
  return "";
}

// Every rank's verdict: "" only when every rank passed (all ranks fail together, none hangs).
std::string agree(const std::string& mine) {
  if (worldAllOk(mine.empty())) return "";
  return mine.empty() ? "another rank failed" : mine;
}

std::string label(const char* coll, mkcclDataType_t t, const char* op, size_t count, bool inPlace, const NetRank& r) {
  return std::string(coll) + " " + tname(t) + " " + op + " count=" + std::to_string(count) +
         (inPlace ? " in-place" : " out-of-place") + " ranks=" + std::to_string(r.nranks) + " (" +
         std::to_string(r.nranks / r.rpn) + " nodes x " + std::to_string(r.rpn) + ")";
}

// The layouts this world can be split into: n x 1 and, with 4+ ranks, n/2 x 2.
std::vector<int> layouts() {
  std::vector<int> l;
  const int n = world().nranks;
  if (n >= 2) l.push_back(1);
  if (n >= 4 && n % 2 == 0 && gpuCount() >= 2) l.push_back(2);
  return l;
}

#define REQUIRE_NET_WORLD()                                                                        \
  if (!MKCCL_HAVE_LIBFABRIC)                                                                       \
    GTEST_SKIP() << "libmkccl was built without libfabric (MKCCL_HAVE_LIBFABRIC is off): the emulated " \
                    "nodes need its tcp provider; inter-node GPU test skipped";                     \
  MKCCL_REQUIRE_GPUS(1);                                                                           \
  if (world().nranks < 2)                                                                          \
    GTEST_SKIP() << "needs >= 2 processes (mkccl-run -n 2 or -n 4): inter-node GPU test skipped"

// Counts: 1, odd, 4 KiB, 1 MiB + 3 elements, and (small window) several window slots.
std::vector<size_t> countsFor(mkcclDataType_t t, bool big) {
  const size_t ts = tsize(t);
  std::vector<size_t> c = {1, 1001, 4096 / ts, (1u << 20) / ts + 3};
  if (big) c.push_back((3u << 20) / ts + 5);
  return c;
}

// The whole matrix on one communicator.
void runMatrix(NetRank& r, bool big) {
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32})
    for (mkcclRedOp_t op : {mkcclSum, mkcclMax, mkcclAvg})
      for (size_t count : countsFor(t, big))
        for (bool inPlace : {false, true}) {
          uint64_t seed = sharedSeed();
          std::string err = agree(doAllReduce(r, count, t, op, inPlace, seed));
          ASSERT_EQ("", err) << label("AllReduce", t, oname(op), count, inPlace, r);
          seed = sharedSeed();
          err = agree(doReduceScatter(r, count, t, op, inPlace, seed));
          ASSERT_EQ("", err) << label("ReduceScatter", t, oname(op), count, inPlace, r);
        }
  // Other types and ops, fewer sizes.
  for (mkcclDataType_t t : {mkcclFloat16, mkcclFloat64, mkcclInt8, mkcclUint8, mkcclInt32, mkcclUint64})
    for (mkcclRedOp_t op : {mkcclSum, mkcclProd, mkcclMin, mkcclAvg})
      for (size_t count : {(size_t)1, (size_t)65536 / tsize(t) + 1}) {
        uint64_t seed = sharedSeed();
        std::string err = agree(doAllReduce(r, count, t, op, false, seed));
        ASSERT_EQ("", err) << label("AllReduce", t, oname(op), count, false, r);
        seed = sharedSeed();
        err = agree(doReduceScatter(r, count, t, op, false, seed));
        ASSERT_EQ("", err) << label("ReduceScatter", t, oname(op), count, false, r);
      }
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclInt8, mkcclFloat64})
    for (size_t count : countsFor(t, big))
      for (bool inPlace : {false, true}) {
        const uint64_t seed = sharedSeed();
        const std::string err = agree(doAllGather(r, count, t, inPlace, seed));
        ASSERT_EQ("", err) << label("AllGather", t, "-", count, inPlace, r);
      }
}

TEST(NetColl, Collectives) {
  REQUIRE_NET_WORLD();
  for (int rpn : layouts()) {
    NetRank r;
    ASSERT_TRUE(makeRank(rpn, 0, &r)) << "cannot make a communicator of " << world().nranks / rpn << " nodes x "
                                      << rpn << ": " << mkcclGetLastError(nullptr);
    runMatrix(r, false);
    if (HasFatalFailure()) return;
  }
}

// A 2 MiB window: slots of 512 KiB (2 nodes) or less, so the larger calls take several rounds.
TEST(NetColl, SmallWindowManyRounds) {
  REQUIRE_NET_WORLD();
  for (int rpn : layouts()) {
    NetRank r;
    ASSERT_TRUE(makeRank(rpn, 2 << 20, &r)) << mkcclGetLastError(nullptr);
    for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32})
      for (size_t count : countsFor(t, true))
        for (bool inPlace : {false, true}) {
          uint64_t seed = sharedSeed();
          std::string err = agree(doAllReduce(r, count, t, mkcclSum, inPlace, seed));
          ASSERT_EQ("", err) << label("AllReduce", t, "sum", count, inPlace, r) << " (2 MiB window)";
          seed = sharedSeed();
          err = agree(doReduceScatter(r, count, t, mkcclMax, inPlace, seed));
          ASSERT_EQ("", err) << label("ReduceScatter", t, "max", count, inPlace, r) << " (2 MiB window)";
          seed = sharedSeed();
          err = agree(doAllGather(r, count, t, inPlace, seed));
          ASSERT_EQ("", err) << label("AllGather", t, "-", count, inPlace, r) << " (2 MiB window)";
        }
  }
}

// 40 calls of mixed kinds queued without waiting, then every result checked: sequence numbers,
// handshakes and window reuse across calls.
TEST(NetColl, BackToBack) {
  REQUIRE_NET_WORLD();
  for (int rpn : layouts()) {
    NetRank r;
    ASSERT_TRUE(makeRank(rpn, 2 << 20, &r)) << mkcclGetLastError(nullptr);
    const mkcclDataType_t t = mkcclFloat32;
    const uint64_t seed = sharedSeed();
    struct Call {
      int kind;  // 0 AllReduce, 1 ReduceScatter, 2 AllGather
      size_t count;
      std::unique_ptr<DevBuf> send, recv;
    };
    std::vector<Call> calls(40);
    std::string err;
    for (size_t i = 0; i < calls.size() && err.empty(); ++i) {
      Call& c = calls[i];
      c.kind = (int)(i % 3);
      c.count = 1 + (i * 7919) % 300000;
      const size_t in = c.kind == 1 ? c.count * r.nranks : c.count;
      const size_t out = c.kind == 2 ? c.count * r.nranks : c.kind == 1 ? c.count : c.count;
      c.send.reset(new DevBuf(in * 4));
      c.recv.reset(new DevBuf(out * 4));
      fillInput(c.send->p, in, t, seed + i, r.rank, r.stream);
      poison(c.recv->p, out * 4, r.stream);
      mkcclResult_t res;
      if (c.kind == 0) res = mkcclAllReduce(c.send->p, c.recv->p, c.count, t, mkcclSum, r.comm, r.stream);
      else if (c.kind == 1) res = mkcclReduceScatter(c.send->p, c.recv->p, c.count, t, mkcclSum, r.comm, r.stream);
      else res = mkcclAllGather(c.send->p, c.recv->p, c.count, t, r.comm, r.stream);
      if (res != mkcclSuccess) err = callError(r, res, ("queued call " + std::to_string(i)).c_str());
    }
    if (err.empty()) err = finish(r);
    for (size_t i = 0; i < calls.size() && err.empty(); ++i) {
      const Call& c = calls[i];
      if (c.kind == 0) {
        err = checkReduced(toHost(c.recv->p, c.count * 4, r.stream), 0, allInputs(c.count, t, seed + i, r.nranks, r.stream),
                           0, c.count, t, mkcclSum);
      } else if (c.kind == 1) {
        err = checkReduced(toHost(c.recv->p, c.count * 4, r.stream), 0,
                           allInputs(c.count * r.nranks, t, seed + i, r.nranks, r.stream), (size_t)r.rank * c.count,
                           c.count, t, mkcclSum);
      } else {
        const Bytes got = toHost(c.recv->p, c.count * 4 * r.nranks, r.stream);
        const std::vector<Bytes> all = allInputs(c.count, t, seed + i, r.nranks, r.stream);
        for (int q = 0; q < r.nranks && err.empty(); ++q)
          err = checkSame(got.data() + (size_t)q * c.count * 4, all[q].data(), c.count * 4,
                          "block of rank " + std::to_string(q));
      }
      if (!err.empty()) err = "call " + std::to_string(i) + " (kind " + std::to_string(c.kind) + "): " + err;
    }
    ASSERT_EQ("", agree(err)) << "back-to-back, " << r.nranks / rpn << " nodes x " << rpn;
  }
}

// Init (transport, connections, proxy, the first barrier across the nodes) and destroy, repeated:
// nothing leaks into the next communicator (threads, ports, flags).
TEST(NetColl, InitBarrierDestroyRepeated) {
  REQUIRE_NET_WORLD();
  for (int i = 0; i < 3; ++i)
    for (int rpn : layouts()) {
      NetRank r;
      ASSERT_TRUE(makeRank(rpn, 2 << 20, &r)) << "round " << i << ": " << mkcclGetLastError(nullptr);
      const uint64_t seed = sharedSeed();
      ASSERT_EQ("", agree(doAllReduce(r, 4097, mkcclFloat32, mkcclSum, false, seed))) << "round " << i;
    }
}

// Nodes of different sizes (3 + 1): init works (the barrier does not need counterparts), the
// collectives say why they cannot run, at once, on every rank.
TEST(NetColl, UnevenNodesRefused) {
  REQUIRE_NET_WORLD();
  if (world().nranks != 4 || gpuCount() < 3) GTEST_SKIP() << "needs exactly 4 processes and 3+ GPUs";
  NetRank r;
  ASSERT_TRUE(makeRank(3, 2 << 20, &r)) << mkcclGetLastError(nullptr);
  DevBuf buf(4096);
  const mkcclResult_t res = mkcclAllReduce(buf.p, buf.p, 16, mkcclFloat32, mkcclSum, r.comm, r.stream);
  EXPECT_EQ(mkcclInvalidUsage, res);
  EXPECT_NE(std::string::npos, std::string(mkcclGetLastError(r.comm)).find("same number of ranks"))
      << mkcclGetLastError(r.comm);
  EXPECT_EQ("", finish(r));
}

}  // namespace
}  // namespace test
}  // namespace mkccl
