// Hostile and careless peers against the bootstrap, with their figures: what was sent on how many
// connections, and the wall and CPU time it cost against the timeout. A stranger (no id) must
// neither stall nor fail a rendezvous; a peer holding the id must not make a wait outlive its
// deadline, spin a core, or leave the others to find out by timing out.
//
// Each case prints one line "HOSTILE <case>: ..." (docs/HARDENING.md collects them).
#include <arpa/inet.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <random>
#include "bootstrap_test_util.h"
#include "hostile.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "base/log.h"

namespace mkccl {
namespace test {
namespace {

using Clock = std::chrono::steady_clock;

struct Figures {
  int conns = 0;
  size_t bytes = 0;
};

void report(const char* name, const Figures& f, double wall, double cpu, int timeoutMs, const std::string& outcome) {
  fprintf(stderr, "HOSTILE %s: %d connection(s), %zu bytes; wall %.2f s, cpu %.2f s, timeout %.1f s: %s\n", name,
          f.conns, f.bytes, wall, cpu, timeoutMs / 1000.0, outcome.c_str());
}

mkcclUniqueId newRoot(int timeoutMs) {
  std::string t = std::to_string(timeoutMs);
  EnvGuard g("MKCCL_TIMEOUT_MS", t.c_str());
  EnvGuard c("MKCCL_COMM_ID", nullptr);
  mkcclUniqueId id;
  EXPECT_EQ(mkcclSuccess, bootstrapCreateRoot(&id)) << lastError();
  return id;
}

// Waits until no root service runs; false after limitMs.
bool rootsGone(int limitMs) {
  auto t0 = Clock::now();
  while (bootstrapRootsActive() > 0) {
    if (secondsSince(t0) * 1000 > limitMs) return false;
    usleep(2000);
  }
  return true;
}

// Leaves nothing behind for the next case, whatever this one did (a root that outlived its bound
// is waited for here, up to 30 s).
void settle() { waitQuiet(1, 30000); }

std::vector<char> junk(std::mt19937_64& g, size_t n) {
  std::vector<char> v(n);
  for (char& c : v) c = (char)g();
  return v;
}

// ---- the root, from a peer holding the id ----

// A valid hello followed by 1-15 stray bytes (less than a header): the root must neither spin nor
// outlive its timeout, whether the peer then stays or leaves.
TEST(HostileRoot, HelloThenStrayBytes) {
  settle();
  const int T = 1000;
  for (int extra : {1, 15, 40}) {
    for (bool stay : {false, true}) {
      mkcclUniqueId id = newRoot(T);
      auto t0 = Clock::now();
      double cpu0 = cpuSeconds();
      Figures f;
      int fd = rawConnect(idRootAddress(id));
      ASSERT_GE(fd, 0);
      f.conns = 1;
      std::vector<char> m = wireRootHello(id, 0, 2, loopbackAddress(1));
      m.resize(m.size() + extra, (char)0x5a);
      f.bytes = m.size();
      ASSERT_TRUE(rawSend(fd, m));
      usleep(300000);
      if (!stay) close(fd);
      bool gone = rootsGone(T + 1500);
      double wall = secondsSince(t0), cpu = cpuSeconds() - cpu0;
      if (stay) close(fd);
      std::string name = "root: hello + " + std::to_string(extra) + " stray bytes, peer " + (stay ? "stays" : "leaves");
      report(name.c_str(), f, wall, cpu, T,
             !gone ? "HANG (the root outlived its timeout)" : cpu > 0.3 + 0.25 * wall ? "SPIN" : "clean");
      EXPECT_TRUE(gone) << name << ": the root still runs " << wall << " s after it started (timeout " << T << " ms)";
      EXPECT_LT(cpu, 0.3 + 0.25 * wall) << name << ": the root spun";
      settle();
    }
  }
}

// The process at its descriptor limit with connections held: accept fails (EMFILE); the root must
// still end at its timeout without spinning. In a child process (the limit is process-wide).
TEST(HostileRoot, OutOfDescriptors) {
  settle();
  const int T = 1000;
  int pipeFds[2];
  ASSERT_EQ(0, pipe(pipeFds));
  fflush(stderr);
  pid_t child = fork();
  if (child == 0) {
    close(pipeFds[0]);
    mkcclUniqueId id = newRoot(T);
    auto t0 = Clock::now();
    double cpu0 = cpuSeconds();
    // The root's thread is up and waiting before the limit drops (the sanitizers' own checks at a
    // thread's start need a descriptor or two).
    usleep(50000);
    rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = (rlim_t)countOpenFds() + 8;
    setrlimit(RLIMIT_NOFILE, &lim);
    std::vector<int> held;
    for (int i = 0; i < 64; i++) {
      int fd = rawConnect(idRootAddress(id));
      if (fd < 0) break;
      held.push_back(fd);
    }
    bool gone = rootsGone(T + 1500);
    double wall = secondsSince(t0), cpu = cpuSeconds() - cpu0;
    double out[4] = {(double)held.size(), wall, cpu, gone ? 1.0 : 0.0};
    (void)!write(pipeFds[1], out, sizeof(out));
    _exit(0);
  }
  close(pipeFds[1]);
  double in[4] = {0, 0, 0, 0};
  ssize_t n = read(pipeFds[0], in, sizeof(in));
  close(pipeFds[0]);
  int st = 0;
  waitpid(child, &st, 0);
  ASSERT_EQ((ssize_t)sizeof(in), n) << "the child died: status " << st;
  Figures f;
  f.conns = (int)in[0];
  bool gone = in[3] != 0;
  report("root: out of descriptors, connections held", f, in[1], in[2], T,
         !gone ? "HANG (the root outlived its timeout)" : in[2] > 0.3 + 0.25 * in[1] ? "SPIN" : "clean");
  EXPECT_TRUE(gone) << "the root still runs at its timeout + 1.5 s with the process out of descriptors";
  EXPECT_LT(in[2], 0.3 + 0.25 * in[1]) << "the root spun while accept failed";
}

// Strangers on the root's port (idle, junk, forged frames) do not disturb three real ranks.
TEST(HostileRoot, StrangersDoNotDisturbTheRendezvous) {
  settle();
  const int T = 5000;
  mkcclUniqueId id = newRoot(T);
  std::mt19937_64 g(freshSeed() + 11);
  Figures f;
  std::vector<int> held;
  for (int i = 0; i < 96; i++) {
    int fd = rawConnect(idRootAddress(id));
    ASSERT_GE(fd, 0);
    held.push_back(fd);
    f.conns++;
    std::vector<char> m;
    if (i % 3 == 1) m = junk(g, 1 + g() % 300);
    if (i % 3 == 2) m = i % 2 ? wireForgedRootError() : wireHeaderAnnouncing(60000);
    f.bytes += m.size();
    if (!m.empty()) rawSend(fd, m);
  }
  auto t0 = Clock::now();
  double cpu0 = cpuSeconds();
  uint64_t seed = freshSeed() + 12;
  std::vector<int> res = runThreads(3, [&](int r) { return rendezvousAndExercise(id, r, 3, seed, T, false); });
  double wall = secondsSince(t0), cpu = cpuSeconds() - cpu0;
  for (int fd : held) close(fd);
  bool ok = res[0] == 0 && res[1] == 0 && res[2] == 0;
  report("root: 96 strangers (idle, junk, forged frames), then 3 ranks", f, wall, cpu, T,
         !ok ? "BROKEN (the rendezvous failed)" : wall > 1.5 ? "STALLED" : "clean");
  for (int r = 0; r < 3; r++) EXPECT_EQ(0, res[r]) << "rank " << r;
  EXPECT_LT(wall, 1.5) << "the rendezvous waited for strangers";
  settle();
}

// A peer holding the id sends a malformed hello: the other ranks learn why at once, not by timing out.
TEST(HostileRoot, BadHelloFailsTheOthersWithTheReason) {
  settle();
  const int T = 5000;
  mkcclUniqueId id = newRoot(T);
  Figures f;
  int fd = rawConnect(idRootAddress(id));
  ASSERT_GE(fd, 0);
  std::vector<char> m = wireRootHelloWrongLength(id, 1, 2, 8);
  f.conns = 1, f.bytes = m.size();
  ASSERT_TRUE(rawSend(fd, m));
  auto t0 = Clock::now();
  double cpu0 = cpuSeconds();
  std::unique_ptr<Bootstrap> b;
  mkcclResult_t r = Bootstrap::create(id, 0, 2, T, &b);
  std::string msg = lastError();
  double wall = secondsSince(t0), cpu = cpuSeconds() - cpu0;
  close(fd);
  report("root: a rank with the id sends a hello 8 bytes too long", f, wall, cpu, T,
         r == mkcclSuccess ? "WRONG (succeeded)" : wall > 1.5 ? "SLOW (the others time out)" : "clean: " + msg);
  EXPECT_NE(mkcclSuccess, r);
  EXPECT_NE(mkcclTimeout, r) << msg;
  EXPECT_LT(wall, 1.5) << "the other rank learnt of the bad hello by timing out: " << msg;
  settle();
}

// ---- a rank's listening port, from strangers (no id) ----

// Starts rank 0 of 2, finds its listening port, lets `attack` at it, then starts rank 1; both run
// the whole exercise. The rendezvous must succeed as fast as without the attack.
void portAttack(const char* name,
                const std::function<void(const SocketAddress& port, std::vector<int>* held, Figures*)>& attack) {
  settle();
  const int T = 3000;
  mkcclUniqueId id = newRoot(T);
  std::vector<SocketAddress> known = listeningAddresses();
  uint64_t seed = freshSeed() + 21;
  auto t0 = Clock::now();
  double cpu0 = cpuSeconds();
  std::future<int> rank0 = std::async(std::launch::async, [&] { return rendezvousAndExercise(id, 0, 2, seed, T, false); });
  SocketAddress port;
  ASSERT_TRUE(waitNewListeningAddress(known, 2000, &port)) << "rank 0's listening port did not appear";
  std::vector<int> held;
  Figures f;
  attack(port, &held, &f);
  int r1 = rendezvousAndExercise(id, 1, 2, seed, T, false);
  int r0 = rank0.get();
  double wall = secondsSince(t0), cpu = cpuSeconds() - cpu0;
  for (int fd : held) close(fd);
  bool ok = r0 == 0 && r1 == 0;
  report(name, f, wall, cpu, T, !ok ? "BROKEN (the rendezvous failed)" : wall > 1.5 ? "STALLED" : "clean");
  EXPECT_EQ(0, r0) << name;
  EXPECT_EQ(0, r1) << name;
  EXPECT_LT(wall, 1.5) << name << ": the rendezvous waited for a stranger";
  settle();
}

int connectAndSend(const SocketAddress& port, const std::vector<char>& m, std::vector<int>* held, Figures* f) {
  int fd = rawConnect(port);
  EXPECT_GE(fd, 0) << "cannot connect to " << socketAddrToString(port);
  if (fd < 0) return -1;
  held->push_back(fd);
  f->conns++;
  f->bytes += m.size();
  if (!m.empty()) rawSend(fd, m);
  return fd;
}

TEST(HostileRankPort, IdleConnection) {
  portAttack("rank port: one idle connection", [](const SocketAddress& port, std::vector<int>* held, Figures* f) {
    connectAndSend(port, {}, held, f);
  });
}

TEST(HostileRankPort, PartialHeader) {
  portAttack("rank port: 8 bytes of a header", [](const SocketAddress& port, std::vector<int>* held, Figures* f) {
    std::vector<char> h = wireHeaderAnnouncing(16);
    h.resize(8);
    connectAndSend(port, h, held, f);
  });
}

TEST(HostileRankPort, HeaderAnnouncing60000BytesSending10) {
  portAttack("rank port: header announcing 60000 bytes, 10 sent", [](const SocketAddress& port, std::vector<int>* held, Figures* f) {
    std::vector<char> m = wireHeaderAnnouncing(60000);
    m.resize(m.size() + 10, 'x');
    connectAndSend(port, m, held, f);
  });
}

TEST(HostileRankPort, ForgedRootError) {
  portAttack("rank port: forged root-error message", [](const SocketAddress& port, std::vector<int>* held, Figures* f) {
    connectAndSend(port, wireForgedRootError(), held, f);
  });
}

TEST(HostileRankPort, ForgedConnectionHello) {
  portAttack("rank port: forged connection hello", [](const SocketAddress& port, std::vector<int>* held, Figures* f) {
    connectAndSend(port, wireForgedConnHello(), held, f);
  });
}

TEST(HostileRankPort, Flood) {
  portAttack("rank port: 128 connections (idle, junk, forged)", [](const SocketAddress& port, std::vector<int>* held, Figures* f) {
    std::mt19937_64 g(freshSeed() + 31);
    for (int i = 0; i < 128; i++) {
      std::vector<char> m;
      if (i % 4 == 1) m = junk(g, 1 + g() % 2000);
      if (i % 4 == 2) m = wireForgedRootError();
      if (i % 4 == 3) m = wireForgedConnHello();
      connectAndSend(port, m, held, f);
    }
  });
}

// Strangers at a rank's port while it waits in a recv (its connection from the sender comes later).
TEST(HostileRankPort, DuringARecv) {
  settle();
  const int T = 3000;
  mkcclUniqueId id = newRoot(T);
  std::vector<SocketAddress> known = listeningAddresses();
  std::unique_ptr<Bootstrap> bs[2];
  std::vector<int> res = runThreads(2, [&](int r) { return (int)Bootstrap::create(id, r, 2, T, &bs[r]); });
  ASSERT_EQ(0, res[0]);
  ASSERT_EQ(0, res[1]);
  std::vector<SocketAddress> ports = listeningAddresses();
  std::vector<int> held;
  Figures f;
  auto t0 = Clock::now();
  double cpu0 = cpuSeconds();
  std::future<mkcclResult_t> recv = std::async(std::launch::async, [&] {
    uint64_t v = 0;
    mkcclResult_t r = bs[1]->recv(0, 77, &v, sizeof(v));
    return r == mkcclSuccess && v == 0x1234567890ull ? r : (r == mkcclSuccess ? mkcclInternalError : r);
  });
  usleep(50000);
  for (const SocketAddress& p : ports) {
    if (SocketAddressIn(p, known)) continue;  // the root's
    connectAndSend(p, {}, &held, &f);
    connectAndSend(p, wireForgedConnHello(), &held, &f);
    connectAndSend(p, wireForgedRootError(), &held, &f);
  }
  usleep(200000);
  uint64_t v = 0x1234567890ull;
  mkcclResult_t s = bs[0]->send(1, 77, &v, sizeof(v));
  mkcclResult_t r = recv.get();
  double wall = secondsSince(t0), cpu = cpuSeconds() - cpu0;
  for (int fd : held) close(fd);
  bool ok = s == mkcclSuccess && r == mkcclSuccess;
  report("rank ports: strangers while a rank waits in recv", f, wall, cpu, T,
         !ok ? "BROKEN (the recv failed)" : wall > 1.5 ? "STALLED" : "clean");
  EXPECT_EQ(mkcclSuccess, s) << lastError();
  EXPECT_EQ(mkcclSuccess, r);
  EXPECT_LT(wall, 1.5);
  std::vector<int> after = runThreads(2, [&](int q) { return (int)bs[q]->barrier(); });
  EXPECT_EQ(0, after[0]);
  EXPECT_EQ(0, after[1]);
  bs[0].reset();
  bs[1].reset();
  settle();
}

// ---- a failure's reason reaches the others ----

// Rank 1 of 3 fails on its own (a message to itself of another size); ranks 0 and 2, waiting in a
// barrier, return at once with rank 1's reason, not just "it hung up".
TEST(HostileFailure, TheReasonReachesTheOthers) {
  settle();
  const int T = 5000;
  mkcclUniqueId id = newRoot(T);
  std::vector<std::string> msgs(3);
  std::vector<double> secs(3);
  std::vector<int> res = runThreads(3, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    if (Bootstrap::create(id, r, 3, T, &b) != mkcclSuccess) return 100;
    auto t0 = Clock::now();
    mkcclResult_t e;
    if (r == 1) {
      usleep(200000);
      int x = 1;
      long long y = 0;
      b->send(1, 9, &x, sizeof(x));
      e = b->recv(1, 9, &y, sizeof(y));  // 4 bytes sent to itself, 8 expected
    } else {
      e = b->barrier();
    }
    secs[r] = secondsSince(t0);
    msgs[r] = lastError();
    return (int)e;
  });
  EXPECT_EQ(mkcclInternalError, res[1]) << msgs[1];
  Figures f;
  for (int r : {0, 2}) {
    bool reason = msgs[r].find("rank 1") != std::string::npos && msgs[r].find("tag 0x9") != std::string::npos;
    std::string name = "failure: rank 1 fails on its own, rank " + std::to_string(r) + " waits in a barrier";
    report(name.c_str(), f, secs[r], 0, T,
           res[r] == mkcclSuccess ? "WRONG (succeeded)"
           : secs[r] > 1.5        ? "SLOW (timed out)"
           : !reason              ? "NO REASON: " + msgs[r]
                                  : "clean: " + msgs[r]);
    EXPECT_NE(mkcclSuccess, res[r]);
    EXPECT_LT(secs[r], 1.5);
    EXPECT_TRUE(reason) << "rank " << r << " got: " << msgs[r];
  }
  settle();
}

}  // namespace
}  // namespace test
}  // namespace mkccl
