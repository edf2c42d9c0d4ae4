// The settings reader (see settings.h).
#include "base/settings.h"
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include "base/check.h"
#include "base/env.h"

namespace mkccl {
namespace {

enum class Kind { Number, Choice, Text };

struct Desc {
  const char* name;
  Kind kind;
  bool library;  // checked by settingsRefresh (false: a tool's own, checked by the tool)
};

const Desc kDesc[kNumSettings] = {
    {"MKCCL_DEBUG", Kind::Choice, true},          {"MKCCL_TIMEOUT_MS", Kind::Number, true},
    {"MKCCL_SOCKET_IFNAME", Kind::Text, true},    {"MKCCL_COMM_ID", Kind::Text, true},
    {"MKCCL_WORKSPACE_BYTES", Kind::Number, true}, {"MKCCL_COMM_CTAS", Kind::Number, true},
    {"MKCCL_MAX_CTAS", Kind::Number, true},       {"MKCCL_NET", Kind::Choice, true},
    {"MKCCL_NET_PROVIDER", Kind::Text, true},     {"MKCCL_NET_BUFFER_BYTES", Kind::Number, true},
    {"MKCCL_RANKS_PER_NODE", Kind::Number, true}, {"MKCCL_TOPO_FILE", Kind::Text, true},
    {"MKCCL_NET_DEVICES", Kind::Text, true},      {"MKCCL_SHARE_GPUS", Kind::Number, true},
    {"MKCCL_LAUNCH_TIMEOUT_MS", Kind::Number, false},
};

std::string upper(const std::string& s) {
  std::string r = s;
  for (char& c : r) c = (char)toupper((unsigned char)c);
  return r;
}

std::string lower(const std::string& s) {
  std::string r = s;
  for (char& c : r) c = (char)tolower((unsigned char)c);
  return r;
}

mkcclResult_t parseDebug(const char* text, LogLevel* out) {
  static const LogLevel levels[] = {LogLevel::None, LogLevel::None, LogLevel::Warn, LogLevel::Info, LogLevel::Trace};
  int i = 0;
  MKCCL_CHECK(parseChoice("MKCCL_DEBUG", upper(text).c_str(), {"NONE", "OFF", "WARN", "INFO", "TRACE"}, &i));
  *out = levels[i];
  return mkcclSuccess;
}

mkcclResult_t number(SettingId id, const char* text, long long lo, long long hi, long long* out) {
  return parseNumber(kDesc[(int)id].name, text, lo, hi, out);
}

// Parses one variable's text into its field; the field keeps its default on an error.
mkcclResult_t apply(Settings& s, SettingId id, const char* text) {
  long long v = 0;
  int c = 0;
  switch (id) {
    case SettingId::Debug:
      return parseDebug(text, &s.debug);
    case SettingId::TimeoutMs:
      MKCCL_CHECK(number(id, text, 1, INT_MAX, &v));
      s.timeoutMs = (int)v;
      return mkcclSuccess;
    case SettingId::SocketIfname:
      s.socketIfname = text;
      return mkcclSuccess;
    case SettingId::CommId:
      s.commId = text;
      return mkcclSuccess;
    case SettingId::WorkspaceBytes:
      MKCCL_CHECK(number(id, text, 1ll << 20, 1ll << 40, &s.workspaceBytes));
      return mkcclSuccess;
    case SettingId::CommCtas:
      MKCCL_CHECK(number(id, text, 0, 1024, &v));
      s.commCtas = (int)v;
      return mkcclSuccess;
    case SettingId::MaxCtas:
      MKCCL_CHECK(number(id, text, 1, 1024, &v));
      s.maxCtas = (int)v;
      return mkcclSuccess;
    case SettingId::Net:
      MKCCL_CHECK(parseChoice("MKCCL_NET", lower(text).c_str(), {"ib", "efa", "none"}, &c));
      s.net = (NetChoice)(c + 1);
      return mkcclSuccess;
    case SettingId::NetProvider:
      s.netProvider = text;
      return mkcclSuccess;
    case SettingId::NetBufferBytes:
      MKCCL_CHECK(number(id, text, 1ll << 20, 1ll << 40, &s.netBufferBytes));
      return mkcclSuccess;
    case SettingId::RanksPerNode:
      MKCCL_CHECK(number(id, text, 1, 1 << 20, &v));
      s.ranksPerNode = (int)v;
      return mkcclSuccess;
    case SettingId::TopoFile:
      s.topoFile = text;
      return mkcclSuccess;
    case SettingId::NetDevices:
      s.netDevices = text;
      return mkcclSuccess;
    case SettingId::ShareGpus:
      MKCCL_CHECK(number(id, text, 0, 1, &v));
      s.shareGpus = v != 0;
      return mkcclSuccess;
    case SettingId::LaunchTimeoutMs:
      MKCCL_CHECK(number(id, text, 1, INT_MAX, &v));
      s.launchTimeoutMs = (int)v;
      return mkcclSuccess;
    case SettingId::Count:
      break;
  }
  return mkcclInternalError;
}

const char* envText(int i) {
  const char* t = getenv(kDesc[i].name);
  return t && *t ? t : nullptr;  // empty counts as unset
}

void load(Settings* s) {
  for (int i = 0; i < kNumSettings; i++) {
    const char* t = envText(i);
    if (!t) continue;
    s->raw[i] = t;
    s->err[i] = apply(*s, (SettingId)i, t);
    if (s->err[i] == mkcclSuccess)
      s->fromEnv[i] = true;
    else
      s->errMsg[i] = lastError();
  }
}

bool changed(const Settings& s) {
  for (int i = 0; i < kNumSettings; i++) {
    const char* t = envText(i);
    bool wasSet = !s.raw[i].empty();
    if ((t != nullptr) != wasSet || (t && s.raw[i] != t)) return true;
  }
  return false;
}

struct Snapshot {
  Settings s;
  std::atomic<bool> logged{false};
};

std::mutex gMutex;
std::deque<Snapshot> gSnapshots;  // never shrinks: references handed out stay valid
std::atomic<Snapshot*> gCurrent{nullptr};

// Under gMutex.
Snapshot* readLocked() {
  gSnapshots.emplace_back();
  Snapshot* snap = &gSnapshots.back();
  load(&snap->s);
  logSetLevel(snap->s.err[(int)SettingId::Debug] != mkcclSuccess ? LogLevel::Warn : snap->s.debug);
  gCurrent.store(snap, std::memory_order_release);
  return snap;
}

Snapshot* current() {
  Snapshot* c = gCurrent.load(std::memory_order_acquire);
  if (c) return c;
  std::lock_guard<std::mutex> lock(gMutex);
  c = gCurrent.load(std::memory_order_acquire);
  return c ? c : readLocked();
}

std::string valueText(const Settings& s, SettingId id) {
  auto orText = [](const std::string& v, const char* def) { return v.empty() ? std::string(def) : v; };
  switch (id) {
    case SettingId::Debug: {
      static const char* names[] = {"NONE", "WARN", "INFO", "TRACE"};
      return names[(int)s.debug];
    }
    case SettingId::TimeoutMs: return std::to_string(s.timeoutMs);
    case SettingId::SocketIfname: return orText(s.socketIfname, "(automatic)");
    case SettingId::CommId: return orText(s.commId, "(none)");
    case SettingId::WorkspaceBytes: return std::to_string(s.workspaceBytes);
    case SettingId::CommCtas: return s.commCtas < 0 ? "(the model's)" : std::to_string(s.commCtas);
    case SettingId::MaxCtas: return s.maxCtas < 0 ? "(all SMs)" : std::to_string(s.maxCtas);
    case SettingId::Net: {
      static const char* names[] = {"(ib if present, else efa)", "ib", "efa", "none"};
      return names[(int)s.net];
    }
    case SettingId::NetProvider: return orText(s.netProvider, "(efa, else tcp)");
    case SettingId::NetBufferBytes: return std::to_string(s.netBufferBytes);
    case SettingId::RanksPerNode: return s.ranksPerNode ? std::to_string(s.ranksPerNode) : "(real hosts)";
    case SettingId::TopoFile: return orText(s.topoFile, "(discover)");
    case SettingId::NetDevices: return orText(s.netDevices, "(automatic)");
    case SettingId::ShareGpus: return s.shareGpus ? "1" : "0";
    case SettingId::LaunchTimeoutMs: return std::to_string(s.launchTimeoutMs);
    case SettingId::Count: break;
  }
  return "?";
}

}  // namespace

std::string Settings::describe() const {
  std::string out;
  for (int i = 0; i < kNumSettings; i++) {
    if (i) out += ", ";
    out += kDesc[i].name;
    out += "=" + valueText(*this, (SettingId)i);
    if (err[i] != mkcclSuccess)
      out += " (default: \"" + raw[i] + "\" is invalid)";
    else
      out += fromEnv[i] ? " (env)" : " (default)";
  }
  return out;
}

const Settings& settings() { return current()->s; }

mkcclResult_t settingsRefresh() {
  Snapshot* snap;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    snap = gCurrent.load(std::memory_order_acquire);
    if (!snap || changed(snap->s)) snap = readLocked();
  }
  for (int i = 0; i < kNumSettings; i++)
    if (kDesc[i].library && snap->s.err[i] != mkcclSuccess) return recordError(snap->s.err[i], snap->s.errMsg[i].c_str());
  return mkcclSuccess;
}

mkcclResult_t settingsCheck(SettingId id) {
  const Settings& s = settings();
  int i = (int)id;
  return s.err[i] == mkcclSuccess ? mkcclSuccess : recordError(s.err[i], s.errMsg[i].c_str());
}

void settingsLogOnce() {
  Snapshot* snap = current();
  if (!snap->logged.exchange(true)) MKCCL_INFO("settings: %s", snap->s.describe().c_str());
}

LogLevel settingsDebugLevel() {
  const char* t = getenv("MKCCL_DEBUG");
  LogLevel level = LogLevel::None;
  if (t && *t && parseDebug(t, &level) != mkcclSuccess) level = LogLevel::Warn;
  return level;
}

}  // namespace mkccl
