// The bootstrap's authentication (runtime/bootstrap_auth.h, bootstrap_wire.h): SipHash-2-4 against
// the reference vectors, incremental hashing against one-shot, and frames that fail their check
// when any byte, the channel or the sequence number differs.
#include <gtest/gtest.h>
#include <string.h>
#include <random>
#include <vector>
#include "bootstrap_test_util.h"
#include "runtime/bootstrap_auth.h"
#include "runtime/bootstrap_wire.h"

namespace mkccl {
namespace test {
namespace {

Key128 referenceKey() {  // bytes 00 01 .. 0f, little-endian
  Key128 k;
  uint8_t b[16];
  for (int i = 0; i < 16; i++) b[i] = (uint8_t)i;
  memcpy(&k.k0, b, 8);
  memcpy(&k.k1, b + 8, 8);
  return k;
}

TEST(BootstrapAuth, SipHashReferenceVectors) {
  uint8_t msg[64];
  for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
  const Key128 k = referenceKey();
  EXPECT_EQ(0x726fdb47dd0e0e31ull, sipHash(k, msg, 0));
  EXPECT_EQ(0x74f839c593dc67fdull, sipHash(k, msg, 1));
  EXPECT_EQ(0x93f5f5799a932462ull, sipHash(k, msg, 8));
  EXPECT_EQ(0xa129ca6149be45e5ull, sipHash(k, msg, 15));
}

TEST(BootstrapAuth, IncrementalEqualsOneShot) {
  std::mt19937_64 g(freshSeed());
  for (int t = 0; t < 200; t++) {
    std::vector<char> m = randomBytes(g(), t, g() % 300);
    Key128 k{g(), g()};
    SipHash h(k);
    size_t at = 0;
    while (at < m.size()) {
      size_t n = std::min(m.size() - at, (size_t)(g() % 17));
      h.update(m.data() + at, n);
      at += n;
    }
    EXPECT_EQ(sipHash(k, m.data(), m.size()), h.final()) << "length " << m.size();
  }
}

TEST(BootstrapAuth, FramesFailTheirCheckWhenAnythingDiffers) {
  std::mt19937_64 g(freshSeed() + 1);
  Channel ch{Key128{g(), g()}, 1, 5};
  std::vector<char> payload = randomBytes(g(), 2, 100);
  MsgHeader h = frameHeader(ch, kFrameData, 0x42, payload.size());
  uint64_t mac = framePayloadMac(ch, payload.data(), payload.size());
  EXPECT_TRUE(frameHeaderValid(ch, h));
  for (size_t byte = 0; byte < sizeof(h); byte++) {
    for (int bit = 0; bit < 8; bit++) {
      MsgHeader t = h;
      ((uint8_t*)&t)[byte] ^= (uint8_t)(1 << bit);
      EXPECT_FALSE(frameHeaderValid(ch, t)) << "byte " << byte << " bit " << bit;
    }
  }
  for (size_t byte = 0; byte < payload.size(); byte++) {
    std::vector<char> t = payload;
    t[byte] ^= 1;
    EXPECT_NE(mac, framePayloadMac(ch, t.data(), t.size()));
  }
  Channel next = ch, other = ch, otherKey = ch;
  frameDone(next);
  other.id = 2;
  otherKey.key.k1 ^= 1;
  for (const Channel* c : {&next, &other, &otherKey}) {
    EXPECT_FALSE(frameHeaderValid(*c, h)) << "a replayed or misdirected frame is not taken";
    EXPECT_NE(mac, framePayloadMac(*c, payload.data(), payload.size()));
  }
}

TEST(BootstrapAuth, DerivedKeysDiffer) {
  Key128 k = referenceKey();
  Key128 a = deriveKey(k, "session", 1), b = deriveKey(k, "session", 2), c = deriveKey(k, "root hello", 1);
  EXPECT_TRUE(a.k0 != b.k0 || a.k1 != b.k1);
  EXPECT_TRUE(a.k0 != c.k0 || a.k1 != c.k1);
  Key128 again = deriveKey(k, "session", 1);
  EXPECT_EQ(a.k0, again.k0);
  EXPECT_EQ(a.k1, again.k1);
}

TEST(BootstrapAuth, FailNotesCarryTheResultAndText) {
  std::vector<char> n = failNote(mkcclInternalError, 3, std::string("why\nit failed"));
  int rank = -1;
  std::string text;
  EXPECT_EQ(mkcclInternalError, failNoteParse(n, &rank, &text));
  EXPECT_EQ(3, rank);
  EXPECT_EQ("why it failed", text);
  std::vector<char> bad = failNote(mkcclTimeout, 1, "x");
  const int32_t unknown = 77;  // a code this library does not know (a peer's)
  memcpy(bad.data(), &unknown, sizeof(unknown));
  EXPECT_EQ(mkcclRemoteError, failNoteParse(bad, &rank, &text)) << "an unknown code is a remote error";
  EXPECT_EQ(mkcclRemoteError, failNoteParse(std::vector<char>(3), &rank, &text)) << "too short";
  EXPECT_EQ(kMaxFailText + sizeof(FailNote), failNote(mkcclTimeout, 0, std::string(100000, 'a')).size());
}

}  // namespace
}  // namespace test
}  // namespace mkccl
