// GPU tests of the NVLink collectives: every collective, data type and reduction, both protocols
// (LL and simple) and both AllReduce algorithms, sizes from 0 elements to larger than the
// workspace, in and out of place, fresh random inputs per run, poisoned outputs, CTA budgets down
// to one, uneven and misaligned AllToAllv, and 120 back-to-back calls of mixed kinds and protocols.
// Single process: every GPU, one thread per rank; under mkccl-run -n N: one process per rank.
//
// Speed: inputs are hashes of (seed, rank, index) made on the GPU, and every output is checked on
// the GPU against an fp64 (or exact) reference computed from the same hashes (mkccl-perf's
// perf/coll_data.cu), so no rank copies data to the host or regenerates its peers' inputs. A test
// runs all its cases in one pass on every rank, with per-rank buffers allocated once: the ranks
// talk to each other (host collectives) twice per test, not per case.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "rank_inputs.h"
#include "coll_data.h"
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

size_t tsize(mkcclDataType_t t) { return typeBytes(t); }  // rank_inputs.h

const char* tname(mkcclDataType_t t) {
  static const char* n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "fp16", "fp32", "fp64", "bf16", "fp8e4m3", "fp8e5m2"};
  return (int)t >= 0 && (int)t < 12 ? n[(int)t] : "?";
}
const char* oname(mkcclRedOp_t op) {
  static const char* n[] = {"sum", "prod", "max", "min", "avg"};
  return (int)op >= 0 && (int)op < 5 ? n[(int)op] : "?";
}

// Device buffer of one rank, freed at scope exit.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { cudaMalloc(&p, std::max<size_t>(bytes, 16)); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
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

// Sets a tuning override (ops/tuner/tuning.h) on every communicator of the team for a scope;
// scopes nest (the inner keys are added to the outer ones). No rank is inside a call then.
struct ScopedTune {
  static std::vector<std::string>& stack() {
    static std::vector<std::string> s;
    return s;
  }
  static void apply(Team* team) {
    std::string all;
    for (const std::string& t : stack()) all += (all.empty() ? "" : ";") + t;
    EXPECT_EQ("", team->tune(all)) << all;
  }
  Team* team;
  bool pushed;
  ScopedTune(Team* t, const char* key, const char* value) : team(t), pushed(value != nullptr) {
    if (!pushed) return;
    stack().push_back(std::string(key) + "=" + value);
    apply(team);
  }
  ~ScopedTune() {
    if (!pushed) return;
    stack().pop_back();
    apply(team);
  }
};

// ---- cases: one call of a uniform collective, checked on the GPU --------------------------------

enum class Coll { AllReduce, ReduceScatter, AllGather, AllToAll };

perf::CollKind kindOf(Coll c) {
  switch (c) {
    case Coll::AllReduce: return perf::CollKind::AllReduce;
    case Coll::ReduceScatter: return perf::CollKind::ReduceScatter;
    case Coll::AllGather: return perf::CollKind::AllGather;
    default: return perf::CollKind::AllToAll;
  }
}
const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AllGather: return "AllGather";
    default: return "AllToAll";
  }
}

struct Case {
  Coll coll;
  mkcclDataType_t t;
  mkcclRedOp_t op;  // reductions only
  size_t count;     // the API's count
  bool inPlace;

  // Elements of the send and recv buffers (each rank).
  size_t sendElems(int n) const {
    return coll == Coll::ReduceScatter || coll == Coll::AllToAll ? count * n : count;
  }
  size_t recvElems(int n) const { return coll == Coll::AllGather || coll == Coll::AllToAll ? count * n : count; }
  std::string label(int n) const {
    const bool red = coll == Coll::AllReduce || coll == Coll::ReduceScatter;
    return std::string(collName(coll)) + " " + tname(t) + (red ? std::string(" ") + oname(op) : "") +
           " count=" + std::to_string(count) + (inPlace ? " in-place" : " out-of-place") + " ranks=" + std::to_string(n);
  }
};

// Seed of case k of a test whose shared seed is base (the same on every rank).
uint64_t caseSeed(uint64_t base, size_t k) { return base ^ (0xd6e8feb86659fd93ull * (uint64_t)(k + 1)); }

// Runs one case on rank r with its buffers (large enough). "" or what went wrong; *fatal when the
// call itself failed (the ranks may then be out of step: the pass stops).
std::string runCase(Rank& r, const Case& c, uint64_t seed, char* sendBuf, char* recvBuf, bool* fatal) {
  const int n = r.nranks;
  const size_t ts = tsize(c.t), bytes = c.count * ts;
  char* send = sendBuf;
  void* out = recvBuf;
  mkcclResult_t res = mkcclSuccess;
  *fatal = true;
  switch (c.coll) {
    case Coll::AllReduce:
      perf::fillInput(send, c.count, c.t, seed, r.rank, 0, r.stream);
      if (c.inPlace) out = send;
      else poison(recvBuf, bytes, r.stream);
      res = mkcclAllReduce(send, out, c.count, c.t, c.op, r.comm, r.stream);
      break;
    case Coll::ReduceScatter:
      perf::fillInput(send, c.count * n, c.t, seed, r.rank, 0, r.stream);
      if (c.inPlace) out = send + (size_t)r.rank * bytes;
      else poison(recvBuf, bytes, r.stream);
      res = mkcclReduceScatter(send, out, c.count, c.t, c.op, r.comm, r.stream);
      break;
    case Coll::AllGather:
      poison(recvBuf, bytes * n, r.stream);
      if (c.inPlace) send = recvBuf + (size_t)r.rank * bytes;
      perf::fillInput(send, c.count, c.t, seed, r.rank, 0, r.stream);
      res = mkcclAllGather(send, recvBuf, c.count, c.t, r.comm, r.stream);
      break;
    case Coll::AllToAll:
      perf::fillInput(send, c.count * n, c.t, seed, r.rank, 0, r.stream);
      poison(recvBuf, bytes * n, r.stream);
      res = mkcclAllToAll(send, recvBuf, c.count, c.t, r.comm, r.stream);
      break;
  }
  if (res != mkcclSuccess) return callError(r, res, collName(c.coll));
  TRY(finish(r));
  *fatal = false;
  perf::CheckResult chk;
  const cudaError_t e = perf::checkOutput(out, c.count, c.t, c.op, kindOf(c.coll), n, r.rank, seed, r.stream, &chk);
  if (e != cudaSuccess) return std::string("the check kernel failed: ") + cudaGetErrorString(e);
  if (chk.wrong)
    return std::to_string(chk.wrong) + " of " + std::to_string(c.recvElems(n)) + " elements wrong (max rel err " +
           std::to_string(chk.maxRelErr) + ")";
  return "";
}

// Runs every case on every rank of the team, in one pass: "" or the first failures (label and
// rank). A call that fails stops the pass on that rank; wrong results do not (the ranks stay in
// step), up to the end.
std::string runCases(Team* team, const std::vector<Case>& cases) {
  size_t sendMax = 16, recvMax = 16;
  for (const Case& c : cases) {
    sendMax = std::max(sendMax, c.sendElems(team->nranks()) * tsize(c.t));
    recvMax = std::max(recvMax, c.recvElems(team->nranks()) * tsize(c.t));
  }
  const uint64_t base = team->sharedSeed();
  return team->run([&](Rank& r) -> std::string {
    DevBuf send(sendMax), recv(recvMax);
    std::string errs;
    int nerr = 0;
    for (size_t k = 0; k < cases.size(); ++k) {
      bool fatal = false;
      const std::string e = runCase(r, cases[k], caseSeed(base, k), send.c(), recv.c(), &fatal);
      if (e.empty()) continue;
      if (++nerr <= 5) errs += "\n  " + cases[k].label(r.nranks) + ": " + e;
      if (fatal) break;
    }
    if (nerr > 5) errs += "\n  ... " + std::to_string(nerr - 5) + " more";
    return errs;
  });
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

// The reduction matrix of one collective: every type and operator, main types at every size.
std::vector<Case> reductionMatrix(Coll coll) {
  std::vector<Case> v;
  for (mkcclDataType_t t : kMainTypes)
    for (mkcclRedOp_t op : kOps)
      for (size_t count : countsFor(t, false))
        for (bool inPlace : {false, true}) v.push_back({coll, t, op, count, inPlace});
  for (mkcclDataType_t t : kOtherTypes)
    for (mkcclRedOp_t op : kOps)
      for (size_t count : {(size_t)1, (size_t)1001, (size_t)65536 / tsize(t) + 1}) v.push_back({coll, t, op, count, false});
  return v;
}

std::vector<Case> copyMatrix(Coll coll) {
  std::vector<Case> v;
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32, mkcclInt8, mkcclFloat64, mkcclFloat8e4m3})
    for (size_t count : countsFor(t, false))
      for (bool inPlace : {false, true})
        if (!inPlace || coll == Coll::AllGather) v.push_back({coll, t, mkcclSum, count, inPlace});
  return v;
}

// The protocols a matrix runs under: chosen by size (auto), LL wherever it fits, simple only.
const char* const kProtos[] = {"auto", "ll", "simple"};

// ---- tests -----------------------------------------------------------------------------------

class CollProto : public ::testing::TestWithParam<const char*> {};

TEST_P(CollProto, AllReduceAuto) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedTune proto(team, "coll.proto", GetParam()), algo(team, "allreduce.algo", nullptr);
  EXPECT_EQ("", runCases(team, reductionMatrix(Coll::AllReduce)));
}

TEST_P(CollProto, AllReduceOneShot) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedTune proto(team, "coll.proto", GetParam()), algo(team, "allreduce.algo", "oneshot");
  EXPECT_EQ("", runCases(team, reductionMatrix(Coll::AllReduce)));
}

TEST_P(CollProto, AllReduceTwoShot) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedTune proto(team, "coll.proto", GetParam()), algo(team, "allreduce.algo", "twoshot");
  EXPECT_EQ("", runCases(team, reductionMatrix(Coll::AllReduce)));
}

TEST_P(CollProto, ReduceScatter) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedTune proto(team, "coll.proto", GetParam());
  EXPECT_EQ("", runCases(team, reductionMatrix(Coll::ReduceScatter)));
}

TEST_P(CollProto, AllGather) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedTune proto(team, "coll.proto", GetParam());
  EXPECT_EQ("", runCases(team, copyMatrix(Coll::AllGather)));
}

TEST_P(CollProto, AllToAll) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedTune proto(team, "coll.proto", GetParam());
  EXPECT_EQ("", runCases(team, copyMatrix(Coll::AllToAll)));
}

INSTANTIATE_TEST_SUITE_P(Coll, CollProto, ::testing::ValuesIn(kProtos),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// The GPU check is what every other test relies on: it must see a wrong element and an unwritten one.
TEST(Coll, CheckerCatchesErrors) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  const uint64_t seed = team->sharedSeed();
  const std::string err = team->run([&](Rank& r) -> std::string {
    const size_t count = 4099, n = r.nranks;
    DevBuf in(count * 2), out(count * 2 * n);
    perf::fillInput(in.p, count, mkcclBfloat16, seed, r.rank, 0, r.stream);
    mkcclResult_t res = mkcclAllReduce(in.p, out.p, count, mkcclBfloat16, mkcclSum, r.comm, r.stream);
    if (res != mkcclSuccess) return callError(r, res, "mkcclAllReduce");
    TRY(finish(r));
    perf::CheckResult chk;
    auto check = [&](perf::CollKind k) {
      return perf::checkOutput(out.p, count, mkcclBfloat16, mkcclSum, k, (int)n, r.rank, seed, r.stream, &chk);
    };
    if (check(perf::CollKind::AllReduce) != cudaSuccess || chk.wrong != 0)
      return "a correct AllReduce was counted wrong (" + std::to_string(chk.wrong) + ")";
    // One element off by 0.25 (far above bf16's tolerance): exactly one wrong.
    uint16_t h;
    cudaMemcpy(&h, out.c() + 2 * 1234, 2, cudaMemcpyDeviceToHost);
    float f;
    const uint32_t w = (uint32_t)h << 16;
    memcpy(&f, &w, 4);
    f += 0.25f;
    uint32_t w2;
    memcpy(&w2, &f, 4);
    h = (uint16_t)(w2 >> 16);
    // On the rank's stream: a pageable cudaMemcpy may return before its DMA lands, and the legacy
    // stream does not order the non-blocking stream the check runs on.
    cudaMemcpyAsync(out.c() + 2 * 1234, &h, 2, cudaMemcpyHostToDevice, r.stream);
    if (check(perf::CollKind::AllReduce) != cudaSuccess || chk.wrong != 1)
      return "one corrupted AllReduce element counted as " + std::to_string(chk.wrong) + " wrong";
    // An AllGather that never ran: its poisoned output must be wrong everywhere.
    poison(out.p, count * 2 * n, r.stream);
    if (check(perf::CollKind::AllGather) != cudaSuccess || chk.wrong != (long long)(count * n))
      return "a poisoned AllGather output counted " + std::to_string(chk.wrong) + " wrong of " + std::to_string(count * n);
    return "";
  });
  ASSERT_EQ("", err);
}

// Variable counts: rank p sends cnt(p, q) elements to q. Displacements leave gaps of `gap`
// elements (odd offsets, so misaligned pointers are exercised), and the gaps must stay untouched.
// Checked on the host (each rank regenerates its peers' inputs): few cases.
size_t a2aCount(uint64_t seed, int p, int q, size_t maxCount) {
  uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(p * 131 + q + 1));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return (x % 5 == 0) ? 0 : (size_t)(x % (maxCount + 1));  // some pairs send nothing
}

std::string doAllToAllv(Rank& r, size_t maxCount, mkcclDataType_t t, uint64_t seed, size_t gap) {
  const int n = r.nranks;
  const size_t ts = tsize(t);
  auto cnt = [&](int p, int q) { return a2aCount(seed, p, q, maxCount); };
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
  const mkcclResult_t res =
      mkcclAllToAllv(send.p, sc.data(), sd.data(), recv.p, rc.data(), rd.data(), t, r.comm, r.stream);
  if (res != mkcclSuccess) return callError(r, res, "mkcclAllToAllv");
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

// Runs AllToAllv cases (maxCount, gap) of type t, in one pass.
std::string allToAllvCases(Team* team, mkcclDataType_t t, const std::vector<std::pair<size_t, size_t>>& cases) {
  const uint64_t base = team->sharedSeed();
  return team->run([&](Rank& r) -> std::string {
    for (size_t k = 0; k < cases.size(); ++k) {
      const std::string e = doAllToAllv(r, cases[k].first, t, caseSeed(base, k), cases[k].second);
      if (!e.empty())
        return std::string("AllToAllv ") + tname(t) + " maxCount=" + std::to_string(cases[k].first) +
               " gap=" + std::to_string(cases[k].second) + ": " + e;
    }
    return "";
  });
}

// Pairs of very different sizes in one call: some streams go LL, others simple (by length).
TEST(Coll, AllToAllvUneven) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  const std::vector<std::pair<size_t, size_t>> cases = {{1, 0}, {1, 3}, {777, 0}, {777, 3}, {300000, 0}, {300000, 3}};
  for (const char* proto : kProtos) {
    ScopedTune e(team, "coll.proto", proto);
    for (mkcclDataType_t t : {mkcclBfloat16, mkcclInt8, mkcclFloat64}) {
      const std::string err = allToAllvCases(team, t, cases);
      ASSERT_EQ("", err) << "protocol " << proto;
    }
  }
  // A low LL threshold mixes the protocols inside calls of modest size too.
  ScopedTune e(team, "coll.ll_bytes", "1000");
  ASSERT_EQ("", allToAllvCases(team, mkcclBfloat16, {{777, 0}, {777, 3}, {3000, 1}}));
}

// Calls larger than the workspace pipeline through its rings (many steps per slot); the LL area
// of a 4 MiB workspace is small, so LL stops early.
TEST(Coll, LargerThanWorkspace) {
  MKCCL_GET_TEAM(team, TeamKind::kSmallWs);
  std::vector<Case> v;
  for (mkcclRedOp_t op : {mkcclSum, mkcclMax})
    for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32})
      for (size_t count : countsFor(t, true))
        for (bool inPlace : {false, true}) v.push_back({Coll::AllReduce, t, op, count, inPlace});
  for (const char* algo : {"oneshot", "twoshot"}) {
    ScopedTune e(team, "allreduce.algo", algo);
    EXPECT_EQ("", runCases(team, v)) << algo;
  }
  v.clear();
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat32})
    for (size_t count : countsFor(t, true))
      for (bool inPlace : {false, true}) {
        v.push_back({Coll::ReduceScatter, t, mkcclSum, count, inPlace});
        v.push_back({Coll::AllGather, t, mkcclSum, count, inPlace});
      }
  for (size_t count : {(size_t)1001, (size_t)(3u << 20) + 1}) v.push_back({Coll::AllToAll, mkcclBfloat16, mkcclSum, count, false});
  EXPECT_EQ("", runCases(team, v));
  ASSERT_EQ("", allToAllvCases(team, mkcclBfloat16, {{1001, 1}, {(3u << 20) + 1, 1}}));
}

// With 2 CTAs or 1 CTA a CTA runs every role of several channels in turn (simple), or many units
// per thread (LL).
void fewCtas(TeamKind kind) {
  MKCCL_GET_TEAM(team, kind);
  for (const char* proto : kProtos) {
    ScopedTune p(team, "coll.proto", proto);
    for (const char* algo : {"oneshot", "twoshot"}) {
      ScopedTune e(team, "allreduce.algo", algo);
      std::vector<Case> v;
      for (size_t count : {(size_t)1, (size_t)4099, (size_t)(3u << 20) + 7})
        for (bool inPlace : {false, true}) v.push_back({Coll::AllReduce, mkcclBfloat16, mkcclSum, count, inPlace});
      EXPECT_EQ("", runCases(team, v)) << proto << " " << algo;
    }
    std::vector<Case> v;
    for (size_t count : {(size_t)4099, (size_t)(1u << 20) + 7}) {
      v.push_back({Coll::ReduceScatter, mkcclFloat32, mkcclMax, count, false});
      v.push_back({Coll::AllGather, mkcclBfloat16, mkcclSum, count, false});
      v.push_back({Coll::AllToAll, mkcclBfloat16, mkcclSum, count, false});
    }
    EXPECT_EQ("", runCases(team, v)) << proto;
    EXPECT_EQ("", allToAllvCases(team, mkcclBfloat16, {{4099, 0}, {(1u << 20) + 7, 1}})) << proto;
  }
}
TEST(Coll, TwoCtas) { fewCtas(TeamKind::kFewCtas); }
TEST(Coll, OneCta) { fewCtas(TeamKind::kOneCta); }

// A 1-rank communicator: every collective is a local copy.
TEST(Coll, SingleRank) {
  MKCCL_GET_TEAM(team, TeamKind::kSingle);
  std::vector<Case> v;
  for (size_t count : {(size_t)0, (size_t)1, (size_t)1001, (size_t)(1u << 20) + 3}) {
    v.push_back({Coll::AllReduce, mkcclBfloat16, mkcclAvg, count, false});
    v.push_back({Coll::AllReduce, mkcclFloat32, mkcclProd, count, true});
    v.push_back({Coll::ReduceScatter, mkcclBfloat16, mkcclSum, count, false});
    v.push_back({Coll::AllGather, mkcclInt8, mkcclSum, count, false});
    v.push_back({Coll::AllGather, mkcclInt8, mkcclSum, count, true});
    v.push_back({Coll::AllToAll, mkcclFloat32, mkcclSum, count, false});
  }
  ASSERT_EQ("", runCases(team, v));
}

// 120 calls of every kind back to back on one stream, no host synchronisation in between; each
// writes its own output. Sizes vary so that protocols (LL, simple), algorithms and layouts vary
// from call to call, and so does the half of the LL area. Catches flags or staging reused across
// calls.
void backToBack(Team* team) {
  constexpr int kCalls = 120;
  const uint64_t seed = team->sharedSeed();
  const std::string err = team->run([&](Rank& r) -> std::string {
    const int n = r.nranks;
    const mkcclDataType_t t = mkcclBfloat16;
    const size_t ts = 2;
    auto countOf = [](int i) { return (size_t)((i * 7919) % 300000 + 1); };
    struct Call {
      DevBuf* out;
      size_t count;
      int kind;
    };
    std::vector<Call> calls;
    const size_t maxCount = 300001;
    DevBuf in(maxCount * n * ts);
    perf::fillInput(in.p, maxCount * n, t, seed, r.rank, 0, r.stream);
    std::string e;
    for (int i = 0; i < kCalls && e.empty(); ++i) {
      Call c;
      c.kind = i % 4;
      c.count = countOf(i);
      const size_t outBytes = c.count * ts * ((c.kind == 1 || c.kind == 3) ? n : 1);
      c.out = new DevBuf(outBytes);
      poison(c.out->p, outBytes, r.stream);
      mkcclResult_t res;
      switch (c.kind) {
        case 0: res = mkcclAllReduce(in.p, c.out->p, c.count, t, mkcclSum, r.comm, r.stream); break;
        case 1: res = mkcclAllGather(in.p, c.out->p, c.count, t, r.comm, r.stream); break;
        case 2: res = mkcclReduceScatter(in.p, c.out->p, c.count, t, mkcclMax, r.comm, r.stream); break;
        default: res = mkcclAllToAll(in.p, c.out->p, c.count, t, r.comm, r.stream); break;
      }
      calls.push_back(c);
      if (res != mkcclSuccess) e = callError(r, res, "back-to-back call");
    }
    if (e.empty()) e = finish(r);
    static const perf::CollKind kinds[] = {perf::CollKind::AllReduce, perf::CollKind::AllGather,
                                           perf::CollKind::ReduceScatter, perf::CollKind::AllToAll};
    for (int i = 0; i < (int)calls.size() && e.empty(); ++i) {
      const Call& c = calls[i];
      perf::CheckResult chk;
      const mkcclRedOp_t op = c.kind == 2 ? mkcclMax : mkcclSum;
      const cudaError_t ce = perf::checkOutput(c.out->p, c.count, t, op, kinds[c.kind], n, r.rank, seed, r.stream, &chk);
      if (ce != cudaSuccess || chk.wrong)
        e = "call " + std::to_string(i) + " (kind " + std::to_string(c.kind) + ", count " + std::to_string(c.count) +
            "): " + (ce != cudaSuccess ? cudaGetErrorString(ce) : std::to_string(chk.wrong) + " elements wrong");
    }
    for (Call& c : calls) delete c.out;
    return e;
  });
  ASSERT_EQ("", err);
}
TEST(Coll, BackToBack) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  backToBack(team);
}
// The LL threshold low: most calls simple, some LL, interleaved.
TEST(Coll, BackToBackMixedProtocols) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  ScopedTune e(team, "coll.ll_bytes", "64K");
  backToBack(team);
}

// Every rank gets bit-identical AllReduce results (reduction in rank order, one reducer per block),
// whatever the protocol.
void identicalOnAllRanks(Team* team, const char* proto, const char* algo, size_t count) {
  ScopedTune p(team, "coll.proto", proto), e(team, "allreduce.algo", algo);
  const uint64_t seed = team->sharedSeed();
  std::vector<uint64_t> hashes(team->nranks(), 0);
  const std::string err = team->run([&](Rank& r) -> std::string {
    DevBuf buf(count * 4);
    perf::fillInput(buf.p, count, mkcclFloat32, seed, r.rank, 0, r.stream);
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
  for (int q = 1; q < team->nranks(); ++q)
    EXPECT_EQ(hashes[0], hashes[q]) << "rank " << q << " differs (" << proto << ", " << algo << ", count " << count << ")";
}

TEST(Coll, AllReduceIdenticalOnAllRanks) {
  MKCCL_GET_TEAM(team, TeamKind::kDefault);
  if (team->nranks() < 2) GTEST_SKIP() << "needs 2 ranks";
  for (const char* proto : {"ll", "simple"})
    for (const char* algo : {"oneshot", "twoshot"})
      for (size_t count : {(size_t)(1u << 15) + 11, (size_t)(1u << 19) + 11}) identicalOnAllRanks(team, proto, algo, count);
}

}  // namespace
}  // namespace test
}  // namespace mkccl
