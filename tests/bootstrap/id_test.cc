// The unique id (checks, token, MKCCL_COMM_ID derivation) and the interface choice.
#include <arpa/inet.h>
#include <string.h>
#include "bootstrap_test_util.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "base/log.h"
#include "runtime/socket.h"

namespace mkccl {
namespace test {
namespace {

TEST(BootstrapId, FreshIdIsValidAndTokenStable) {
  mkcclUniqueId id = idWithoutRoot();
  EXPECT_EQ(mkcclSuccess, bootstrapCheckId(id)) << lastError();
  EXPECT_EQ(bootstrapIdToken(id), bootstrapIdToken(id));
  mkcclUniqueId copy;
  memcpy(&copy, &id, sizeof(id));
  EXPECT_EQ(bootstrapIdToken(id), bootstrapIdToken(copy));
  mkcclUniqueId other = idWithoutRoot();
  EXPECT_NE(bootstrapIdToken(id), bootstrapIdToken(other)) << "two ids share a random token";
}

TEST(BootstrapId, CreateRootMakesAValidIdWithALiveRoot) {
  EnvGuard t("MKCCL_TIMEOUT_MS", "1500");
  EnvGuard c("MKCCL_COMM_ID", nullptr);
  mkcclUniqueId id;
  ASSERT_EQ(mkcclSuccess, bootstrapCreateRoot(&id)) << lastError();
  EXPECT_EQ(mkcclSuccess, bootstrapCheckId(id)) << lastError();
  SocketAddress root;
  uint16_t flags = 1;
  ASSERT_EQ(mkcclSuccess, idDecode(id, &root, &flags));
  EXPECT_EQ(0, flags);
  // Something listens there (the root), until it times out.
  int fd = -1;
  Deadline dl(1000);
  EXPECT_EQ(mkcclSuccess, socketConnect(root, dl, "root", &fd)) << lastError();
  socketClose(&fd);
  EXPECT_EQ(mkcclInvalidArgument, bootstrapCreateRoot(nullptr));
}

TEST(BootstrapId, EveryFlippedByteIsRejected) {
  mkcclUniqueId id = idWithoutRoot();
  uint64_t seed = freshSeed();
  for (int i = 0; i < MKCCL_UNIQUE_ID_BYTES; i++) {
    mkcclUniqueId bad = id;
    uint8_t flip = (uint8_t)(1u << (rand64(seed, i) % 8));
    bad.internal[i] = (char)(bad.internal[i] ^ flip);
    EXPECT_EQ(mkcclInvalidArgument, bootstrapCheckId(bad)) << "byte " << i << " flipped by 0x" << std::hex << (int)flip;
    EXPECT_NE(std::string(""), lastError());
    std::unique_ptr<Bootstrap> b;
    EXPECT_EQ(mkcclInvalidArgument, Bootstrap::create(bad, 0, 1, 500, &b));
    EXPECT_EQ(nullptr, b.get());
  }
}

TEST(BootstrapId, GarbageAndZeroIdsAreRejected) {
  uint64_t seed = freshSeed();
  for (int k = 0; k < 50; k++) {
    std::vector<char> g = randomBytes(seed, 1000 + k, MKCCL_UNIQUE_ID_BYTES);
    mkcclUniqueId id;
    memcpy(id.internal, g.data(), sizeof(id));
    EXPECT_EQ(mkcclInvalidArgument, bootstrapCheckId(id));
  }
  mkcclUniqueId zero;
  memset(&zero, 0, sizeof(zero));
  EXPECT_EQ(mkcclInvalidArgument, bootstrapCheckId(zero));
  EXPECT_NE(nullptr, strstr(lastError(), "not an mkccl unique id")) << lastError();
}

TEST(BootstrapId, WrongVersionIsNamed) {
  mkcclUniqueId id = idWithoutRoot();
  UniqueIdContent c;
  memcpy(&c, id.internal, sizeof(c));
  c.version = kIdVersion + 1;
  c.checksum = idChecksum(c);  // a well-formed id of another version
  memcpy(id.internal, &c, sizeof(c));
  EXPECT_EQ(mkcclInvalidArgument, bootstrapCheckId(id));
  EXPECT_NE(nullptr, strstr(lastError(), "version")) << lastError();
}

TEST(BootstrapId, CreateChecksItsArguments) {
  mkcclUniqueId id = idWithoutRoot();
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(mkcclInvalidArgument, Bootstrap::create(id, 0, 0, 1000, &b));
  EXPECT_EQ(mkcclInvalidArgument, Bootstrap::create(id, -1, 2, 1000, &b));
  EXPECT_EQ(mkcclInvalidArgument, Bootstrap::create(id, 2, 2, 1000, &b));
  EXPECT_EQ(mkcclInvalidArgument, Bootstrap::create(id, 0, 2, 0, &b));
  EXPECT_EQ(mkcclInvalidArgument, Bootstrap::create(id, 0, 2, 1000, nullptr));
  EXPECT_EQ(nullptr, b.get());
}

TEST(BootstrapCommId, SameIdEverywhereFromTheAddress) {
  EnvGuard c("MKCCL_COMM_ID", "127.0.0.1:29511");
  int rootsBefore = bootstrapRootsActive();
  mkcclUniqueId a, b;
  ASSERT_EQ(mkcclSuccess, bootstrapCreateRoot(&a)) << lastError();
  ASSERT_EQ(mkcclSuccess, bootstrapCreateRoot(&b)) << lastError();
  EXPECT_EQ(0, memcmp(&a, &b, sizeof(a)));
  EXPECT_EQ(mkcclSuccess, bootstrapCheckId(a));
  SocketAddress root;
  uint16_t flags = 0;
  ASSERT_EQ(mkcclSuccess, idDecode(a, &root, &flags));
  EXPECT_EQ(kIdFromCommId, flags);
  EXPECT_EQ("127.0.0.1:29511", socketAddrToString(root));
  EXPECT_LE(bootstrapRootsActive(), rootsBefore) << "MKCCL_COMM_ID: no root until rank 0 creates its bootstrap";
  {
    EnvGuard c2("MKCCL_COMM_ID", "127.0.0.1:29512");
    mkcclUniqueId d;
    ASSERT_EQ(mkcclSuccess, bootstrapCreateRoot(&d));
    EXPECT_NE(bootstrapIdToken(a), bootstrapIdToken(d)) << "another address must give another token";
  }
  {
    EnvGuard c3("MKCCL_COMM_ID", "[::1]:29511");
    mkcclUniqueId v6;
    ASSERT_EQ(mkcclSuccess, bootstrapCreateRoot(&v6)) << lastError();
    ASSERT_EQ(mkcclSuccess, idDecode(v6, &root, &flags));
    EXPECT_EQ("[::1]:29511", socketAddrToString(root));
  }
  {
    EnvGuard c4("MKCCL_COMM_ID", "localhost:29511");
    mkcclUniqueId named;
    EXPECT_EQ(mkcclSuccess, bootstrapCreateRoot(&named)) << lastError();
  }
}

TEST(BootstrapCommId, MalformedValuesAreInvalidArguments) {
  for (const char* v : {"127.0.0.1", "127.0.0.1:", ":29500", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:12ab",
                        "::1:29500", "[::1]29500", "[::1]:"}) {
    EnvGuard c("MKCCL_COMM_ID", v);
    mkcclUniqueId id;
    EXPECT_EQ(mkcclInvalidArgument, bootstrapCreateRoot(&id)) << v;
    EXPECT_NE(nullptr, strstr(lastError(), "MKCCL_COMM_ID")) << v << ": " << lastError();
  }
}

TEST(BootstrapSocket, ParseHostPort) {
  SocketAddress a;
  ASSERT_EQ(mkcclSuccess, socketParseHostPort("10.1.2.3:80", "X", &a));
  EXPECT_EQ("10.1.2.3:80", socketAddrToString(a));
  ASSERT_EQ(mkcclSuccess, socketParseHostPort("[fd00::5]:65535", "X", &a));
  EXPECT_EQ("[fd00::5]:65535", socketAddrToString(a));
  EXPECT_FALSE(socketAddrIsLoopback(a));
  ASSERT_EQ(mkcclSuccess, socketParseHostPort("[::1]:1", "X", &a));
  EXPECT_TRUE(socketAddrIsLoopback(a));
  EXPECT_EQ(mkcclInvalidArgument, socketParseHostPort(nullptr, "X", &a));
  EXPECT_EQ(mkcclInvalidArgument, socketParseHostPort("", "X", &a));
}

TEST(BootstrapSocket, InterfaceChoice) {
  SocketAddress a;
  std::string name;
  {
    EnvGuard e("MKCCL_SOCKET_IFNAME", nullptr);
    ASSERT_EQ(mkcclSuccess, socketFindInterface(&a, &name)) << lastError();
    EXPECT_EQ(AF_INET, a.sa.sa_family) << "the default is an IPv4 address (or 127.0.0.1)";
    EXPECT_TRUE(name == "lo" || !socketAddrIsLoopback(a)) << name;
  }
  {
    EnvGuard e("MKCCL_SOCKET_IFNAME", "lo");
    ASSERT_EQ(mkcclSuccess, socketFindInterface(&a, &name)) << lastError();
    EXPECT_EQ("lo", name);
    EXPECT_EQ("127.0.0.1:0", socketAddrToString(a));
  }
  {
    EnvGuard e("MKCCL_SOCKET_IFNAME", "=lo");
    ASSERT_EQ(mkcclSuccess, socketFindInterface(&a, &name)) << lastError();
    EXPECT_EQ("lo", name);
  }
  {
    EnvGuard e("MKCCL_SOCKET_IFNAME", "nonexistent9,alsonot");
    EXPECT_EQ(mkcclInvalidArgument, socketFindInterface(&a, &name));
    EXPECT_NE(nullptr, strstr(lastError(), "lo")) << "lists the UP interfaces: " << lastError();
  }
  {
    EnvGuard e("MKCCL_SOCKET_IFNAME", "=l");  // exact: "l" is no interface
    EXPECT_EQ(mkcclInvalidArgument, socketFindInterface(&a, &name));
  }
  {
    EnvGuard e("MKCCL_SOCKET_IFNAME", "^lo");
    mkcclResult_t r = socketFindInterface(&a, &name);
    if (r == mkcclSuccess)
      EXPECT_NE("lo", name);
    else
      EXPECT_EQ(mkcclInvalidArgument, r);  // a host with nothing but loopback
  }
  {
    EnvGuard e("MKCCL_SOCKET_IFNAME", "^=lo,nonexistent9");
    mkcclResult_t r = socketFindInterface(&a, &name);
    if (r == mkcclSuccess) {
      EXPECT_NE("lo", name);
    }
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
