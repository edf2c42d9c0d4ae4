// spawnLocal (see launch.h): n children on this host, their hub, and their fate.
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include <vector>
#include "launch/hub.h"
#include "launch/launch.h"

extern char** environ;

namespace mkccl {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kGraceMs = 2000;      // after a rank fails, the others may still fail on their own (and say why)
constexpr int kTermToKillMs = 2000;  // SIGTERM, then SIGKILL

// PATH lookup as execvp does, done before fork (execvp itself is not async-signal-safe).
bool resolveProgram(const std::string& prog, std::string* path, std::string* why) {
  auto executable = [](const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  if (prog.find('/') != std::string::npos) {
    *path = prog;
    if (executable(prog)) return true;
    *why = access(prog.c_str(), F_OK) ? strerror(ENOENT) : "not an executable file";
    return false;
  }
  const char* env = getenv("PATH");
  std::string dirs = env ? env : "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t colon = dirs.find(':', pos);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(pos, colon - pos);
    std::string p = (dir.empty() ? "." : dir) + "/" + prog;
    if (executable(p)) {
      *path = p;
      return true;
    }
    pos = colon + 1;
  }
  *why = "not found in PATH";
  return false;
}

__attribute__((format(printf, 2, 3))) void sayIf(bool quiet, const char* fmt, ...) {
  if (quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mkccl-run: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

std::string describeStatus(int st) {
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(st));
}

}  // namespace

int spawnLocal(int n, const std::vector<std::string>& argv, const SpawnOptions& opt) {
  if (n < 1 || argv.empty() || argv[0].empty()) {
    sayIf(opt.quiet, "nothing to run (n=%d)", n);
    return 2;
  }
  std::string path, why;
  if (!resolveProgram(argv[0], &path, &why)) {
    sayIf(opt.quiet, "cannot execute %s: %s", argv[0].c_str(), why.c_str());
    return 127;
  }

  Hub hub;
  std::string hubAddr, err;
  if (hub.start(n, &hubAddr, &err)) {
    sayIf(opt.quiet, "cannot start the hub: %s", err.c_str());
    return 1;
  }

  // Everything the children need is built before fork: with the hub thread running, a child may
  // only make async-signal-safe calls until it execs.
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> base;
  for (char** e = environ; *e; e++)
    if (strncmp(*e, "MKCCL_LAUNCH_", 13) != 0) base.push_back(*e);
  std::vector<std::vector<std::string>> envs(n, base);
  std::vector<std::vector<char*>> envps(n);
  for (int r = 0; r < n; r++) {
    envs[r].push_back("MKCCL_LAUNCH_RANK=" + std::to_string(r));
    envs[r].push_back("MKCCL_LAUNCH_NRANKS=" + std::to_string(n));
    envs[r].push_back("MKCCL_LAUNCH_LOCAL_RANK=" + std::to_string(r));
    envs[r].push_back("MKCCL_LAUNCH_LOCAL_RANKS=" + std::to_string(n));
    envs[r].push_back("MKCCL_LAUNCH_HUB=" + hubAddr);
    for (std::string& s : envs[r]) envps[r].push_back(&s[0]);
    envps[r].push_back(nullptr);
  }
  std::string execFailed = "mkccl-run: exec of " + path + " failed\n";

  fflush(stdout);
  fflush(stderr);
  const pid_t parent = getpid();
  std::vector<pid_t> pids(n, -1);
  std::vector<int> status(n, -1);  // -1: running
  int running = 0;
  int result = 0;
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p == 0) {
      // Children die with us (even by SIGKILL), rather than run on with nobody to serve them.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      execve(path.c_str(), cargv.data(), envps[r].data());
      (void)!write(2, execFailed.data(), execFailed.size());
      _exit(127);
    }
    if (p < 0) {
      sayIf(opt.quiet, "fork failed for rank %d: %s", r, strerror(errno));
      for (int q = r; q < n; q++) status[q] = 1, hub.rankExited(q);
      result = 1;
      break;
    }
    pids[r] = p;
    running++;
  }

  auto t0 = Clock::now();
  Clock::time_point failAt, termAt;
  bool failed = result != 0, timedOut = false, termSent = false, killSent = false;
  if (failed) failAt = t0;
  auto signalRunning = [&](int sig) {
    for (int r = 0; r < n; r++)
      if (status[r] == -1 && pids[r] > 0) kill(pids[r], sig);
  };
  auto msSince = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  while (running > 0) {
    for (int r = 0; r < n; r++) {
      int st = 0;
      if (status[r] != -1 || waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      status[r] = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
      running--;
      hub.rankExited(r);
      if (status[r] == 0) continue;
      bool ours = termSent;
      sayIf(opt.quiet, "rank %d %s%s", r, describeStatus(st).c_str(), ours ? " (stopped by mkccl-run)" : "");
      if (!failed && !timedOut) {
        failed = true;
        result = status[r];
        failAt = Clock::now();
      }
    }
    if (running == 0) break;
    if (!failed && !timedOut && opt.timeoutSec > 0 && msSince(t0) >= opt.timeoutSec * 1000LL) {
      timedOut = true;
      result = 124;
      sayIf(opt.quiet, "timeout after %d s: stopping the %d rank(s) still running", opt.timeoutSec, running);
      signalRunning(SIGTERM);
      termSent = true;
      termAt = Clock::now();
    }
    if (failed && !termSent && msSince(failAt) >= kGraceMs) {
      signalRunning(SIGTERM);
      termSent = true;
      termAt = Clock::now();
    }
    if (termSent && !killSent && msSince(termAt) >= kTermToKillMs) {
      signalRunning(SIGKILL);
      killSent = true;
    }
    usleep(10000);
  }
  hub.stop();
  return result;
}

}  // namespace launch
}  // namespace mkccl
