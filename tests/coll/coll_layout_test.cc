// CPU tests of the collective layout arithmetic shared by host and device (coll_args.h): the LL
// area fits the data region beside the rings, every rank computes the same layout, and LL flags
// never match untouched memory or the flag of the previous call of the same half.
#include <gtest/gtest.h>
#include <random>
#include "kernels/coll/coll_args.h"
#include "kernels/coll/direct_rule.h"

namespace mkccl {
namespace coll {
namespace {

TEST(CollLayout, LLAreaFitsTheDataRegion) {
  for (size_t data : {(size_t)0, (size_t)1000, (size_t)(3u << 20), (size_t)(255u << 20), (size_t)(4095ull << 20)})
    for (int n = 1; n <= kMaxLocalRanks; ++n) {
      const LLLayout l = llLayout(data, n);
      SCOPED_TRACE("data " + std::to_string(data) + ", ranks " + std::to_string(n));
      if (n == 1) {
        EXPECT_EQ(0u, l.lines);
        EXPECT_EQ(data, l.base);
        continue;
      }
      const size_t area = 4 * (size_t)(n - 1) * l.lines * kLLLineBytes;
      EXPECT_LE(l.base + area, data);
      EXPECT_LE(area, data / 4);
      EXPECT_EQ(0u, l.lines % 16);
      EXPECT_LE(l.lines * 8, kLLMaxStreamBytes);
      if (l.lines == 0) {
        EXPECT_EQ(data, l.base);  // no area: the rings keep the whole region
      } else {
        EXPECT_EQ(0u, l.base % 256);
      }
    }
  // The default workspace (256 MiB, 1 MiB of flags) on 4 and 8 ranks: the full LL stream size.
  EXPECT_EQ(kLLMaxStreamBytes / 8, llLayout(255u << 20, 4).lines);
  EXPECT_EQ(kLLMaxStreamBytes / 8, llLayout(255u << 20, 8).lines);
}

TEST(CollLayout, LLFlags) {
  std::mt19937_64 rng(12345);
  std::vector<uint64_t> seqs = {1, 2, 3, 0xfffffffeull, 0xffffffffull, 0x100000000ull, 0x1fffffffeull, 0x1ffffffffull};
  for (int i = 0; i < 100000; ++i) seqs.push_back(rng() >> (rng() % 64));
  for (uint64_t s : seqs) {
    if (s < 2) continue;
    EXPECT_NE(0u, llFlagOf(s)) << s;  // untouched memory reads 0
    EXPECT_NE(llFlagOf(s), llFlagOf(s - 2)) << s;  // the last call of the same half
    EXPECT_NE(llFlagOf(s), llFlagOf(s - 1)) << s;
  }
}

TEST(CollLayout, ChunksAndSteps) {
  for (size_t L : {(size_t)1, (size_t)15, (size_t)16, (size_t)1000, (size_t)(32u << 10) + 1, (size_t)(1u << 20),
                   (size_t)(256u << 20) + 3})
    for (size_t C : {(size_t)1, (size_t)3, (size_t)16, (size_t)64})
      for (size_t S : {(size_t)1024, (size_t)(256u << 10)})
        for (size_t minChunk : {(size_t)16, (size_t)4096}) {
          const size_t E = chunkBytes(L, C, S, minChunk);
          SCOPED_TRACE("L " + std::to_string(L) + " C " + std::to_string(C) + " S " + std::to_string(S));
          EXPECT_LE(E, S);
          EXPECT_GT(E, 0u);
          EXPECT_EQ(0u, E % 16);
          // Steps (t, c) cover the chunk numbers t*C + c - rot from -rot to chunks - 1, once each.
          const size_t chunks = ceilDiv(L, E);
          for (size_t rot : {(size_t)0, C - 1}) {
            uint64_t total = 0;
            for (size_t c = 0; c < C; ++c) total += channelSteps(chunks, (int)C, (int)c, (int)rot);
            EXPECT_EQ(chunks + rot, total) << "rot " << rot;
          }
        }
}

}  // namespace
// The in-place rule for registered buffers: auto's lower cut from AllGather on 1xH100 (2 ranks
// sharing it: registered 0.60-0.84x at 4-256 KiB blocks, 1.66x at 2 MiB), its upper cut from the
// four collectives on 2xH200 (1.05-1.29x at 2 and 8 MiB blocks; 0.86-0.99x for three of them at
// 32 MiB, 0.80-0.97x for all at 128 MiB); on and off override it; the entry words keep index and
// offset apart.
TEST(CollLayout, DirectRuleAndWords) {
  EXPECT_EQ(size_t(1) << 20, kDirectMinBlockBytes);
  EXPECT_EQ(size_t(16) << 20, kDirectMaxBlockBytes);
  const size_t lo = kDirectMinBlockBytes, hi = kDirectMaxBlockBytes;
  for (size_t block : {size_t(4) << 10, size_t(256) << 10, (size_t(1) << 20) - 16, (size_t(16) << 20) + 16,
                       size_t(32) << 20, size_t(128) << 20})
    EXPECT_FALSE(directRule(0, lo, hi, block)) << block;
  for (size_t block : {size_t(1) << 20, size_t(2) << 20, size_t(8) << 20, size_t(16) << 20})
    EXPECT_TRUE(directRule(0, lo, hi, block)) << block;
  EXPECT_TRUE(directRule(0, lo, 0, size_t(128) << 20));  // 0: no upper cut
  EXPECT_TRUE(directRule(1, lo, hi, 16));
  EXPECT_TRUE(directRule(1, lo, hi, size_t(128) << 20));
  EXPECT_FALSE(directRule(2, lo, hi, size_t(8) << 20));
  EXPECT_TRUE(directRule(0, 0, 0, 1));
  for (int idx : {0, 1, 7, 1000})
    for (uint64_t off : {uint64_t(0), uint64_t(256), (uint64_t(1) << 40) + 48}) {
      const uint64_t w = regWord(idx, off);
      EXPECT_NE(0u, w);  // 0 means "no word"
      EXPECT_EQ(idx, regWordIndex(w));
      EXPECT_EQ(off, regWordOffset(w));
    }
}

}  // namespace coll
}  // namespace mkccl
