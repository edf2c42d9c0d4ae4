// The bootstrap's failures: missing and dead ranks, wrong rank sets, abort, mismatched messages, and
// that nothing leaks. Short timeouts so the suite runs in seconds; bounds are loose for loaded CI.
#include <arpa/inet.h>
#include <poll.h>
#include <string.h>
#include "bootstrap_test_util.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "runtime/bootstrap_wire.h"
#include "base/log.h"

namespace mkccl {
namespace test {
namespace {

using Clock = std::chrono::steady_clock;

mkcclUniqueId newRoot(const char* rootTimeoutMs) {
  EnvGuard t("MKCCL_TIMEOUT_MS", rootTimeoutMs);
  EnvGuard c("MKCCL_COMM_ID", nullptr);
  mkcclUniqueId id;
  EXPECT_EQ(mkcclSuccess, bootstrapCreateRoot(&id)) << lastError();
  return id;
}

struct Outcome {
  int res = -1;
  double seconds = 0;
  std::string msg;
};

// create() of each listed rank in a thread.
std::vector<Outcome> createRanks(const mkcclUniqueId& id, const std::vector<int>& ranks, const std::vector<int>& nranks,
                                 int timeoutMs) {
  std::vector<Outcome> out(ranks.size());
  runThreads((int)ranks.size(), [&](int i) {
    auto t0 = Clock::now();
    std::unique_ptr<Bootstrap> b;
    out[i].res = Bootstrap::create(id, ranks[i], nranks[i], timeoutMs, &b);
    out[i].seconds = secondsSince(t0);
    out[i].msg = lastError();
    return 0;
  });
  return out;
}

TEST(BootstrapFailure, MissingRankTimesOutEveryoneAndIsNamed) {
  // The root gives up first (1 s) and tells every rank which rank is missing.
  mkcclUniqueId id = newRoot("1000");
  auto out = createRanks(id, {0, 1, 2}, {4, 4, 4}, 5000);
  for (auto& o : out) {
    EXPECT_EQ(mkcclTimeout, o.res) << o.msg;
    EXPECT_GT(o.seconds, 0.8);
    EXPECT_LT(o.seconds, 3.0) << "the root's timeout should end the wait, not the rank's";
    EXPECT_NE(std::string::npos, o.msg.find("missing: 3")) << o.msg;
  }
}

TEST(BootstrapFailure, MissingRankTimesOutAtTheRanksTimeout) {
  // The ranks give up first (1 s): a rank's own deadline bounds its wait.
  mkcclUniqueId id = newRoot("4000");
  auto out = createRanks(id, {0, 2}, {3, 3}, 1000);
  for (auto& o : out) {
    EXPECT_EQ(mkcclTimeout, o.res) << o.msg;
    EXPECT_GT(o.seconds, 0.8);
    EXPECT_LT(o.seconds, 2.5);
  }
}

TEST(BootstrapFailure, NoRootTimesOut) {
  mkcclUniqueId id = idWithoutRoot();
  auto out = createRanks(id, {1}, {2}, 1000);
  EXPECT_EQ(mkcclTimeout, out[0].res) << out[0].msg;
  EXPECT_GT(out[0].seconds, 0.8);
  EXPECT_LT(out[0].seconds, 2.5);
  EXPECT_NE(std::string::npos, out[0].msg.find("root")) << out[0].msg;
}

TEST(BootstrapFailure, CommIdWithoutRankZeroTimesOut) {
  std::string addr = "127.0.0.1:" + std::to_string(freeLoopbackPort());
  EnvGuard c("MKCCL_COMM_ID", addr.c_str());
  mkcclUniqueId id;
  ASSERT_EQ(mkcclSuccess, bootstrapCreateRoot(&id));
  auto out = createRanks(id, {1, 2}, {3, 3}, 1000);
  for (auto& o : out) {
    EXPECT_EQ(mkcclTimeout, o.res) << o.msg;
    EXPECT_LT(o.seconds, 2.5);
  }
}

TEST(BootstrapFailure, DuplicateRankFailsEveryone) {
  mkcclUniqueId id = newRoot("10000");
  auto out = createRanks(id, {0, 0}, {2, 2}, 10000);
  for (auto& o : out) {
    EXPECT_EQ(mkcclInvalidUsage, o.res) << o.msg;
    EXPECT_LT(o.seconds, 3.0) << "a wrong rank set must fail at once, not at the timeout";
    EXPECT_NE(std::string::npos, o.msg.find("claim rank 0")) << o.msg;
  }
}

TEST(BootstrapFailure, DisagreeingNranksFailsEveryone) {
  mkcclUniqueId id = newRoot("10000");
  auto out = createRanks(id, {0, 1}, {2, 3}, 10000);
  for (auto& o : out) {
    EXPECT_EQ(mkcclInvalidUsage, o.res) << o.msg;
    EXPECT_LT(o.seconds, 3.0);
    EXPECT_NE(std::string::npos, o.msg.find("nranks")) << o.msg;
  }
}

// A fake rank says hello to the root, then vanishes: the others hear of it at once.
TEST(BootstrapFailure, RankGoneDuringRendezvousFailsEveryone) {
  mkcclUniqueId id = newRoot("10000");
  SocketAddress root;
  uint16_t flags;
  ASSERT_EQ(mkcclSuccess, idDecode(id, &root, &flags));
  int fd = -1;
  Deadline dl(5000);
  ASSERT_EQ(mkcclSuccess, socketConnect(root, dl, "root", &fd));
  RootHello h;
  memset(&h, 0, sizeof(h));
  h.version = kHelloVersion, h.rank = 3, h.nranks = 4, h.nonce = randomU64();
  h.listenAddr = root;  // never used
  Channel hc = helloChannel(idKey(id));
  ASSERT_EQ(mkcclSuccess, frameSend(fd, hc, kFrameRootHello, 0, &h, sizeof(h), dl, "test", "root"));
  usleep(100000);
  socketClose(&fd);
  auto out = createRanks(id, {0, 1, 2}, {4, 4, 4}, 10000);
  for (auto& o : out) {
    EXPECT_EQ(mkcclRemoteError, o.res) << o.msg;
    EXPECT_LT(o.seconds, 3.0);
    EXPECT_NE(std::string::npos, o.msg.find("rank 3")) << o.msg;
  }
}

// A stranger (garbage) and a rank of another id (whose hello fails the MAC of this id's key) do not
// disturb the rendezvous; the latter is dropped without a word, and says so.
TEST(BootstrapFailure, StrangersAreTurnedAway) {
  mkcclUniqueId id = newRoot("10000");
  SocketAddress root;
  uint16_t flags;
  ASSERT_EQ(mkcclSuccess, idDecode(id, &root, &flags));
  Deadline dl(5000);
  int junk = -1, other = -1;
  ASSERT_EQ(mkcclSuccess, socketConnect(root, dl, "root", &junk));
  std::vector<char> garbage = randomBytes(freshSeed(), 77, sizeof(MsgHeader) + sizeof(RootHello));
  ASSERT_EQ(mkcclSuccess, socketSendAll(junk, garbage.data(), garbage.size(), dl, "test", "root"));
  ASSERT_EQ(mkcclSuccess, socketConnect(root, dl, "root", &other));
  RootHello h;
  memset(&h, 0, sizeof(h));
  h.version = kHelloVersion, h.rank = 0, h.nranks = 2, h.nonce = randomU64();
  Channel hc = helloChannel(randomKey());  // another id's key
  ASSERT_EQ(mkcclSuccess, frameSend(other, hc, kFrameRootHello, 0, &h, sizeof(h), dl, "test", "root"));
  char c;
  EXPECT_EQ(mkcclRemoteError, socketRecvAll(other, &c, 1, dl, "test", "root")) << "dropped, not answered";
  socketClose(&junk);
  socketClose(&other);
  uint64_t seed = freshSeed() + 5;
  std::vector<int> res = runThreads(2, [&](int r) { return rendezvousAndExercise(id, r, 2, seed, 10000, false); });
  EXPECT_EQ(0, res[0]);
  EXPECT_EQ(0, res[1]);
}

// A rank whose id is not the one its root serves (here: the right address, another key) fails at
// once, not at its timeout.
TEST(BootstrapFailure, StaleIdFailsAtOnce) {
  mkcclUniqueId id = newRoot("1500");
  SocketAddress root;
  uint16_t flags;
  ASSERT_EQ(mkcclSuccess, idDecode(id, &root, &flags));
  mkcclUniqueId stale;
  idEncode(root, randomU64(), randomKey(), 0, &stale);
  auto out = createRanks(stale, {0}, {2}, 10000);
  EXPECT_EQ(mkcclRemoteError, out[0].res) << out[0].msg;
  EXPECT_LT(out[0].seconds, 3.0);
  EXPECT_NE(std::string::npos, out[0].msg.find("serve this id")) << out[0].msg;
}

// A rank SIGKILLed after the rendezvous: the others' collective fails fast (not at the 10 s timeout).
TEST(BootstrapFailure, KilledRankFailsOthersPromptly) {
  const int n = 4, victim = 2;
  std::vector<int> st = runProcessesWithRoot(
      n, [] { return newRoot("10000"); },
      [&](const mkcclUniqueId& id, int r) {
        std::unique_ptr<Bootstrap> b;
        if (Bootstrap::create(id, r, n, 10000, &b) != mkcclSuccess) return 50;
        if (b->barrier() != mkcclSuccess) return 51;
        if (r == victim) raise(SIGKILL);
        usleep(100000);
        std::vector<char> buf(64 * n);
        auto t0 = Clock::now();
        mkcclResult_t res = b->allGather(buf.data(), 64);
        double s = secondsSince(t0);
        fprintf(stderr, "rank %d: allGather after rank %d died: %s after %.2f s: %s\n", r, victim, resultName(res), s,
                lastError());
        if (res != mkcclRemoteError && res != mkcclTimeout) return 52;
        if (s > 3.0) return 53;
        // Broken for good, with the same error.
        if (b->barrier() != res) return 54;
        return 0;
      },
      30000);
  for (int r = 0; r < n; r++) {
    if (r == victim)
      EXPECT_EQ(128 + SIGKILL, st[r]);
    else
      EXPECT_EQ(0, st[r]) << "rank " << r;
  }
}

// A rank SIGKILLed while it waits for the others at the root: the rest fail fast or time out.
TEST(BootstrapFailure, KilledRankDuringRendezvous) {
  const int n = 3;
  int toChild[2];
  ASSERT_EQ(0, pipe(toChild));
  fflush(stderr);
  pid_t child = fork();  // before the root's thread exists (runProcessesWithRoot says why)
  if (child == 0) {
    close(toChild[1]);
    mkcclUniqueId cid;
    if (read(toChild[0], &cid, sizeof(cid)) != (ssize_t)sizeof(cid)) _exit(97);
    std::unique_ptr<Bootstrap> b;
    Bootstrap::create(cid, 2, n, 10000, &b);
    _exit(0);
  }
  close(toChild[0]);
  mkcclUniqueId id = newRoot("3000");
  (void)!write(toChild[1], &id, sizeof(id));
  close(toChild[1]);
  usleep(500000);  // it is connected to the root and waits
  kill(child, SIGKILL);
  int st;
  waitpid(child, &st, 0);
  auto out = createRanks(id, {0, 1}, {n, n}, 10000);
  for (auto& o : out) {
    EXPECT_TRUE(o.res == mkcclRemoteError || o.res == mkcclTimeout) << resultName(o.res) << ": " << o.msg;
    EXPECT_LT(o.seconds, 4.0);
  }
}

TEST(BootstrapFailure, AbortUnblocksPeerAndSelf) {
  mkcclUniqueId id = newRoot("10000");
  std::unique_ptr<Bootstrap> bs[2];
  std::vector<int> res = runThreads(2, [&](int r) { return (int)Bootstrap::create(id, r, 2, 10000, &bs[r]); });
  ASSERT_EQ(0, res[0]);
  ASSERT_EQ(0, res[1]);
  Outcome peer, self;
  std::thread tPeer([&] {  // rank 1 waits for a message rank 0 never sends
    auto t0 = Clock::now();
    char c;
    peer.res = bs[1]->recv(0, 5, &c, 1);
    peer.seconds = secondsSince(t0);
    peer.msg = lastError();
  });
  std::thread tSelf([&] {  // rank 0 itself waits in a collective when another thread aborts it
    auto t0 = Clock::now();
    std::vector<char> buf(2);
    self.res = bs[0]->allGather(buf.data(), 1);
    self.seconds = secondsSince(t0);
  });
  usleep(300000);
  bs[0]->abort();
  tPeer.join();
  tSelf.join();
  EXPECT_EQ(mkcclRemoteError, peer.res) << peer.msg;
  EXPECT_LT(peer.seconds, 2.0);
  EXPECT_NE(std::string::npos, peer.msg.find("rank 0")) << "names the peer: " << peer.msg;
  EXPECT_EQ(mkcclInvalidUsage, self.res);
  EXPECT_LT(self.seconds, 2.0);
  EXPECT_EQ(mkcclInvalidUsage, bs[0]->barrier()) << "an aborted bootstrap stays unusable";
  EXPECT_NE(mkcclSuccess, bs[1]->barrier());
}

TEST(BootstrapFailure, MismatchedMessagesAreCaught) {
  mkcclUniqueId id = newRoot("10000");
  std::vector<std::string> msgs(2);
  std::vector<int> res = runThreads(2, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    if (Bootstrap::create(id, r, 2, 5000, &b) != mkcclSuccess) return 100;
    int x = 42;
    if (r == 0) {
      // The send may already see rank 1's failure, else the barrier does.
      mkcclResult_t e = b->send(1, 5, &x, sizeof(x));
      return (int)(e != mkcclSuccess ? e : b->barrier());
    }
    int y;
    mkcclResult_t e = b->recv(0, 6, &y, sizeof(y));  // wrong tag
    msgs[1] = lastError();
    return (int)e;
  });
  EXPECT_EQ(mkcclInternalError, res[1]) << msgs[1];
  EXPECT_NE(std::string::npos, msgs[1].find("tag 0x6")) << msgs[1];
  EXPECT_EQ(mkcclRemoteError, res[0]) << "the peer of a failed rank fails too";

  // Collectives with different sizes.
  mkcclUniqueId id2 = newRoot("10000");
  res = runThreads(2, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    if (Bootstrap::create(id2, r, 2, 5000, &b) != mkcclSuccess) return 100;
    std::vector<char> buf(2 * 16);
    return (int)b->allGather(buf.data(), r == 0 ? 8 : 16);
  });
  EXPECT_TRUE(res[0] == mkcclInternalError || res[0] == mkcclRemoteError) << resultName(res[0]);
  EXPECT_TRUE(res[1] == mkcclInternalError || res[1] == mkcclRemoteError) << resultName(res[1]);
  EXPECT_TRUE(res[0] == mkcclInternalError || res[1] == mkcclInternalError);

  // Bad arguments are the caller's mistake, not a broken bootstrap.
  mkcclUniqueId id3 = newRoot("10000");
  res = runThreads(1, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    if (Bootstrap::create(id3, 0, 1, 5000, &b) != mkcclSuccess) return 100;
    char c = 0;
    if (b->send(1, 0, &c, 1) != mkcclInvalidArgument) return 1;
    if (b->recv(-1, 0, &c, 1) != mkcclInvalidArgument) return 2;
    if (b->broadcast(&c, 1, 1) != mkcclInvalidArgument) return 3;
    if (b->allGather(nullptr, 1) != mkcclInvalidArgument) return 4;
    if (b->recv(0, 0, &c, 1) != mkcclInvalidUsage) return 5;  // nothing sent to itself
    if (b->send(0, 9, &c, 1) != mkcclSuccess) return 6;
    if (b->recv(0, 9, &c, 1) != mkcclSuccess) return 7;
    return b->barrier() == mkcclSuccess ? 0 : 8;
  });
  EXPECT_EQ(0, res[0]);
}

// Runs last in this file: everything above (and a few more rounds) leaves no fd and no thread.
TEST(BootstrapFailure, NoFdOrThreadLeaks) {
  ASSERT_TRUE(waitQuiet(1, 15000)) << "root services of earlier tests still running: " << bootstrapRootsActive();
  int fds0 = countOpenFds(), threads0 = countThreads();
  for (int round = 0; round < 2; round++) {
    uint64_t seed = freshSeed() + 300 + round;
    mkcclUniqueId id = newRoot("10000");
    std::vector<int> res = runThreads(5, [&](int r) { return rendezvousAndExercise(id, r, 5, seed, 10000, false); });
    for (int r = 0; r < 5; r++) EXPECT_EQ(0, res[r]);
    createRanks(newRoot("500"), {0}, {2}, 5000);   // root timeout
    createRanks(newRoot("5000"), {0, 0}, {2, 2}, 5000);  // wrong rank set
    createRanks(idWithoutRoot(), {0}, {2}, 300);   // no root
    std::string addr = "127.0.0.1:" + std::to_string(freeLoopbackPort());
    EnvGuard c("MKCCL_COMM_ID", addr.c_str());
    mkcclUniqueId cid;
    ASSERT_EQ(mkcclSuccess, bootstrapCreateRoot(&cid));
    res = runThreads(3, [&](int r) { return rendezvousAndExercise(cid, r, 3, seed, 10000, false); });
    for (int r = 0; r < 3; r++) EXPECT_EQ(0, res[r]);
  }
  EXPECT_TRUE(waitQuiet(threads0, 10000)) << "threads: " << countThreads() << " (was " << threads0
                                          << "), roots running: " << bootstrapRootsActive();
  EXPECT_EQ(fds0, countOpenFds()) << "file descriptors leaked";
}

}  // namespace
}  // namespace test
}  // namespace mkccl
