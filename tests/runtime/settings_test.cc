// The one parser (parseNumber / parseChoice, base/env.h) against an exact reference on random
// and edge-case text, and the settings reader (base/settings.h): values, sources, errors naming
// the variable, re-reading when the environment changed.
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include "base/env.h"
#include "base/log.h"
#include "base/settings.h"

namespace {

using mkccl::parseNumber;

// The reference: the value of a well-formed number as a 128-bit integer (no overflow possible for
// the lengths generated here), or false when the text is not one.
bool reference(const std::string& t, __int128* out) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  int base = 10;
  if (i + 1 < t.size() && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'X')) base = 16, i += 2;
  __int128 v = 0;
  size_t digits = 0;
  for (; i < t.size(); i++, digits++) {
    int d = isdigit((unsigned char)t[i]) ? t[i] - '0' : (base == 16 && isxdigit((unsigned char)t[i])) ? (tolower(t[i]) - 'a' + 10) : -1;
    if (d < 0) break;
    v = v * base + d;
    if (v > ((__int128)1 << 100)) v = (__int128)1 << 100;  // saturate: far outside any range
  }
  if (digits == 0) return false;
  int shift = 0;
  if (i < t.size() && strchr("kK", t[i])) shift = 10, i++;
  else if (i < t.size() && strchr("mM", t[i])) shift = 20, i++;
  else if (i < t.size() && strchr("gG", t[i])) shift = 30, i++;
  if (i != t.size()) return false;
  v <<= shift;
  *out = neg ? -v : v;
  return true;
}

void expectLikeReference(const std::string& t, long long lo, long long hi) {
  __int128 want = 0;
  const bool ok = reference(t, &want) && want >= lo && want <= hi;
  long long got = 12345;
  mkcclResult_t r = parseNumber("MKCCL_TEST_NUMBER", t.c_str(), lo, hi, &got);
  if (ok) {
    EXPECT_EQ(mkcclSuccess, r) << "\"" << t << "\" in [" << lo << ", " << hi << "]";
    EXPECT_TRUE((__int128)got == want) << "\"" << t << "\" parsed as " << got;
  } else {
    EXPECT_EQ(mkcclInvalidUsage, r) << "\"" << t << "\" accepted as " << got << " for [" << lo << ", " << hi << "]";
    EXPECT_EQ(12345, got) << "the output is untouched on an error";
    EXPECT_NE(nullptr, strstr(mkccl::lastError(), "MKCCL_TEST_NUMBER")) << mkccl::lastError();
  }
}

TEST(ParseNumber, TheWrapsOfTheIssueAreRejected) {
  long long v = 0;
  // A suffix that takes the value past the range, or past 64 bits, never wraps back into it.
  EXPECT_EQ(mkcclInvalidUsage, parseNumber("MKCCL_TIMEOUT_MS", "18014398509481985K", 1, INT_MAX, &v));
  EXPECT_EQ(mkcclInvalidUsage, parseNumber("MKCCL_WORKSPACE_BYTES", "17592186044417G", 1 << 20, 1ll << 40, &v));
  EXPECT_EQ(mkcclInvalidUsage, parseNumber("MKCCL_TIMEOUT_MS", "2147483648", 1, INT_MAX, &v));
  EXPECT_EQ(mkcclInvalidUsage, parseNumber("x", "8589934592G", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(mkcclInvalidUsage, parseNumber("x", "9223372036854775808", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(mkcclInvalidUsage, parseNumber("x", "99999999999999999999999999", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(mkcclSuccess, parseNumber("x", "9223372036854775807", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(LLONG_MAX, v);
  EXPECT_EQ(mkcclSuccess, parseNumber("x", "-9223372036854775808", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(LLONG_MIN, v);
  EXPECT_EQ(mkcclSuccess, parseNumber("x", "8589934591G", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(((1ll << 33) - 1) << 30, v);
  EXPECT_EQ(mkcclSuccess, parseNumber("x", "-8589934592G", LLONG_MIN, LLONG_MAX, &v));
  EXPECT_EQ(LLONG_MIN, v);
  EXPECT_EQ(mkcclSuccess, parseNumber("x", "2147483647", 1, INT_MAX, &v));
  EXPECT_EQ(INT_MAX, v);
  EXPECT_EQ(mkcclSuccess, parseNumber("x", "1G", 1, 1ll << 40, &v));
  EXPECT_EQ(1ll << 30, v);
}

TEST(ParseNumber, EdgeCasesMatchTheReference) {
  const std::vector<std::string> texts = {
      "", "+", "-", "0", "-0", "+7", "007", "0x", "0x10", "0X1f", "0xg", "1k", "1K", "1kk", "1 K", " 1", "1 ", "1.0",
      "1e3", "K", "G", "-1G", "0x7fffffffffffffff", "0x8000000000000000", "-0x8000000000000000", "1T", "4KB",
      "2147483647", "2147483648", "-2147483649", "1099511627776", "1024G", "1025G", "1048575", "1048576", "1M", "1m"};
  const std::pair<long long, long long> ranges[] = {
      {1, INT_MAX}, {1 << 20, 1ll << 40}, {0, 1024}, {LLONG_MIN, LLONG_MAX}, {-5, 5}, {0, 1}};
  for (const auto& range : ranges)
    for (const std::string& t : texts) expectLikeReference(t, range.first, range.second);
}

TEST(ParseNumber, RandomTextMatchesTheReference) {
  const uint64_t seed = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  std::mt19937_64 g(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const char alphabet[] = "0123456789abcdefxXkKmMgG+- ";
  for (int i = 0; i < 20000; i++) {
    std::string t;
    const int len = (int)(g() % 24);
    // Mostly well-formed numbers of every length (so the limits are reached), some noise.
    if (g() % 4) {
      if (g() % 3 == 0) t += '-';
      if (g() % 4 == 0) t += "0x";
      const bool hex = t.find('x') != std::string::npos;
      for (int k = 0; k < len; k++) t += (char)(hex ? "0123456789abcdef"[g() % 16] : '0' + (char)(g() % 10));
      if (g() % 2) t += "kKmMgG"[g() % 6];
    } else {
      for (int k = 0; k < len; k++) t += alphabet[g() % (sizeof(alphabet) - 1)];
    }
    const long long bounds[] = {LLONG_MIN, -1, 0, 1, 1024, INT_MAX, 1ll << 40, LLONG_MAX};
    long long lo = bounds[g() % 8], hi = bounds[g() % 8];
    if (lo > hi) std::swap(lo, hi);
    expectLikeReference(t, lo, hi);
    if (HasFailure()) return;
  }
}

TEST(ParseChoice, ExactMatchOrAnErrorListingTheValues) {
  int v = -1;
  EXPECT_EQ(mkcclSuccess, mkccl::parseChoice("tune.order", "interleaved", {"phases", "interleaved"}, &v));
  EXPECT_EQ(1, v);
  v = 7;
  for (const char* bad : {"", "Phases", "phase", "phases ", "x"}) {
    EXPECT_EQ(mkcclInvalidUsage, mkccl::parseChoice("tune.order", bad, {"phases", "interleaved"}, &v)) << bad;
    EXPECT_EQ(7, v);
    std::string msg = mkccl::lastError();
    EXPECT_NE(std::string::npos, msg.find("tune.order")) << msg;
    EXPECT_NE(std::string::npos, msg.find("phases or interleaved")) << msg;
  }
  EXPECT_EQ(mkcclInvalidUsage, mkccl::parseChoice("tune.order", nullptr, {"phases"}, &v));
}

// Sets variables for the scope and re-reads the settings; restores both at the end.
class Env {
 public:
  void set(const char* name, const char* value) {
    saved_.push_back({name, getenv(name) ? std::string(getenv(name)) : std::string(), getenv(name) != nullptr});
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~Env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->had)
        setenv(it->name.c_str(), it->value.c_str(), 1);
      else
        unsetenv(it->name.c_str());
    }
    mkccl::settingsRefresh();
  }

 private:
  struct Saved {
    std::string name, value;
    bool had;
  };
  std::vector<Saved> saved_;
};

const char* kAll[] = {"MKCCL_DEBUG", "MKCCL_TIMEOUT_MS", "MKCCL_SOCKET_IFNAME", "MKCCL_COMM_ID",
                      "MKCCL_WORKSPACE_BYTES", "MKCCL_COMM_CTAS", "MKCCL_MAX_CTAS", "MKCCL_NET",
                      "MKCCL_NET_PROVIDER", "MKCCL_NET_BUFFER_BYTES", "MKCCL_RANKS_PER_NODE", "MKCCL_TOPO_FILE",
                      "MKCCL_NET_DEVICES", "MKCCL_SHARE_GPUS", "MKCCL_LAUNCH_TIMEOUT_MS"};

TEST(Settings, DefaultsWhenUnsetAndEveryVariableListed) {
  Env env;
  for (const char* v : kAll) env.set(v, nullptr);
  ASSERT_EQ(mkcclSuccess, mkccl::settingsRefresh()) << mkccl::lastError();
  const mkccl::Settings& s = mkccl::settings();
  EXPECT_EQ(60000, s.timeoutMs);
  EXPECT_EQ(256ll << 20, s.workspaceBytes);
  EXPECT_EQ(-1, s.commCtas);
  EXPECT_EQ(mkccl::NetChoice::Auto, s.net);
  EXPECT_EQ(64ll << 20, s.netBufferBytes);
  EXPECT_EQ(0, s.ranksPerNode);
  EXPECT_FALSE(s.shareGpus);
  EXPECT_EQ(600000, s.launchTimeoutMs);
  const std::string d = s.describe();
  for (const char* v : kAll) {
    size_t at = d.find(std::string(v) + "=");
    ASSERT_NE(std::string::npos, at) << v << " missing from: " << d;
    size_t end = d.find(", MKCCL_", at);
    EXPECT_NE(std::string::npos, d.substr(at, end - at).find("(default)")) << d.substr(at, end - at);
  }
}

TEST(Settings, ValuesFromTheEnvironmentAreTakenAndNamedAsSuch) {
  Env env;
  env.set("MKCCL_TIMEOUT_MS", "1500");
  env.set("MKCCL_WORKSPACE_BYTES", "512M");
  env.set("MKCCL_NET", "EFA");
  env.set("MKCCL_DEBUG", "warn");
  env.set("MKCCL_SHARE_GPUS", "1");
  env.set("MKCCL_SOCKET_IFNAME", "^docker,lo");
  env.set("MKCCL_RANKS_PER_NODE", "2");
  ASSERT_EQ(mkcclSuccess, mkccl::settingsRefresh()) << mkccl::lastError();
  const mkccl::Settings& s = mkccl::settings();
  EXPECT_EQ(1500, s.timeoutMs);
  EXPECT_EQ(512ll << 20, s.workspaceBytes);
  EXPECT_EQ(mkccl::NetChoice::Efa, s.net);
  EXPECT_EQ(mkccl::LogLevel::Warn, s.debug);
  EXPECT_TRUE(s.shareGpus);
  EXPECT_EQ("^docker,lo", s.socketIfname);
  EXPECT_EQ(2, s.ranksPerNode);
  const std::string d = s.describe();
  EXPECT_NE(std::string::npos, d.find("MKCCL_TIMEOUT_MS=1500 (env)")) << d;
  EXPECT_NE(std::string::npos, d.find("MKCCL_WORKSPACE_BYTES=536870912 (env)")) << d;
  EXPECT_NE(std::string::npos, d.find("MKCCL_MAX_CTAS=(all SMs) (default)")) << d;
}

TEST(Settings, AnInvalidValueIsAnErrorNamingTheVariableAndKeepsTheDefault) {
  const std::pair<const char*, const char*> bad[] = {
      {"MKCCL_TIMEOUT_MS", "18014398509481985K"}, {"MKCCL_TIMEOUT_MS", "2147483648"}, {"MKCCL_TIMEOUT_MS", "0"},
      {"MKCCL_TIMEOUT_MS", "soon"}, {"MKCCL_WORKSPACE_BYTES", "17592186044417G"}, {"MKCCL_WORKSPACE_BYTES", "1000"},
      {"MKCCL_COMM_CTAS", "1025"}, {"MKCCL_MAX_CTAS", "0"}, {"MKCCL_NET", "rdma"}, {"MKCCL_DEBUG", "LOUD"},
      {"MKCCL_NET_BUFFER_BYTES", "-1"}, {"MKCCL_RANKS_PER_NODE", "0"}, {"MKCCL_SHARE_GPUS", "yes"}};
  for (const auto& b : bad) {
    Env env;
    env.set(b.first, b.second);
    EXPECT_EQ(mkcclInvalidUsage, mkccl::settingsRefresh()) << b.first << "=" << b.second;
    std::string msg = mkccl::lastError();
    EXPECT_NE(std::string::npos, msg.find(b.first)) << msg;
    const mkccl::Settings& s = mkccl::settings();
    EXPECT_EQ(60000, s.timeoutMs);
    EXPECT_EQ(256ll << 20, s.workspaceBytes);
    EXPECT_NE(std::string::npos, s.describe().find("is invalid")) << s.describe();
  }
  // The tools' own setting is checked by the tools, not by the library's init.
  Env env;
  env.set("MKCCL_LAUNCH_TIMEOUT_MS", "forever");
  EXPECT_EQ(mkcclSuccess, mkccl::settingsRefresh());
  EXPECT_EQ(mkcclInvalidUsage, mkccl::settingsCheck(mkccl::SettingId::LaunchTimeoutMs));
  EXPECT_NE(nullptr, strstr(mkccl::lastError(), "MKCCL_LAUNCH_TIMEOUT_MS"));
  EXPECT_EQ(600000, mkccl::settings().launchTimeoutMs);
}

TEST(Settings, ReadOnceAndAgainOnlyWhenTheEnvironmentChanged) {
  Env env;
  env.set("MKCCL_TIMEOUT_MS", "1234");
  ASSERT_EQ(mkcclSuccess, mkccl::settingsRefresh());
  const mkccl::Settings* first = &mkccl::settings();
  EXPECT_EQ(1234, first->timeoutMs);
  ASSERT_EQ(mkcclSuccess, mkccl::settingsRefresh());
  EXPECT_EQ(first, &mkccl::settings()) << "nothing changed: the same values, not a new read";
  setenv("MKCCL_TIMEOUT_MS", "4321", 1);
  EXPECT_EQ(1234, mkccl::settings().timeoutMs) << "settings() alone never re-reads";
  ASSERT_EQ(mkcclSuccess, mkccl::settingsRefresh());
  EXPECT_EQ(4321, mkccl::settings().timeoutMs);
  EXPECT_EQ(1234, first->timeoutMs) << "an earlier reference stays valid and unchanged";
}

TEST(Settings, ConcurrentReadersAndRefreshes) {
  Env env;
  env.set("MKCCL_TIMEOUT_MS", "777");
  ASSERT_EQ(mkcclSuccess, mkccl::settingsRefresh());
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; t++)
    ts.emplace_back([&] {
      for (int i = 0; i < 2000; i++) {
        if (i % 100 == 0 && mkccl::settingsRefresh() != mkcclSuccess) bad++;
        if (mkccl::settings().timeoutMs != 777) bad++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(0, bad.load());
}

}  // namespace
