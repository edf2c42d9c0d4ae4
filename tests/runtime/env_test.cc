// envChoice (src/runtime/env.h), the parser of every fixed-choice override: unset and empty give
// the default, each listed value its index, anything else mkcclInvalidUsage naming the variable
// and every accepted value.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string>
#include "runtime/env.h"
#include "runtime/log.h"

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

}  // namespace
