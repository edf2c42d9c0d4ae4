// envChoice (src/base/env.h), the parser of every fixed-choice override: unset and empty give
// the default, each listed value its index, anything else mkcclInvalidUsage naming the variable
// and every accepted value.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string>
#include <utility>
#include "base/env.h"
#include "base/log.h"

namespace {

constexpr const char* kVar = "MKCCL_TEST_ENV_CHOICE";

TEST(EnvChoice, DefaultValuesAndErrors) {
  int v = -1;
  unsetenv(kVar);
  EXPECT_EQ(mkcclSuccess, mkccl::envChoice(kVar, {"phases", "interleaved"}, 1, &v));
  EXPECT_EQ(1, v);
  setenv(kVar, "", 1);
  EXPECT_EQ(mkcclSuccess, mkccl::envChoice(kVar, {"phases", "interleaved"}, 0, &v));
  EXPECT_EQ(0, v);
  const char* names[] = {"auto", "fused", "sequential", "rs_ag"};
  for (int i = 0; i < 4; ++i) {
    setenv(kVar, names[i], 1);
    EXPECT_EQ(mkcclSuccess, mkccl::envChoice(kVar, {"auto", "fused", "sequential", "rs_ag"}, 0, &v));
    EXPECT_EQ(i, v);
  }
  for (const char* bad : {"Fused", "fused ", "rs", "auto,fused", "4"}) {
    setenv(kVar, bad, 1);
    v = 7;
    EXPECT_EQ(mkcclInvalidUsage, mkccl::envChoice(kVar, {"auto", "fused", "sequential", "rs_ag"}, 0, &v)) << bad;
    const std::string msg = mkccl::lastError();
    EXPECT_NE(std::string::npos, msg.find(kVar)) << msg;
    EXPECT_NE(std::string::npos, msg.find("expected auto, fused, sequential or rs_ag")) << msg;
  }
  unsetenv(kVar);
}

TEST(EnvNumber, SuffixesRangesAndErrors) {
  long long v = -1;
  unsetenv(kVar);
  EXPECT_EQ(mkcclSuccess, mkccl::envNumber(kVar, 42, 0, 100, &v));
  EXPECT_EQ(42, v);
  const std::pair<const char*, long long> good[] = {{"7", 7}, {"0x10", 16}, {"4K", 4096}, {"2m", 2 << 20},
                                                    {"1G", 1ll << 30}, {"0", 0}};
  for (const auto& g : good) {
    setenv(kVar, g.first, 1);
    EXPECT_EQ(mkcclSuccess, mkccl::envNumber(kVar, -1, 0, 1ll << 40, &v)) << g.first;
    EXPECT_EQ(g.second, v) << g.first;
  }
  for (const char* bad : {"x", "4KB", "4 K", "-1", "2T", "99999999999999999999", "1.5", "K"}) {
    setenv(kVar, bad, 1);
    v = 5;
    EXPECT_EQ(mkcclInvalidUsage, mkccl::envNumber(kVar, 3, 0, 1ll << 40, &v)) << bad;
    EXPECT_EQ(3, v) << "the default stays on an error";
    EXPECT_NE(std::string::npos, std::string(mkccl::lastError()).find(kVar));
  }
  setenv(kVar, "17", 1);  // past hi
  EXPECT_EQ(mkcclInvalidUsage, mkccl::envNumber(kVar, 0, 1, 16, &v));
  setenv(kVar, "1M", 1);  // the suffix takes it past hi
  EXPECT_EQ(mkcclInvalidUsage, mkccl::envNumber(kVar, 0, 1, 1 << 19, &v));
  unsetenv(kVar);
}

}  // namespace
