// The user-facing settings: every MKCCL_* environment variable the library and its tools obey
// (the tuning overrides excepted: the tuner reads those), read by this one reader with the one
// parser (base/env.h), checked, and listed at INFO with their values and where each came from.
//
//   MKCCL_DEBUG              NONE | WARN | INFO | TRACE (any case; OFF = NONE)        default NONE
//   MKCCL_TIMEOUT_MS         every wait's bound, ms, 1 .. 2^31-1                       default 60000
//   MKCCL_SOCKET_IFNAME      the bootstrap's interface (runtime/socket.h)            default automatic
//   MKCCL_COMM_ID            <host>:<port>: ids derived from it, rank 0 serves there   default none
//   MKCCL_WORKSPACE_BYTES    symmetric workspace per rank, 1M .. 1T                    default 256M
//   MKCCL_COMM_CTAS          dedicated comm CTAs of the fused ops, 0 .. 1024           default the model's
//   MKCCL_MAX_CTAS           CTAs of a fused kernel at most, 1 .. 1024                 default all SMs
//   MKCCL_NET                ib | efa | none (any case)                                default ib if present
//   MKCCL_NET_PROVIDER       libfabric provider for efa                                default efa, else tcp
//   MKCCL_NET_BUFFER_BYTES   network window per rank, 1M .. 1T                         default 64M
//   MKCCL_RANKS_PER_NODE     emulate nodes of this many ranks on one host, 1 .. 2^20   default real hosts
//   MKCCL_TOPO_FILE          hwloc XML used instead of discovery                       default discover
//   MKCCL_NET_DEVICES        NICs to use, name[:port],...                              default automatic
//   MKCCL_SHARE_GPUS         0 | 1: ranks may share a GPU (a testing aid)             default 0
//   MKCCL_LAUNCH_TIMEOUT_MS  the launcher's host collectives (tools), ms               default 600000
//
// When they are read: at the first use, and again at the start of every communicator init and
// mkcclGetUniqueId if a variable changed since (programs and tests that set MKCCL_* between
// communicators); one init sees one set of values throughout. Change the environment only while
// no call of the library runs (setenv is not thread-safe). A value the setting does not take is
// an mkcclInvalidUsage naming the variable, returned by the init (the setting keeps its default
// meanwhile, so code that runs before the check never sees the bad value).
#pragma once
#include <string>
#include "mkccl.h"
#include "base/log.h"

namespace mkccl {

enum class SettingId : int {
  Debug, TimeoutMs, SocketIfname, CommId, WorkspaceBytes, CommCtas, MaxCtas, Net, NetProvider, NetBufferBytes,
  RanksPerNode, TopoFile, NetDevices, ShareGpus, LaunchTimeoutMs, Count
};
constexpr int kNumSettings = (int)SettingId::Count;

enum class NetChoice : int { Auto = 0, Ib = 1, Efa = 2, None = 3 };

struct Settings {
  LogLevel debug = LogLevel::None;
  int timeoutMs = 60000;
  std::string socketIfname;  // empty: automatic
  std::string commId;        // empty: none
  long long workspaceBytes = 256ll << 20;
  int commCtas = -1;         // -1: the model's count
  int maxCtas = -1;          // -1: all SMs
  NetChoice net = NetChoice::Auto;
  std::string netProvider;   // empty: efa, else tcp
  long long netBufferBytes = 64ll << 20;
  int ranksPerNode = 0;      // 0: real hosts
  std::string topoFile;      // empty: discover
  std::string netDevices;    // empty: automatic
  bool shareGpus = false;
  int launchTimeoutMs = 600000;

  // Per variable: its text when set (raw), whether it was set and taken, its error when not taken.
  std::string raw[kNumSettings];
  bool fromEnv[kNumSettings] = {};
  mkcclResult_t err[kNumSettings] = {};
  std::string errMsg[kNumSettings];

  // "MKCCL_DEBUG=INFO (env), MKCCL_TIMEOUT_MS=60000 (default), ...": every setting.
  std::string describe() const;
};

// The current settings (read at the first call). The reference stays valid for the life of the
// process; a re-read makes a new object and leaves this one as it is.
const Settings& settings();
// Re-reads the environment if any variable changed, then returns the error of the first invalid
// library setting (the tools' own excepted), recorded as this thread's last error, or success.
mkcclResult_t settingsRefresh();
// The error of one setting (success when it is valid), recorded as this thread's last error.
mkcclResult_t settingsCheck(SettingId id);
// Logs the INFO line of every setting once per set of values (at each communicator init: printed at
// the first, and again only when the values changed).
void settingsLogOnce();
// MKCCL_DEBUG's level, read without logging (log.cc asks it at its first message; an invalid value
// counts as WARN until the init reports it).
LogLevel settingsDebugLevel();

}  // namespace mkccl
