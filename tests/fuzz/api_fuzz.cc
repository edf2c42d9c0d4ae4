// Every public call with bad arguments, fork per case: each case calls one function of mkccl.h with
// at least one argument that is wrong (NULL, a dangling or foreign pointer, a handle that is no
// communicator, counts that overflow, enum values out of range, an id that is no id, a config that
// is short or corrupt, an environment value out of range) and the rest random. It must return an
// error naming the problem (mkcclInvalidArgument or mkcclInvalidUsage with a message): never
// success, never a crash, never a hang. Needs no GPU (the argument checks come first).
//
//   api_fuzz [--seconds S] [--cases N] [--seed X] [--report-only]
// Exit status: 0 when every case was clean (or --report-only), 1 otherwise.
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <random>
#include <string>
#include <vector>
#include "mkccl.h"

namespace {

enum Outcome { kClean, kAccepted, kMisjudged, kUnchecked, kNoMessage, kCrash, kHang, kNumOutcomes };
const char* kOutcomeNames[] = {"clean", "accepted (success)", "env value misjudged", "unchecked (another error)",
                               "no message", "crash", "hang"};
bool gEnvCase = false;  // the case set an environment value: its verdict is judged

struct Gen {
  std::mt19937_64 g;
  bool badPicked = false;
  uint64_t r() { return g(); }
  template <class T>
  T pick(const std::vector<T>& v) { return v[r() % v.size()]; }
  // One value of a slot: from the bad pool when this slot is the forced bad one, else from either.
  template <class T>
  T slot(bool forceBad, const std::vector<T>& good, const std::vector<T>& bad) {
    if (forceBad || (r() % 3 == 0 && !bad.empty())) return pick(bad);
    return pick(good);
  }
};

// Memory the cases point at: valid host buffers, a freed one, one at the end of a readable page.
struct Arena {
  char* buf = nullptr;      // 1 MiB of valid host memory
  char* freed = nullptr;    // freed (dangling)
  char* pageEnd = nullptr;  // the last bytes of a page followed by an unreadable page
  Arena() {
    buf = (char*)malloc(1 << 20);
    memset(buf, 0x5a, 1 << 20);
    freed = (char*)malloc(4096);
    free(freed);
    char* two = (char*)mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(two + 4096, 4096, PROT_NONE);
    pageEnd = two + 4096;
  }
};

std::string gDesc;  // what the case called, for the report

void describe(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void describe(const char* fmt, ...) {
  char b[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof(b), fmt, ap);
  va_end(ap);
  gDesc = b;
}

// Runs one case in this (child) process: returns the result and whether an error was expected
// (false for the environment cases whose value is valid).
mkcclResult_t runCase(uint64_t seed, Arena& a, bool* expectError) {
  Gen G{std::mt19937_64(seed)};
  *expectError = true;
  const int fn = (int)(G.r() % 22);
  // Which argument slot is forced bad (functions have at most 9).
  const int badSlot = (int)(G.r() % 9);
  auto bad = [&](int s) { return s == badSlot; };

  std::vector<void*> goodPtr = {a.buf, a.buf + 4096, a.buf + 65536};
  // Pointers a library can tell are wrong (NULL, misaligned); with a bad communicator any pointer is
  // wrong, and must not be touched before the communicator is checked.
  std::vector<void*> badPtr = {nullptr, (void*)1, (void*)-1, a.buf + 1, a.buf + 258};
  std::vector<void*> anyPtr = {nullptr, (void*)1, (void*)16, (void*)-1, a.freed, a.buf + 1, a.pageEnd - 2};
  std::vector<size_t> goodCount = {1, 8, 64, 1024};
  std::vector<size_t> badCount = {0, SIZE_MAX, SIZE_MAX / 2, (size_t)1 << 62, (size_t)-8, (size_t)1 << 40};
  std::vector<int> goodType = {mkcclFloat32, mkcclBfloat16, mkcclInt32, mkcclFloat16};
  std::vector<int> badType = {-1, mkcclNumTypes, 99, INT_MIN, INT_MAX};
  std::vector<int> goodOp = {mkcclSum, mkcclMax, mkcclMin};
  std::vector<int> badOp = {-1, mkcclNumOps, 77, INT_MIN};
  // No communicator can be made without a GPU: every handle here is not one.
  mkcclComm_t fakeComm = (mkcclComm_t)(a.buf + 8192);
  std::vector<mkcclComm_t> badComm = {nullptr, (mkcclComm_t)1, (mkcclComm_t)-1, fakeComm, (mkcclComm_t)a.freed,
                                      (mkcclComm_t)(a.pageEnd - 8)};
  std::vector<cudaStream_t> streams = {nullptr, (cudaStream_t)1, (cudaStream_t)-1, (cudaStream_t)a.buf};

  auto ptr = [&](int s) { return G.slot(bad(s), goodPtr, badPtr); };
  auto anyptr = [&](int) { return G.pick(anyPtr); };  // calls whose communicator is bad
  auto count = [&](int s) { return G.slot(bad(s), goodCount, badCount); };
  auto dtype = [&](int s) { return (mkcclDataType_t)G.slot(bad(s), goodType, badType); };
  auto redop = [&](int s) { return (mkcclRedOp_t)G.slot(bad(s), goodOp, badOp); };
  auto comm = [&](int) { return G.pick(badComm); };
  auto stream = [&](int) { return G.pick(streams); };

  switch (fn) {
    case 0:
      describe("mkcclGetVersion(NULL)");
      return mkcclGetVersion(nullptr);
    case 1: {
      int code = (int)(G.r() % 3 ? (int)G.r() : (int)(G.r() % 20) - 5);
      describe("mkcclGetErrorString(%d), mkcclGetLastError(bad comm)", code);
      const char* s = mkcclGetErrorString((mkcclResult_t)code);
      const char* e = mkcclGetLastError(comm(0));
      if (!s || !e) return mkcclInternalError;
      (void)strlen(s), (void)strlen(e);
      *expectError = false;  // nothing to return: not crashing is the test
      return mkcclSuccess;
    }
    case 2: {
      void* p = G.pick(std::vector<void*>{nullptr});
      describe("mkcclGetUniqueId(NULL)");
      return mkcclGetUniqueId((mkcclUniqueId*)p);
    }
    case 3:
    case 4: {
      // Init with a bad id, bad nranks/rank, a bad output pointer or a bad config.
      mkcclUniqueId id;
      int idKind = (int)(G.r() % 4);
      if (idKind == 0) memset(&id, 0, sizeof(id));
      if (idKind == 1)
        for (char& c : id.internal) c = (char)G.r();
      if (idKind >= 2) {
        if (mkcclGetUniqueId(&id) != mkcclSuccess) return mkcclInternalError;
        if (idKind == 3) id.internal[G.r() % 64] ^= (char)(1 << (G.r() % 8));
      }
      int nranks = G.slot(bad(1), std::vector<int>{1, 2, 4}, std::vector<int>{0, -1, INT_MIN, INT_MAX});
      int rank = G.slot(bad(2), std::vector<int>{0}, std::vector<int>{-1, nranks, INT_MIN, INT_MAX});
      mkcclComm_t* out = (mkcclComm_t*)G.slot(bad(3), std::vector<void*>{a.buf}, std::vector<void*>{nullptr});
      if (idKind == 2 && !bad(1) && !bad(2) && !bad(3) && fn == 3) idKind = 0, memset(&id, 0, sizeof(id));
      if (fn == 3) {
        describe("mkcclCommInitRank(%p, %d, id kind %d, %d)", (void*)out, nranks, idKind, rank);
        return mkcclCommInitRank(out, nranks, id, rank);
      }
      // A config: corrupt fields, or short (size < the struct) and ending at an unreadable page.
      mkcclConfig_t* cfg = (mkcclConfig_t*)(a.buf + 32768);
      *cfg = MKCCL_CONFIG_INITIALIZER;
      int cfgKind = (int)(G.r() % 8);
      switch (cfgKind) {
        case 0: cfg->magic = (unsigned)G.r(); break;
        case 1: cfg->version = (unsigned)G.r() % 5 + 2; break;
        case 2: cfg->size = G.r() % sizeof(mkcclConfig_t); break;
        case 3: cfg->blocking = (int)(G.r() % 7) - 2; if (cfg->blocking == 0 || cfg->blocking == 1) cfg->blocking = 9; break;
        case 4: cfg->timeoutMs = -(int)(G.r() % 1000); break;
        case 5: cfg->commCtas = 1025 + (int)(G.r() % 100000); break;
        case 6: cfg->workspaceBytes = (long long)(G.r() % (1 << 20)); break;
        case 7: {
          // Only `size` fits before the unreadable page: reading magic first would fault.
          cfg = (mkcclConfig_t*)(a.pageEnd - sizeof(size_t));
          cfg->size = sizeof(size_t);
          break;
        }
      }
      describe("mkcclCommInitRankConfig(%p, %d, id kind %d, %d, config kind %d)", (void*)out, nranks, idKind, rank,
               cfgKind);
      return mkcclCommInitRankConfig(out, nranks, id, rank, cfg);
    }
    case 5: {
      int n = G.slot(bad(1), std::vector<int>{1, 2}, std::vector<int>{0, -1, INT_MIN});
      int* devs = (int*)(a.buf + 40960);
      devs[0] = G.pick(std::vector<int>{-1, 99, INT_MAX, INT_MIN});
      devs[1] = devs[0];
      mkcclComm_t* out = (mkcclComm_t*)G.slot(bad(0), std::vector<void*>{a.buf}, std::vector<void*>{nullptr});
      describe("mkcclCommInitAll(%p, %d, {%d, ...})", (void*)out, n, devs[0]);
      return mkcclCommInitAll(out, n, devs);
    }
    case 6: describe("mkcclCommDestroy(bad comm)"); return mkcclCommDestroy(comm(0));
    case 7: describe("mkcclCommAbort(bad comm)"); return mkcclCommAbort(comm(0));
    case 8: describe("mkcclCommGetAsyncError(bad comm)"); return mkcclCommGetAsyncError(comm(0), (mkcclResult_t*)anyptr(1));
    case 9: describe("mkcclCommCount(bad comm)"); return mkcclCommCount(comm(0), (int*)anyptr(1));
    case 10: describe("mkcclCommUserRank(bad comm)"); return mkcclCommUserRank(comm(0), (int*)anyptr(1));
    case 11: describe("mkcclCommCuDevice(bad comm)"); return mkcclCommCuDevice(comm(0), (int*)anyptr(1));
    case 12: describe("mkcclAllGather"); return mkcclAllGather(anyptr(0), anyptr(1), count(2), dtype(3), comm(4), stream(5));
    case 13:
      describe("mkcclReduceScatter");
      return mkcclReduceScatter(anyptr(0), anyptr(1), count(2), dtype(3), redop(4), comm(5), stream(6));
    case 14:
      describe("mkcclAllReduce");
      return mkcclAllReduce(anyptr(0), anyptr(1), count(2), dtype(3), redop(4), comm(5), stream(6));
    case 15: describe("mkcclAllToAll"); return mkcclAllToAll(anyptr(0), anyptr(1), count(2), dtype(3), comm(4), stream(5));
    case 16:
      describe("mkcclAllToAllv");
      return mkcclAllToAllv(anyptr(0), (const size_t*)anyptr(1), (const size_t*)anyptr(2), anyptr(3),
                            (const size_t*)anyptr(4), (const size_t*)anyptr(5), dtype(6), comm(7), stream(8));
    case 17: {
      // No communicator: only the pointers, sizes and types can be wrong.
      void* A = ptr(0);
      void* W = ptr(1);
      void* C = ptr(2);
      size_t M = count(3), N = count(4), K = count(5);
      mkcclDataType_t in = dtype(6), out = dtype(7);
      if (badSlot == 8) M = 0;  // the forced-bad slot must hit something of this call
      describe("mkcclGemm(%p, %p, %p, %zu, %zu, %zu, %d, %d)", A, W, C, M, N, K, (int)in, (int)out);
      return mkcclGemm(A, W, C, M, N, K, in, out, stream(8));
    }
    case 18:
      describe("mkcclAllGatherGemm");
      return mkcclAllGatherGemm(anyptr(0), anyptr(1), anyptr(2), anyptr(3), count(4), count(5), count(6), dtype(7), comm(8),
                                stream(0));
    case 19:
      describe("mkcclGemmReduceScatter");
      return mkcclGemmReduceScatter(anyptr(0), anyptr(1), anyptr(2), count(3), count(4), count(5), dtype(6), comm(7),
                                    stream(8));
    case 20:
      describe("mkcclGemmAllReduce");
      return mkcclGemmAllReduce(anyptr(0), anyptr(1), anyptr(2), count(3), count(4), count(5), dtype(6), comm(7), stream(8));
    case 21: {
      // An environment value, in range or not (with the K/M/G suffix near the limits), at init.
      struct Var {
        const char* name;
        __int128 lo, hi;
      };
      const Var vars[] = {{"MKCCL_TIMEOUT_MS", 1, INT_MAX},
                          {"MKCCL_WORKSPACE_BYTES", 1 << 20, (__int128)1 << 40},
                          {"MKCCL_COMM_CTAS", 0, 1024},
                          {"MKCCL_MAX_CTAS", 1, 1024}};
      const Var& v = vars[G.r() % 4];
      static const char* suffixes[] = {"", "K", "M", "G"};
      int sfx = (int)(G.r() % 4);
      // Magnitudes around the range's ends and around the 2^63 wrap, before the suffix's shift.
      __int128 base;
      switch (G.r() % 5) {
        case 0: base = (__int128)(G.r() % 2000); break;
        case 1: base = (v.hi >> (10 * sfx)) + (__int128)(G.r() % 5) - 2; break;
        case 2: base = ((__int128)1 << (63 - 10 * sfx)) + (__int128)(G.r() % 5) - 2; break;
        case 3: base = ((__int128)1 << (64 - 10 * sfx)) + 1; break;
        default: base = -(__int128)(G.r() % 100); break;
      }
      if (base > ((__int128)1 << 70)) base = (__int128)1 << 70;
      char text[64];
      bool neg = base < 0;
      unsigned __int128 m = neg ? (unsigned __int128)(-base) : (unsigned __int128)base;
      char digits[64];
      int nd = 0;
      do digits[nd++] = (char)('0' + (int)(m % 10)), m /= 10;
      while (m);
      int k = 0;
      if (neg) text[k++] = '-';
      while (nd) text[k++] = digits[--nd];
      text[k] = 0;
      strcat(text, suffixes[sfx]);
      const __int128 value = base * ((__int128)1 << (10 * sfx));
      *expectError = value < v.lo || value > v.hi;
      gEnvCase = true;
      mkcclUniqueId id;
      if (mkcclGetUniqueId(&id) != mkcclSuccess) return mkcclInternalError;
      setenv(v.name, text, 1);
      mkcclComm_t c = nullptr;
      describe("%s=%s (%s) then mkcclCommInitRank(1 rank)", v.name, text, *expectError ? "invalid" : "valid");
      mkcclResult_t r = mkcclCommInitRank(&c, 1, id, 0);
      if (r == mkcclSuccess) mkcclCommDestroy(c);
      if (*expectError && r != mkcclSuccess && !strstr(mkcclGetLastError(nullptr), v.name)) return mkcclInternalError;
      return r;
    }
  }
  return mkcclInternalError;
}

// One case in a child: the outcome.
Outcome runForked(uint64_t seed, std::string* desc) {
  int p[2];
  if (pipe(p) != 0) return kCrash;
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child == 0) {
    close(p[0]);
    setenv("MKCCL_TIMEOUT_MS", "3000", 1);  // an init that waits for other ranks gives up in time
    Arena a;
    bool expectError = true;
    mkcclResult_t r = runCase(seed, a, &expectError);
    const char* msg = mkcclGetLastError(nullptr);
    Outcome o;
    const bool refused = r == mkcclInvalidArgument || r == mkcclInvalidUsage;
    if (gEnvCase)
      o = refused == expectError ? (refused && !(msg && *msg) ? kNoMessage : kClean) : kMisjudged;
    else if (!expectError)
      o = r == mkcclInvalidArgument || r == mkcclInvalidUsage ? kAccepted : kClean;  // a valid value refused
    else if (r == mkcclSuccess)
      o = kAccepted;
    else if (r != mkcclInvalidArgument && r != mkcclInvalidUsage)
      o = kUnchecked;
    else
      o = msg && *msg ? kClean : kNoMessage;
    std::string out = std::to_string((int)o) + " " + gDesc + " -> " + std::to_string((int)r) + " " + (msg ? msg : "");
    (void)!write(p[1], out.data(), out.size());
    _exit(0);
  }
  close(p[1]);
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  bool killed = false;
  for (;;) {
    int left = 15000 - (int)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0) {
      kill(child, SIGKILL);
      killed = true;
      break;
    }
    pollfd q = {p[0], POLLIN, 0};
    if (poll(&q, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = read(p[0], buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, (size_t)n);
  }
  close(p[0]);
  int st = 0;
  waitpid(child, &st, 0);
  *desc = out.empty() ? "" : out.substr(out.find(' ') + 1);
  if (killed) return kHang;
  if (WIFSIGNALED(st) || out.empty()) {
    *desc += std::string(" [") + (WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "no report") + "]";
    return kCrash;
  }
  return (Outcome)atoi(out.c_str());
}

// *.btr files in the working directory (what libinfinipath's crash handler leaves).
int countBtrFiles() {
  int n = 0;
  if (DIR* d = opendir(".")) {
    while (dirent* e = readdir(d)) {
      size_t l = strlen(e->d_name);
      n += l > 4 && !strcmp(e->d_name + l - 4, ".btr");
    }
    closedir(d);
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 20;
  long maxCases = 1 << 30;
  uint64_t seed = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() ^ ((uint64_t)getpid() << 32);
  bool reportOnly = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cases") && i + 1 < argc) maxCases = atol(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 0);
    else if (!strcmp(argv[i], "--report-only")) reportOnly = true;
    else {
      fprintf(stderr, "usage: %s [--seconds S] [--cases N] [--seed X] [--report-only]\n", argv[0]);
      return 2;
    }
  }
  printf("api fuzz: seed %llu, %.0f s (a case is replayed by --seed <its seed> --cases 1)\n", (unsigned long long)seed,
         seconds);
  // The library (and what it loads) must leave the process's signal handlers alone: a crash of the
  // user's program must stay a crash by signal, with no file left behind.
  int v = 0;
  mkcclGetVersion(&v);
  int foreign = 0;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM}) {
    struct sigaction a;
    sigaction(sig, nullptr, &a);
    if (a.sa_handler != SIG_DFL) {
      printf("signal %d (%s) has a handler after loading libmkccl\n", sig, strsignal(sig));
      foreign++;
    }
  }
  const int btr0 = countBtrFiles();
  std::mt19937_64 g(seed);
  long counts[kNumOutcomes] = {0};
  long cases = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (cases < maxCases && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    uint64_t caseSeed = cases == 0 ? seed : g();
    std::string desc;
    Outcome o = runForked(caseSeed, &desc);
    counts[o]++;
    cases++;
    if (o != kClean) printf("case seed %llu: %s: %s\n", (unsigned long long)caseSeed, kOutcomeNames[o], desc.c_str());
    fflush(stdout);
  }
  const int btr = countBtrFiles() - btr0;
  printf("APIFUZZ signal handlers installed by the library or its dependencies: %d; backtrace files left: %d\n",
         foreign, btr);
  long bad = foreign + btr;
  printf("APIFUZZ cases %ld:", cases);
  for (int o = 0; o < kNumOutcomes; o++) {
    printf(" %s %ld%s", kOutcomeNames[o], counts[o], o + 1 < kNumOutcomes ? "," : "\n");
    if (o != kClean) bad += counts[o];
  }
  // Another error than InvalidArgument/InvalidUsage is reported, not fatal: where no CUDA driver
  // exists, mkcclCommInitAll cannot know the device count and says so.
  bad -= counts[kUnchecked];
  return bad && !reportOnly ? 1 : 0;
}
