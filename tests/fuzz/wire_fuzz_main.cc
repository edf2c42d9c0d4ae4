// The bootstrap wire fuzzer, fork per case: random scripts of hostile connections (wire_case.h)
// against real rendezvous, for a bounded time. Each case runs in a child process, so a crash or a
// hang is counted (and the case printed for replay) and the next case starts clean.
//
//   bootstrap_wire_fuzz [--seconds S] [--cases N] [--seed X] [--report-only] [--replay HEX]
// Exit status: 0 when every case was clean (or --report-only), 1 otherwise.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <random>
#include <string>
#include <vector>
#include "wire_case.h"

using mkccl::fuzz::CaseReport;
using mkccl::fuzz::Outcome;

namespace {

std::string hex(const std::vector<uint8_t>& v) {
  std::string s;
  char b[3];
  for (uint8_t x : v) snprintf(b, sizeof(b), "%02x", x), s += b;
  return s;
}

std::vector<uint8_t> unhex(const char* s) {
  std::vector<uint8_t> v;
  for (; s[0] && s[1]; s += 2) {
    char b[3] = {s[0], s[1], 0};
    v.push_back((uint8_t)strtoul(b, nullptr, 16));
  }
  return v;
}

// Runs one case in a child; the parent enforces the bound and reads the report.
CaseReport runForked(const std::vector<uint8_t>& script) {
  int p[2];
  if (pipe(p) != 0) return {Outcome::Crash, "pipe failed"};
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child == 0) {
    close(p[0]);
    CaseReport r = mkccl::fuzz::runWireCase(script.data(), script.size());
    std::string out = std::to_string((int)r.outcome) + " " + r.detail;
    (void)!write(p[1], out.data(), out.size());
    _exit(0);
  }
  close(p[1]);
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  const int limitMs = mkccl::fuzz::kCaseTimeoutMs + 4000;
  bool killed = false;
  for (;;) {
    pollfd q = {p[0], POLLIN, 0};
    int left = limitMs - (int)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0) {
      kill(child, SIGKILL);
      killed = true;
      break;
    }
    if (poll(&q, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = read(p[0], buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, (size_t)n);
  }
  close(p[0]);
  int st = 0;
  waitpid(child, &st, 0);
  if (killed) return {Outcome::Hang, "killed after " + std::to_string(limitMs) + " ms: " + out};
  if (WIFSIGNALED(st)) return {Outcome::Crash, std::string("signal ") + strsignal(WTERMSIG(st)) + ": " + out};
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || out.empty())
    return {Outcome::Crash, "exit status " + std::to_string(WEXITSTATUS(st)) + " (a sanitizer report?): " + out};
  CaseReport r;
  r.outcome = (Outcome)atoi(out.c_str());
  r.detail = out.substr(out.find(' ') + 1);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 20;
  long maxCases = 1 << 30;
  uint64_t seed = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() ^ ((uint64_t)getpid() << 32);
  bool reportOnly = false;
  const char* replay = nullptr;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cases") && i + 1 < argc) maxCases = atol(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 0);
    else if (!strcmp(argv[i], "--report-only")) reportOnly = true;
    else if (!strcmp(argv[i], "--replay") && i + 1 < argc) replay = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--seconds S] [--cases N] [--seed X] [--report-only] [--replay HEX]\n", argv[0]);
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  if (replay) {
    CaseReport r = runForked(unhex(replay));
    printf("%s: %s\n", mkccl::fuzz::outcomeName(r.outcome), r.detail.c_str());
    return r.outcome == Outcome::Clean || r.outcome == Outcome::CleanError ? 0 : 1;
  }
  printf("bootstrap wire fuzz: seed %llu, %.0f s (replay a case with --replay HEX)\n", (unsigned long long)seed, seconds);
  std::mt19937_64 g(seed);
  long counts[(int)Outcome::Count] = {0};
  long cases = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (cases < maxCases &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    std::vector<uint8_t> script(2 + g() % 48);
    for (uint8_t& b : script) b = (uint8_t)g();
    CaseReport r = runForked(script);
    counts[(int)r.outcome]++;
    cases++;
    if (r.outcome != Outcome::Clean && r.outcome != Outcome::CleanError)
      printf("case %ld %s: %s\n  replay: --replay %s\n", cases, mkccl::fuzz::outcomeName(r.outcome), r.detail.c_str(),
             hex(script).c_str());
    fflush(stdout);
  }
  long bad = 0;
  printf("WIREFUZZ cases %ld:", cases);
  for (int o = 0; o < (int)Outcome::Count; o++) {
    printf(" %s %ld%s", mkccl::fuzz::outcomeName((Outcome)o), counts[o], o + 1 < (int)Outcome::Count ? "," : "\n");
    if (o >= (int)Outcome::Broken) bad += counts[o];
  }
  return bad && !reportOnly ? 1 : 0;
}
