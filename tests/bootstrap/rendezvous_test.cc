// Successful rendezvous and the bootstrap's collectives: ranks as threads and as processes, through a
// root made by bootstrapCreateRoot and through MKCCL_COMM_ID.
#include <string.h>
#include "bootstrap_test_util.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "base/log.h"

namespace mkccl {
namespace test {
namespace {

constexpr int kTimeoutMs = 20000;  // generous: a loaded 2-core CI machine; failures are tested elsewhere

mkcclUniqueId newRoot() {
  EnvGuard c("MKCCL_COMM_ID", nullptr);
  mkcclUniqueId id;
  EXPECT_EQ(mkcclSuccess, bootstrapCreateRoot(&id)) << lastError();
  return id;
}

class RendezvousThreads : public ::testing::TestWithParam<int> {};
class RendezvousProcesses : public ::testing::TestWithParam<int> {};

TEST_P(RendezvousThreads, CollectivesAndSendRecv) {
  const int n = GetParam();
  uint64_t seed = freshSeed() + n;
  mkcclUniqueId id = newRoot();
  std::vector<int> res = runThreads(n, [&](int r) { return rendezvousAndExercise(id, r, n, seed, kTimeoutMs, n <= 5); });
  for (int r = 0; r < n; r++) EXPECT_EQ(0, res[r]) << "rank " << r << " of " << n << " (seed " << seed << ")";
}

TEST_P(RendezvousProcesses, CollectivesAndSendRecv) {
  const int n = GetParam();
  uint64_t seed = freshSeed() + 100 + n;
  std::vector<int> st = runProcessesWithRoot(
      n, [] { return newRoot(); },
      [&](const mkcclUniqueId& id, int r) { return rendezvousAndExercise(id, r, n, seed, kTimeoutMs, n <= 5); },
      kTimeoutMs + 5000);
  for (int r = 0; r < n; r++) EXPECT_EQ(0, st[r]) << "rank " << r << " of " << n << " (seed " << seed << ")";
}

INSTANTIATE_TEST_SUITE_P(Bootstrap, RendezvousThreads, ::testing::Values(1, 2, 5, 16));
INSTANTIATE_TEST_SUITE_P(Bootstrap, RendezvousProcesses, ::testing::Values(1, 2, 5, 16));

TEST(Rendezvous, RanksArriveInAnyOrderAndLate) {
  const int n = 5;
  uint64_t seed = freshSeed() + 7;
  mkcclUniqueId id = newRoot();
  std::vector<int> res = runThreads(n, [&](int r) {
    usleep((useconds_t)((n - r) * 60000));  // the highest rank first, rank 0 last
    return rendezvousAndExercise(id, r, n, seed, kTimeoutMs, false);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(0, res[r]) << "rank " << r;
}

TEST(Rendezvous, BarrierWaitsForTheLastRank) {
  const int n = 3;
  mkcclUniqueId id = newRoot();
  std::vector<double> waited(n, 0);
  std::vector<int> res = runThreads(n, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    if (Bootstrap::create(id, r, n, kTimeoutMs, &b) != mkcclSuccess) return 1;
    if (b->barrier() != mkcclSuccess) return 2;
    if (r == 2) usleep(400000);
    auto t0 = std::chrono::steady_clock::now();
    if (b->barrier() != mkcclSuccess) return 3;
    waited[r] = secondsSince(t0);
    return 0;
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(0, res[r]) << "rank " << r;
  EXPECT_GT(waited[0], 0.3) << "rank 0 left the barrier before rank 2 entered it";
  EXPECT_GT(waited[1], 0.3) << "rank 1 left the barrier before rank 2 entered it";
}

TEST(Rendezvous, SelectedInterfaceLoopback) {
  EnvGuard e("MKCCL_SOCKET_IFNAME", "lo");
  const int n = 3;
  uint64_t seed = freshSeed() + 11;
  mkcclUniqueId id = newRoot();
  SocketAddress root;
  uint16_t flags;
  ASSERT_EQ(mkcclSuccess, idDecode(id, &root, &flags));
  EXPECT_TRUE(socketAddrIsLoopback(root)) << socketAddrToString(root);
  std::vector<int> res = runThreads(n, [&](int r) { return rendezvousAndExercise(id, r, n, seed, kTimeoutMs, false); });
  for (int r = 0; r < n; r++) EXPECT_EQ(0, res[r]) << "rank " << r;
}

// MKCCL_COMM_ID: every rank derives the id itself; rank 0 (late on purpose) hosts the root.
int commIdRank(int r, int n, uint64_t seed, std::vector<uint64_t>* tokenOut) {
  mkcclUniqueId id;
  if (bootstrapCreateRoot(&id) != mkcclSuccess) return 90;
  if (r == 0) usleep(300000);  // the others must retry their connections until the root is up
  std::unique_ptr<Bootstrap> b;
  mkcclResult_t res = Bootstrap::create(id, r, n, kTimeoutMs, &b);
  if (res != mkcclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, lastError());
    return 100 + res;
  }
  // Every rank derived the same id.
  std::vector<mkcclUniqueId> ids(n);
  ids[r] = id;
  if (b->allGather(ids.data(), sizeof(mkcclUniqueId)) != mkcclSuccess) return 91;
  for (int q = 0; q < n; q++)
    if (memcmp(&ids[q], &id, sizeof(id))) return 92;
  if (tokenOut) (*tokenOut)[r] = b->token();
  return exerciseBootstrap(*b, seed, false) ? 93 : 0;
}

TEST(RendezvousCommId, ThreadsTwiceOnTheSamePort) {
  std::string addr = "127.0.0.1:" + std::to_string(freeLoopbackPort());
  EnvGuard c("MKCCL_COMM_ID", addr.c_str());
  const int n = 4;
  std::vector<uint64_t> tok1(n), tok2(n);
  std::vector<int> res = runThreads(n, [&](int r) { return commIdRank(r, n, freshSeed() + 21, &tok1); });
  for (int r = 0; r < n; r++) EXPECT_EQ(0, res[r]) << "run 1 rank " << r;
  res = runThreads(n, [&](int r) { return commIdRank(r, n, freshSeed() + 22, &tok2); });
  for (int r = 0; r < n; r++) EXPECT_EQ(0, res[r]) << "run 2 rank " << r;
  EXPECT_NE(tok1[0], tok2[0]) << "two communicators of one MKCCL_COMM_ID share a token";
}

TEST(RendezvousCommId, Processes) {
  std::string addr = "127.0.0.1:" + std::to_string(freeLoopbackPort());
  EnvGuard c("MKCCL_COMM_ID", addr.c_str());
  const int n = 5;
  uint64_t seed = freshSeed() + 23;
  std::vector<int> st = runProcesses(n, [&](int r) { return commIdRank(r, n, seed, nullptr); }, kTimeoutMs + 5000);
  for (int r = 0; r < n; r++) EXPECT_EQ(0, st[r]) << "rank " << r;
}

TEST(RendezvousCommId, Ipv6Loopback) {
  // Only where ::1 exists.
  SocketAddress probe;
  ASSERT_EQ(mkcclSuccess, socketParseHostPort("[::1]:1", "probe", &probe));
  probe.sin6.sin6_port = 0;
  int fd = -1;
  if (socketListen(&probe, &fd) != mkcclSuccess) GTEST_SKIP() << "no IPv6 loopback here";
  std::string addr = "[::1]:" + std::to_string(ntohs(probe.sin6.sin6_port));
  socketClose(&fd);
  EnvGuard c("MKCCL_COMM_ID", addr.c_str());
  const int n = 3;
  std::vector<int> res = runThreads(n, [&](int r) { return commIdRank(r, n, freshSeed() + 24, nullptr); });
  for (int r = 0; r < n; r++) EXPECT_EQ(0, res[r]) << "rank " << r;
}

}  // namespace
}  // namespace test
}  // namespace mkccl
