// One wire fuzz case (see wire_case.h).
#include "wire_case.h"
#include <string.h>
#include <unistd.h>
#include <chrono>
#include <future>
#include <memory>
#include <vector>
#include "bootstrap_test_util.h"
#include "hostile.h"
#include "runtime/bootstrap.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "base/log.h"
#include "base/settings.h"

namespace mkccl {
namespace fuzz {
namespace {

using Clock = std::chrono::steady_clock;
using test::secondsSince;

// Reads the script; past its end every byte is 0.
struct Reader {
  const uint8_t* p;
  size_t n, at = 0;
  uint8_t byte() { return at < n ? p[at++] : 0; }
  std::vector<char> bytes(size_t k) {
    std::vector<char> v;
    for (size_t i = 0; i < k && at < n; i++) v.push_back((char)p[at++]);
    return v;
  }
};

// A genuine rank: rendezvous, a barrier and an allGather, then a clean destroy. 0 when all is well.
int genuineRank(const mkcclUniqueId& id, int rank, int nranks) {
  std::unique_ptr<Bootstrap> b;
  mkcclResult_t r = Bootstrap::create(id, rank, nranks, kCaseTimeoutMs, &b);
  if (r != mkcclSuccess) return 100 + r;
  if ((r = b->barrier()) != mkcclSuccess) return 110 + r;
  std::vector<uint64_t> v(nranks, 0);
  v[rank] = 0xabc0 + rank;
  if ((r = b->allGather(v.data(), sizeof(uint64_t))) != mkcclSuccess) return 120 + r;
  for (int q = 0; q < nranks; q++)
    if (v[q] != 0xabc0u + q) return 130;
  return 0;
}

std::string describeOp(int kind, size_t bytes, bool close) {
  static const char* names[] = {"idle",       "junk",         "hello",          "hello+stray", "announce",
                                "root-error", "partial-hdr", "conn-hello", "hello-bad-len"};
  return std::string(names[kind]) + "(" + std::to_string(bytes) + (close ? ",close)" : ")");
}

}  // namespace

const char* outcomeName(Outcome o) {
  static const char* names[] = {"clean", "clean error", "broken", "hang", "spin", "leak", "crash"};
  int i = (int)o;
  return i >= 0 && i < (int)Outcome::Count ? names[i] : "?";
}

CaseReport runWireCase(const uint8_t* data, size_t size) {
  CaseReport rep;
  Reader in{data, size};
  const uint8_t flags = in.byte();
  const bool atRankPort = flags & 1, withId = flags & 2;
  const int nranks = flags & 4 ? 3 : 2;
  // Sometimes no genuine rank comes at all: the root alone with what the attacker sent.
  const bool attackerAlone = (flags & 8) && (flags & 16) && !atRankPort;
  const int nconn = 1 + in.byte() % 6;

  const int fds0 = test::countOpenFds(), threads0 = test::countThreads();
  // The root and the ranks time out after kCaseTimeoutMs.
  const std::string t = std::to_string(kCaseTimeoutMs);
  setenv("MKCCL_TIMEOUT_MS", t.c_str(), 1);
  unsetenv("MKCCL_COMM_ID");
  settingsRefresh();
  mkcclUniqueId id, other;
  if (bootstrapCreateRoot(&id) != mkcclSuccess) {
    rep.outcome = Outcome::Broken;
    rep.detail = std::string("no root: ") + lastError();
    return rep;
  }
  auto t0 = Clock::now();
  const double cpu0 = test::cpuSeconds();
  const SocketAddress root = test::idRootAddress(id);
  idEncode(root, randomU64(), randomKey(), 0, &other);  // a stranger's id: same root address, another secret

  rep.detail = std::string(atRankPort ? "rank 0's port" : "root") + (withId ? ", with the id" : ", stranger") +
               ", " + (attackerAlone ? std::string("no rank comes") : std::to_string(nranks) + " ranks") + ":";
  std::vector<std::future<int>> ranks;
  SocketAddress target = root;
  if (atRankPort) {
    std::vector<SocketAddress> known = test::listeningAddresses();
    ranks.push_back(std::async(std::launch::async, [&] { return genuineRank(id, 0, nranks); }));
    if (!test::waitNewListeningAddress(known, 1000, &target)) target = root;  // rank 0 failed at once
  }

  std::vector<int> held;
  for (int c = 0; c < nconn; c++) {
    const uint8_t op = in.byte(), arg = in.byte();
    const int kind = op % 9;
    const bool closeAfter = op & 0x80;
    const mkcclUniqueId& hid = withId ? id : other;
    std::vector<char> m;
    switch (kind) {
      case 0: break;
      case 1: m = in.bytes(1 + arg % 64); break;
      case 2: m = test::wireRootHello(hid, (int)(arg % (nranks + 2)) - 1, op & 0x40 ? nranks + 1 : nranks, root); break;
      case 3: {
        m = test::wireRootHello(hid, (int)(arg % (nranks + 2)) - 1, op & 0x40 ? nranks + 1 : nranks, root);
        std::vector<char> stray = in.bytes(1 + arg % 32);
        m.insert(m.end(), stray.begin(), stray.end());
        break;
      }
      case 4: {
        m = test::wireHeaderAnnouncing((uint64_t)arg * 997 + 1);
        std::vector<char> some = in.bytes(arg % 16);
        m.insert(m.end(), some.begin(), some.end());
        break;
      }
      case 5: m = test::wireForgedRootError(); break;
      case 6: m = test::wireHeaderAnnouncing(16); m.resize(arg % m.size()); break;
      case 7: m = test::wireForgedConnHello(); break;
      case 8: m = test::wireRootHelloWrongLength(hid, arg % nranks, nranks, 1 + arg % 40); break;
    }
    rep.detail += " " + describeOp(kind, m.size(), closeAfter);
    int fd = test::rawConnect(target);
    if (fd < 0) continue;
    if (!m.empty()) test::rawSend(fd, m);
    if (closeAfter)
      close(fd);
    else
      held.push_back(fd);
  }

  for (int r = atRankPort ? 1 : 0; r < nranks && !attackerAlone; r++)
    ranks.push_back(std::async(std::launch::async, [&id, r, nranks] { return genuineRank(id, r, nranks); }));
  // Every rank returns by its timeout (+ grace for a loaded machine), success or not.
  const auto bound = t0 + std::chrono::milliseconds(kCaseTimeoutMs + 1000);
  std::vector<int> res;
  bool late = false;
  for (auto& f : ranks) {
    if (f.wait_until(bound) != std::future_status::ready) late = true;
    res.push_back(f.get());  // waits on: a rank that never returns hangs the case (the driver kills it)
  }
  const double ranksWall = secondsSince(t0);
  for (int fd : held) close(fd);
  bool rootGone = true;
  while (bootstrapRootsActive() > 0) {
    if (secondsSince(t0) * 1000 > kCaseTimeoutMs + 1500) {
      rootGone = false;
      break;
    }
    usleep(1000);
  }
  const double wall = secondsSince(t0), cpu = test::cpuSeconds() - cpu0;
  bool allOk = true;
  rep.detail += "; ranks:";
  for (int r : res) {
    rep.detail += " " + std::to_string(r);
    allOk &= r == 0;
  }
  char fig[128];
  snprintf(fig, sizeof(fig), "; ranks %.3f s, all %.3f s, cpu %.3f s", ranksWall, wall, cpu);
  rep.detail += fig;

  if (late || !rootGone) {
    rep.outcome = Outcome::Hang;
    rep.detail += late ? " (a rank returned past its timeout + 1 s)" : " (the root outlived its timeout + 1.5 s)";
  } else if (cpu > 0.3 + 0.3 * wall) {
    rep.outcome = Outcome::Spin;
  } else if (!withId && (!allOk || ranksWall * 1000 > kCaseTimeoutMs)) {
    rep.outcome = Outcome::Broken;
    rep.detail += allOk ? " (stalled)" : " (failed)";
  } else {
    rep.outcome = allOk ? Outcome::Clean : Outcome::CleanError;
  }
  if (rep.outcome == Outcome::Clean || rep.outcome == Outcome::CleanError || rep.outcome == Outcome::Broken) {
    // Everything ended: nothing may be left (threads may take a moment to go).
    auto l0 = Clock::now();
    while ((test::countThreads() > threads0 || test::countOpenFds() != fds0) && secondsSince(l0) < 2) usleep(1000);
    if (test::countThreads() > threads0 || test::countOpenFds() != fds0) {
      rep.detail += "; left " + std::to_string(test::countOpenFds() - fds0) + " fds, " +
                    std::to_string(test::countThreads() - threads0) + " threads";
      rep.outcome = Outcome::Leak;
    }
  }
  return rep;
}

}  // namespace fuzz
}  // namespace mkccl
