// GPU tests of the NVLink collectives against host fp64 / exact references: every collective,
// data type and reduction, sizes from 0 elements to larger than the workspace, in and out of place,
// fresh random inputs per run, poisoned outputs, both AllReduce algorithms, CTA budgets down to
// one, and 100+ back-to-back calls of mixed kinds. Single process: every GPU, one thread per rank;
// under mkccl-run -n N: one process per rank.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <tuple>
#include "coll_check.h"
#include "coll_team.h"
#include "test_util.h"

namespace mkccl {
namespace test {
namespace {

class TeamsEnv : public ::testing::Environment {
 public:
  void TearDown() override { Team::destroyAll(); }
};
const auto* g_env = ::testing::AddGlobalTestEnvironment(new TeamsEnv);

#define MKCCL_GET_TEAM(var, kind)                                   \
  MKCCL_REQUIRE_GPUS(1);                                            \
  std::string team_why_;                                            \
  Team* var = Team::get(kind, &team_why_);                          \
  ASSERT_NE(nullptr, var) << "cannot make the test ranks: " << team_why_

size_t tsize(mkcclDataType_t t) {
  switch (t) {
    case mkcclInt8: case mkcclUint8: case mkcclFloat8e4m3: case mkcclFloat8e5m2: return 1;
    case mkcclFloat16: case mkcclBfloat16: return 2;
    case mkcclInt32: case mkcclUint32: case mkcclFloat32: return 4;
    default: return 8;
  }
}

const char* tname(mkcclDataType_t t) {
  static const char* n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "fp16", "fp32", "fp64", "bf16", "fp8e4m3", "fp8e5m2"};
  return (int)t >= 0 && (int)t < 12 ? n[(int)t] : "?";
}
const char* oname(mkcclRedOp_t op) {
  static const char* n[] = {"sum", "prod", "max", "min", "avg"};
  return (int)op >= 0 && (int)op < 5 ? n[(int)op] : "?";
}

// Device buffers of one rank for one call, freed at scope exit.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { cudaMalloc(&p, std::max<size_t>(bytes, 16)); }
  ~DevBuf() { cudaFree(p); }
  char* c() const { return static_cast<char*>(p); }
};

std::string callError(const Rank& r, mkcclResult_t res, const char* what) {
  return std::string(what) + " returned " + mkcclGetErrorString(res) + ": " + mkcclGetLastError(r.comm);
}

// Waits for the rank's stream and checks the communicator for device errors.
std::string finish(const Rank& r) {
  const cudaError_t e = cudaStreamSynchronize(r.stream);
  if (e != cudaSuccess) return std::string("stream: ") + cudaGetErrorString(e);
  mkcclResult_t async = mkcclSuccess;
  mkcclCommGetAsyncError(r.comm, &async);
  if (async != mkcclSuccess) return std::string("async error: ") + mkcclGetLastError(r.comm);
  return "";
}

#define TRY(expr)                              \
  do {                                         \
    std::string e_ = (expr);                   \
    if (!e_.empty()) return e_;                \
  } while (0)

// Sets an environment override for the duration of a scope (no rank threads are running then).
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* o = getenv(n);
    had = o != nullptr;
    if (had) old = o;
    if (v) setenv(n, v, 1);
    else unsetenv(n);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

// ---- one call of each collective, checked ----------------------------------------------------

std::string doAllReduce(Rank& r, size_t count, mkcclDataType_t t, mkcclRedOp_t op, bool inPlace, uint64_t seed) {
  const size_t bytes = count * tsize(t);
  DevBuf send(bytes), recv(bytes);
  fillInput(send.p, count, t, seed, r.rank, r.stream);
  void* out = inPlace ? send.p : recv.p;
  if (!inPlace) poison(recv.p, bytes, r.stream);
  const mkcclResult_t res = mkcclAllReduce(send.p, out, count, t, op, r.comm, r.stream);
  if (res != mkcclSuccess) return callError(r, res, "mkcclAllReduce");
  TRY(finish(r));
  const Bytes got = toHost(out, bytes, r.stream);
  const std::vector<Bytes> in = allInputs(count, t, seed, r.nranks, r.stream);
  return checkReduced(got, 0, in, 0, count, t, op);
}

std::string doReduceScatter(Rank& r, size_t recvcount, mkcclDataType_t t, mkcclRedOp_t op, bool inPlace,
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
  const std::vector<Bytes> in = allInputs(total, t, seed, r.nranks, r.stream);
  return checkReduced(got, 0, in, (size_t)r.rank * recvcount, recvcount, t, op);
}

std::string doAllGather(Rank& r, size_t sendcount, mkcclDataType_t t, bool inPlace, uint64_t seed) {
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

// Variable counts: rank p sends cnt(p, q) elements to q. Displacements leave gaps of `gap`
// elements (odd offsets, so misaligned pointers are exercised), and the gaps must stay untouched.
size_t a2aCount(uint64_t seed, int p, int q, size_t maxCount) {
  uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(p * 131 + q + 1));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return (x % 5 == 0) ? 0 : (size_t)(x % (maxCount + 1));  // some pairs send nothing
}

std::string doAllToAllv(Rank& r, size_t maxCount, bool uniform, mkcclDataType_t t, uint64_t seed, size_t gap) {
  const int n = r.nranks;
  const size_t ts = tsize(t);
  auto cnt = [&](int p, int q) { return uniform ? maxCount : a2aCount(seed, p, q, maxCount); };
  // Rank p's send layout: blocks for q = 0..n-1 with gaps; its recv layout: blocks from q with gaps.
  auto sdispl = [&](int p, int q) {
    size_t d = gap;
    for (int j = 0; j < q; ++j) d += cnt(p, j) + gap;
    return d;
  };
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t sTot = gap, rTot = gap;
  for (int q = 0; q < n; ++q) {
    sc[q] = cnt(r.rank, q);
    sd[q] = sdispl(r.rank, q);
    sTot += sc[q] + gap;
    rc[q] = cnt(q, r.rank);
    rd[q] = rTot;
    rTot += rc[q] + gap;
  }
  DevBuf send(sTot * ts), recv(rTot * ts);
  fillInput(send.p, sTot, t, seed, r.rank, r.stream);
  poison(recv.p, rTot * ts, r.stream);
  mkcclResult_t res;
  if (uniform && gap == 0) res = mkcclAllToAll(send.p, recv.p, maxCount, t, r.comm, r.stream);
  else res = mkcclAllToAllv(send.p, sc.data(), sd.data(), recv.p, rc.data(), rd.data(), t, r.comm, r.stream);
  if (res != mkcclSuccess) return callError(r, res, uniform && gap == 0 ? "mkcclAllToAll" : "mkcclAllToAllv");
  TRY(finish(r));
  const Bytes got = toHost(recv.p, rTot * ts, r.stream);
  // Every rank's send buffer has its own total; regenerate each peer's input at its size.
  size_t prev = 0;
  for (int q = 0; q < n; ++q) {
    size_t qTot = gap;
    for (int j = 0; j < n; ++j) qTot += cnt(q, j) + gap;
    const Bytes src = inputOf(qTot, t, seed, q, r.stream);
    TRY(checkUntouched(got.data() + prev * ts, (rd[q] - prev) * ts, "gap before block from rank " + std::to_string(q)));
    TRY(checkSame(got.data() + rd[q] * ts, src.data() + sdispl(q, r.rank) * ts, rc[q] * ts,
                  "block from rank " + std::to_string(q)));
    prev = rd[q] + rc[q];
  }
  return checkUntouched(got.data() + prev * ts, (rTot - prev) * ts, "gap after the last block");
}

// ---- the size classes ------------------------------------------------------------------------

// Element counts: 0, 1, odd, 4 KiB, 1 MiB + 3 elements' worth, and (for the small-workspace team)
// larger than the workspace.
std::vector<size_t> countsFor(mkcclDataType_t t, bool big) {
  const size_t ts = tsize(t);
  std::vector<size_t> c = {0, 1, 1001, 4096 / ts, (1u << 20) / ts + 3};
  if (big) c.push_back((9u << 20) / ts + 5);  // > the 4 MiB workspace of TeamKind::kSmallWs
  return c;
}

const mkcclDataType_t kMainTypes[] = {mkcclBfloat16, mkcclFloat16, mkcclFloat32};
const mkcclDataType_t kOtherTypes[] = {mkcclFloat64, mkcclInt8, mkcclUint8, mkcclInt32, mkcclUint32, mkcclInt64, mkcclUint64};
const mkcclRedOp_t kOps[] = {mkcclSum, mkcclProd, mkcclMax, mkcclMin, mkcclAvg};

std::string label(const char* coll, mkcclDataType_t t, const char* op, size_t count, bool inPlace, const Team& team) {
  return std::string(coll) + " " + tname(t) + " " + op + " count=" + std::to_string(count) +
         (inPlace ? " in-place" : " out-of-place") + " ranks=" + std::to_string(team.nranks());
}

// Runs the reduction matrix of one collective on a team.
void reductionMatrix(Team* team, bool allReduce, bool big) {
  auto one = [&](mkcclDataType_t t, mkcclRedOp_t op, size_t count, bool inPlace) {
    const uint64_t seed = team->sharedSeed();
    const std::string err = team->run([&](Rank& r) {
      return allReduce ? doAllReduce(r, count, t, op, inPlace, seed) : doReduceScatter(r, count, t, op, inPlace, seed);
    });
    EXPECT_EQ("", err) << label(allReduce ? "AllReduce" : "ReduceScatter", t, oname(op), count, inPlace, *team);
    return err.empty();
  };
  for (mkcclDataType_t t : kMainTypes)
    for (mkcclRedOp_t op : kOps)
      for (size_t count : countsFor(t, big))
        for (bool inPlace : {false, true})
          if (!one(t, op, count, inPlace)) return;  // a broken protocol would time out on every case
  for (mkcclDataType_t t : kOtherTypes)
    for (mkcclRedOp_t op : kOps)
      for (size_t count : {(size_t)1, (size_t)1001, (size_t)65536 / tsize(t) + 1})
        if (!one(t, op, count, false)) return;
}

// ---- tests -----------------------------------------------------------------------------------

TEST(Coll, AllReduceAuto) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedEnv algo("MKCCL_ALLREDUCE_ALGO", nullptr);
  reductionMatrix(team, true, false);
}

TEST(Coll, AllReduceOneShot) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedEnv algo("MKCCL_ALLREDUCE_ALGO", "oneshot");
  reductionMatrix(team, true, false);
}

TEST(Coll, AllReduceTwoShot) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedEnv algo("MKCCL_ALLREDUCE_ALGO", "twoshot");
  reductionMatrix(team, true, false);
}

TEST(Coll, ReduceScatter) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  reductionMatrix(team, false, false);
}

TEST(Coll, AllGather) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32, mkcclInt8, mkcclFloat64, mkcclFloat8e4m3})
    for (size_t count : countsFor(t, false))
      for (bool inPlace : {false, true}) {
        const uint64_t seed = team->sharedSeed();
        const std::string err = team->run([&](Rank& r) { return doAllGather(r, count, t, inPlace, seed); });
        ASSERT_EQ("", err) << label("AllGather", t, "-", count, inPlace, *team);
      }
}

TEST(Coll, AllToAll) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32, mkcclInt8, mkcclFloat64})
    for (size_t count : countsFor(t, false)) {
      const uint64_t seed = team->sharedSeed();
      const std::string err = team->run([&](Rank& r) { return doAllToAllv(r, count, true, t, seed, 0); });
      ASSERT_EQ("", err) << label("AllToAll", t, "-", count, false, *team);
    }
}

TEST(Coll, AllToAllvUneven) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclInt8, mkcclFloat64})
    for (size_t maxCount : {(size_t)1, (size_t)777, (size_t)300000})
      for (size_t gap : {(size_t)0, (size_t)3}) {
        const uint64_t seed = team->sharedSeed();
        const std::string err = team->run([&](Rank& r) { return doAllToAllv(r, maxCount, false, t, seed, gap); });
        ASSERT_EQ("", err) << "AllToAllv " << tname(t) << " maxCount=" << maxCount << " gap=" << gap;
      }
}

// Calls larger than the workspace pipeline through its rings (many steps per slot).
TEST(Coll, LargerThanWorkspace) {
  MKCCL_GET_TEAM(team, TeamKind::kSmallWs);
  for (const char* algo : {"oneshot", "twoshot"}) {
    ScopedEnv e("MKCCL_ALLREDUCE_ALGO", algo);
    for (mkcclRedOp_t op : {mkcclSum, mkcclMax})
      for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32})
        for (size_t count : countsFor(t, true))
          for (bool inPlace : {false, true}) {
            const uint64_t seed = team->sharedSeed();
            const std::string err = team->run([&](Rank& r) { return doAllReduce(r, count, t, op, inPlace, seed); });
            ASSERT_EQ("", err) << label("AllReduce", t, oname(op), count, inPlace, *team) << " " << algo;
          }
  }
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32})
    for (size_t count : countsFor(t, true))
      for (bool inPlace : {false, true}) {
        uint64_t seed = team->sharedSeed();
        std::string err = team->run([&](Rank& r) { return doReduceScatter(r, count, t, mkcclSum, inPlace, seed); });
        ASSERT_EQ("", err) << label("ReduceScatter", t, "sum", count, inPlace, *team);
        seed = team->sharedSeed();
        err = team->run([&](Rank& r) { return doAllGather(r, count, t, inPlace, seed); });
        ASSERT_EQ("", err) << label("AllGather", t, "-", count, inPlace, *team);
      }
  for (size_t count : {(size_t)1001, (size_t)(3u << 20) + 1}) {
    const uint64_t seed = team->sharedSeed();
    const std::string err = team->run([&](Rank& r) { return doAllToAllv(r, count, false, mkcclBfloat16, seed, 1); });
    ASSERT_EQ("", err) << "AllToAllv bf16 maxCount=" << count << " (small workspace)";
  }
}

// With 2 CTAs or 1 CTA a CTA runs every role of several channels in turn (the fused order).
void fewCtas(TeamKind kind) {
  MKCCL_GET_TEAM(team, kind);
  for (const char* algo : {"oneshot", "twoshot"}) {
    ScopedEnv e("MKCCL_ALLREDUCE_ALGO", algo);
    for (size_t count : {(size_t)1, (size_t)4099, (size_t)(3u << 20) + 7})
      for (bool inPlace : {false, true}) {
        const uint64_t seed = team->sharedSeed();
        const std::string err =
            team->run([&](Rank& r) { return doAllReduce(r, count, mkcclBfloat16, mkcclSum, inPlace, seed); });
        ASSERT_EQ("", err) << label("AllReduce", mkcclBfloat16, "sum", count, inPlace, *team) << " " << algo;
      }
  }
  for (size_t count : {(size_t)4099, (size_t)(1u << 20) + 7}) {
    uint64_t seed = team->sharedSeed();
    std::string err = team->run([&](Rank& r) { return doReduceScatter(r, count, mkcclFloat32, mkcclMax, false, seed); });
    ASSERT_EQ("", err) << label("ReduceScatter", mkcclFloat32, "max", count, false, *team);
    seed = team->sharedSeed();
    err = team->run([&](Rank& r) { return doAllGather(r, count, mkcclBfloat16, false, seed); });
    ASSERT_EQ("", err) << label("AllGather", mkcclBfloat16, "-", count, false, *team);
    seed = team->sharedSeed();
    err = team->run([&](Rank& r) { return doAllToAllv(r, count, false, mkcclBfloat16, seed, 0); });
    ASSERT_EQ("", err) << "AllToAllv maxCount=" << count << " few CTAs";
  }
}
TEST(Coll, TwoCtas) { fewCtas(TeamKind::kFewCtas); }
TEST(Coll, OneCta) { fewCtas(TeamKind::kOneCta); }

// A 1-rank communicator: every collective is a local copy.
TEST(Coll, SingleRank) {
  MKCCL_GET_TEAM(team, TeamKind::kSingle);
  for (size_t count : {(size_t)0, (size_t)1, (size_t)1001, (size_t)(1u << 20) + 3}) {
    const uint64_t seed = team->sharedSeed();
    const std::string err = team->run([&](Rank& r) {
      TRY(doAllReduce(r, count, mkcclBfloat16, mkcclAvg, false, seed));
      TRY(doAllReduce(r, count, mkcclFloat32, mkcclProd, true, seed));
      TRY(doReduceScatter(r, count, mkcclBfloat16, mkcclSum, false, seed));
      TRY(doAllGather(r, count, mkcclInt8, false, seed));
      TRY(doAllGather(r, count, mkcclInt8, true, seed));
      return doAllToAllv(r, count, true, mkcclFloat32, seed, 0);
    });
    ASSERT_EQ("", err) << "1 rank, count=" << count;
  }
}

// 120 calls of every kind back to back on one stream, no host synchronisation in between; each
// writes its own output. Catches flags or staging reused across calls.
TEST(Coll, BackToBack) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  constexpr int kCalls = 120;
  const uint64_t seed = team->sharedSeed();
  const std::string err = team->run([&](Rank& r) -> std::string {
    const int n = r.nranks;
    const mkcclDataType_t t = mkcclBfloat16;
    const size_t ts = 2;
    // Sizes vary so that the layouts (channels, algorithms) vary from call to call.
    auto countOf = [](int i) { return (size_t)((i * 7919) % 300000 + 1); };
    struct Call {
      DevBuf* out;
      size_t count, outBytes;
      int kind;
    };
    std::vector<Call> calls;
    const size_t maxCount = 300001;
    DevBuf in(maxCount * n * ts);
    fillInput(in.p, maxCount * n, t, seed, r.rank, r.stream);
    for (int i = 0; i < kCalls; ++i) {
      Call c;
      c.kind = i % 4;
      c.count = countOf(i);
      c.outBytes = c.count * ts * ((c.kind == 1 || c.kind == 3) ? n : 1);
      c.out = new DevBuf(c.outBytes);
      poison(c.out->p, c.outBytes, r.stream);
      mkcclResult_t res;
      switch (c.kind) {
        case 0: res = mkcclAllReduce(in.p, c.out->p, c.count, t, mkcclSum, r.comm, r.stream); break;
        case 1: res = mkcclAllGather(in.p, c.out->p, c.count, t, r.comm, r.stream); break;
        case 2: res = mkcclReduceScatter(in.p, c.out->p, c.count, t, mkcclMax, r.comm, r.stream); break;
        default: res = mkcclAllToAll(in.p, c.out->p, c.count, t, r.comm, r.stream); break;
      }
      if (res != mkcclSuccess) {
        for (Call& x : calls) delete x.out;
        delete c.out;
        return callError(r, res, "back-to-back call");
      }
      calls.push_back(c);
    }
    std::string e = finish(r);
    const std::vector<Bytes> all = allInputs(maxCount * n, t, seed, n, r.stream);
    for (int i = 0; i < kCalls && e.empty(); ++i) {
      const Call& c = calls[i];
      const Bytes got = toHost(c.out->p, c.outBytes, r.stream);
      const std::string what = "call " + std::to_string(i) + " (kind " + std::to_string(c.kind) + ", count " +
                               std::to_string(c.count) + ")";
      switch (c.kind) {
        case 0: e = checkReduced(got, 0, all, 0, c.count, t, mkcclSum); break;
        case 1:
          for (int q = 0; q < n && e.empty(); ++q)
            e = checkSame(got.data() + (size_t)q * c.count * ts, all[q].data(), c.count * ts, what);
          break;
        case 2: e = checkReduced(got, 0, all, (size_t)r.rank * c.count, c.count, t, mkcclMax); break;
        default:
          for (int q = 0; q < n && e.empty(); ++q)
            e = checkSame(got.data() + (size_t)q * c.count * ts, all[q].data() + (size_t)r.rank * c.count * ts,
                          c.count * ts, what);
          break;
      }
      if (!e.empty()) e = what + ": " + e;
    }
    for (Call& c : calls) delete c.out;
    return e;
  });
  ASSERT_EQ("", err);
}

// Every rank gets bit-identical AllReduce results (reduction in rank order, one reducer per block).
TEST(Coll, AllReduceIdenticalOnAllRanks) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  if (team->nranks() < 2) GTEST_SKIP() << "needs 2 ranks";
  for (const char* algo : {"oneshot", "twoshot"}) {
    ScopedEnv e("MKCCL_ALLREDUCE_ALGO", algo);
    const uint64_t seed = team->sharedSeed();
    const size_t count = (1u << 19) + 11;
    std::vector<uint64_t> hashes(team->nranks(), 0);
    const std::string err = team->run([&](Rank& r) -> std::string {
      DevBuf buf(count * 4);
      fillInput(buf.p, count, mkcclFloat32, seed, r.rank, r.stream);
      const mkcclResult_t res = mkcclAllReduce(buf.p, buf.p, count, mkcclFloat32, mkcclSum, r.comm, r.stream);
      if (res != mkcclSuccess) return callError(r, res, "mkcclAllReduce");
      TRY(finish(r));
      const Bytes got = toHost(buf.p, count * 4, r.stream);
      uint64_t h = 1469598103934665603ull;
      for (uint8_t b : got) h = (h ^ b) * 1099511628211ull;
      if (team->multiProcess()) {
        std::string werr;
        if (launch::worldAllGather(&h, sizeof(h), hashes.data(), &werr) != 0) return werr;
      } else {
        hashes[r.rank] = h;
      }
      return "";
    });
    ASSERT_EQ("", err);
    for (int q = 1; q < team->nranks(); ++q) EXPECT_EQ(hashes[0], hashes[q]) << "rank " << q << " differs (" << algo << ")";
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
