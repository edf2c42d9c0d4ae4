// resolveConfig (runtime/config.h): the struct is read only as far as its size says (size first, so
// a short struct at the end of a page is refused without a fault), every field's range is checked,
// the settings fill what the struct leaves undefined.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <string>
#include "runtime/config.h"
#include "base/log.h"
#include "base/settings.h"

namespace {

using mkccl::ResolvedConfig;
using mkccl::resolveConfig;

TEST(Config, NullMeansTheSettings) {
  unsetenv("MKCCL_TIMEOUT_MS");
  setenv("MKCCL_MAX_CTAS", "40", 1);
  ASSERT_EQ(mkcclSuccess, mkccl::settingsRefresh());
  ResolvedConfig r;
  ASSERT_EQ(mkcclSuccess, resolveConfig(nullptr, &r)) << mkccl::lastError();
  EXPECT_EQ(60000, r.timeoutMs);
  EXPECT_EQ(40, r.maxCtas);
  EXPECT_TRUE(r.blocking);
  mkcclConfig_t c = MKCCL_CONFIG_INITIALIZER;
  c.maxCtas = 12;  // the struct wins over the environment
  ASSERT_EQ(mkcclSuccess, resolveConfig(&c, &r));
  EXPECT_EQ(12, r.maxCtas);
  unsetenv("MKCCL_MAX_CTAS");
  mkccl::settingsRefresh();
}

TEST(Config, AShortStructAtTheEndOfAPageIsRefusedWithoutAFault) {
  char* two = (char*)mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(MAP_FAILED, (void*)two);
  ASSERT_EQ(0, mprotect(two + 4096, 4096, PROT_NONE));
  // An older, smaller struct: only its size field before the unreadable page.
  mkcclConfig_t* c = (mkcclConfig_t*)(two + 4096 - sizeof(size_t));
  c->size = sizeof(size_t);
  ResolvedConfig r;
  EXPECT_EQ(mkcclInvalidArgument, resolveConfig(c, &r));
  EXPECT_NE(nullptr, strstr(mkccl::lastError(), "size")) << mkccl::lastError();
  munmap(two, 8192);
}

TEST(Config, EveryFieldIsChecked) {
  ResolvedConfig r;
  struct Bad {
    const char* what;
    void (*set)(mkcclConfig_t*);
  };
  const Bad bad[] = {
      {"magic", [](mkcclConfig_t* c) { c->magic = 1; }},
      {"version", [](mkcclConfig_t* c) { c->version = 7; }},
      {"size", [](mkcclConfig_t* c) { c->size = 4; }},
      {"blocking", [](mkcclConfig_t* c) { c->blocking = 2; }},
      {"timeoutMs", [](mkcclConfig_t* c) { c->timeoutMs = 0; }},
      {"timeoutMs", [](mkcclConfig_t* c) { c->timeoutMs = -5; }},
      {"commCtas", [](mkcclConfig_t* c) { c->commCtas = 1025; }},
      {"commCtas", [](mkcclConfig_t* c) { c->commCtas = -1; }},
      {"maxCtas", [](mkcclConfig_t* c) { c->maxCtas = 0; }},
      {"workspaceBytes", [](mkcclConfig_t* c) { c->workspaceBytes = 1000; }},
      {"workspaceBytes", [](mkcclConfig_t* c) { c->workspaceBytes = (1ll << 40) + 1; }},
      {"workspaceBytes", [](mkcclConfig_t* c) { c->workspaceBytes = -(1ll << 62); }},
  };
  for (const Bad& b : bad) {
    mkcclConfig_t c = MKCCL_CONFIG_INITIALIZER;
    b.set(&c);
    EXPECT_EQ(mkcclInvalidArgument, resolveConfig(&c, &r)) << b.what;
    EXPECT_NE(nullptr, strstr(mkccl::lastError(), b.what)) << mkccl::lastError();
  }
  mkcclConfig_t c = MKCCL_CONFIG_INITIALIZER;
  c.blocking = 0, c.timeoutMs = 1, c.commCtas = 0, c.maxCtas = 1024, c.workspaceBytes = 1ll << 40;
  ASSERT_EQ(mkcclSuccess, resolveConfig(&c, &r)) << mkccl::lastError();
  EXPECT_FALSE(r.blocking);
  EXPECT_EQ(1, r.timeoutMs);
  EXPECT_EQ((size_t)1 << 40, r.workspaceBytes);
}

}  // namespace
