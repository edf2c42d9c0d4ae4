// Helpers of the bootstrap tests (see bootstrap_test_util.h).
#include "bootstrap_test_util.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <random>
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_root.h"
#include "base/log.h"
#include "base/settings.h"
#include "runtime/socket.h"

namespace mkccl {
namespace test {

uint64_t freshSeed() {
  static uint64_t seed = [] {
    const char* s = getenv("MKCCL_TEST_SEED");
    uint64_t v = s ? strtoull(s, nullptr, 0)
                   : (uint64_t)std::chrono::high_resolution_clock::now().time_since_epoch().count() ^
                         ((uint64_t)getpid() << 40);
    fprintf(stderr, "bootstrap tests: seed %llu (replay with MKCCL_TEST_SEED=%llu)\n", (unsigned long long)v,
            (unsigned long long)v);
    return v;
  }();
  return seed;
}

uint64_t rand64(uint64_t seed, uint64_t stream) {
  std::mt19937_64 g(seed ^ (stream * 0x9e3779b97f4a7c15ull) ^ 0x5bd1e995ull);
  g.discard(3);
  return g();
}

std::vector<char> randomBytes(uint64_t seed, uint64_t stream, size_t bytes) {
  std::mt19937_64 g(seed ^ (stream * 0x9e3779b97f4a7c15ull));
  std::vector<char> v(bytes);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t x = g();
    memcpy(&v[i], &x, 8);
  }
  for (uint64_t x = g(); i < bytes; i++, x >>= 8) v[i] = (char)x;
  return v;
}

EnvGuard::EnvGuard(const char* name, const char* value) : name_(name) {
  const char* o = getenv(name);
  had_ = o != nullptr;
  if (o) old_ = o;
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  settingsRefresh();  // as an init would: the settings are read once, then at each init if changed
}

EnvGuard::~EnvGuard() {
  if (had_)
    setenv(name_.c_str(), old_.c_str(), 1);
  else
    unsetenv(name_.c_str());
  settingsRefresh();
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int> runThreads(int n, const std::function<int(int)>& fn) {
  std::vector<int> res(n, -1);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++) ts.emplace_back([&, r] { res[r] = fn(r); });
  for (auto& t : ts) t.join();
  return res;
}

namespace {

// Waits for the n children (killed past timeoutMs); their exit statuses, 128+signal when signalled.
std::vector<int> reapChildren(const std::vector<pid_t>& pids, int timeoutMs) {
  const int n = int(pids.size());
  std::vector<int> status(n, -1);
  auto t0 = std::chrono::steady_clock::now();
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; r++) {
      if (status[r] != -1) continue;
      int st = 0;
      if (pids[r] < 0) {
        status[r] = 98, left--;  // fork failed
      } else if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        left--;
      }
    }
    if (left && secondsSince(t0) * 1000 > timeoutMs) {
      for (int r = 0; r < n; r++)
        if (status[r] == -1) {
          fprintf(stderr, "runProcesses: rank %d still running after %d ms: killing it\n", r, timeoutMs);
          kill(pids[r], SIGKILL);
        }
      timeoutMs = 1 << 30;  // reap them in the next passes
    }
    if (left) usleep(2000);
  }
  return status;
}

[[noreturn]] void childExit(const std::function<int()>& body) {
  int code = 1;
  try {
    code = body();
  } catch (...) {
    code = 99;
  }
  fflush(stderr);
  _exit(code);
}

}  // namespace

std::vector<int> runProcesses(int n, const std::function<int(int)>& fn, int timeoutMs) {
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p == 0) childExit([&] { return fn(r); });
    pids[r] = p;
  }
  return reapChildren(pids, timeoutMs);
}

std::vector<int> runProcessesWithRoot(int n, const std::function<mkcclUniqueId()>& makeRoot,
                                      const std::function<int(const mkcclUniqueId&, int)>& fn, int timeoutMs) {
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids(n, -1);
  std::vector<int> toChild(n, -1);
  for (int r = 0; r < n; r++) {
    int fds[2];
    if (pipe(fds) != 0) break;
    pid_t p = fork();
    if (p == 0) {
      close(fds[1]);
      childExit([&] {
        mkcclUniqueId id;
        size_t got = 0;
        while (got < sizeof(id)) {
          ssize_t k = read(fds[0], reinterpret_cast<char*>(&id) + got, sizeof(id) - got);
          if (k <= 0) return 97;  // the parent made no root
          got += size_t(k);
        }
        return fn(id, r);
      });
    }
    close(fds[0]);
    pids[r] = p;
    toChild[r] = fds[1];
  }
  // The root's thread starts only now, after every fork: a child forked while it held a lock
  // (the allocator's, a logger's) would inherit the lock held and could hang at its first use.
  const mkcclUniqueId id = makeRoot();
  for (int r = 0; r < n; r++)
    if (toChild[r] >= 0) {
      (void)!write(toChild[r], &id, sizeof(id));
      close(toChild[r]);
    }
  return reapChildren(pids, timeoutMs);
}

namespace {

#define EXPECT_OR_COUNT(cond, ...)                                                      \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "rank %d (seed %llu): ", b.rank(), (unsigned long long)seed);     \
      fprintf(stderr, __VA_ARGS__);                                                     \
      fprintf(stderr, "\n");                                                            \
      bad++;                                                                            \
    }                                                                                   \
  } while (0)

// Distinct streams per purpose so every buffer is different.
uint64_t stream(int kind, int a, int b, int c = 0) {
  return ((uint64_t)kind << 48) ^ ((uint64_t)(a & 0xffff) << 32) ^ ((uint64_t)(b & 0xffff) << 16) ^ (uint64_t)c;
}

int checkedCall(Bootstrap& b, uint64_t seed, mkcclResult_t r, const char* what) {
  if (r == mkcclSuccess) return 0;
  fprintf(stderr, "rank %d (seed %llu): %s failed: %s: %s\n", b.rank(), (unsigned long long)seed, what,
          resultName(r), lastError());
  return 1;
}

}  // namespace

int exerciseBootstrap(Bootstrap& b, uint64_t seed, bool big) {
  const int n = b.nranks(), me = b.rank();
  int bad = 0;

  // Every rank agrees on the token.
  std::vector<uint64_t> tokens(n, 0);
  tokens[me] = b.token();
  if (checkedCall(b, seed, b.allGather(tokens.data(), sizeof(uint64_t)), "allGather(token)")) return 1;
  for (int r = 0; r < n; r++) EXPECT_OR_COUNT(tokens[r] == b.token(), "rank %d has another token", r);

  // allGather: odd sizes, each block from its rank's stream, the rest poisoned beforehand.
  std::vector<size_t> sizes = {1, 37, 4096 + 3};
  if (big) sizes.push_back((1 << 20) + 5);
  for (size_t si = 0; si < sizes.size(); si++) {
    size_t bytes = sizes[si];
    std::vector<char> buf(bytes * n, (char)0xA5);
    std::vector<char> mine = randomBytes(seed, stream(1, me, (int)si), bytes);
    memcpy(&buf[bytes * me], mine.data(), bytes);
    if (checkedCall(b, seed, b.allGather(buf.data(), bytes), "allGather")) return bad + 1;
    for (int r = 0; r < n; r++) {
      std::vector<char> want = randomBytes(seed, stream(1, r, (int)si), bytes);
      EXPECT_OR_COUNT(memcmp(&buf[bytes * r], want.data(), bytes) == 0, "allGather of %zu bytes: block %d wrong",
                      bytes, r);
    }
  }

  // broadcast from several roots.
  std::vector<int> roots = {0, n - 1, n / 2};
  for (size_t ri = 0; ri < roots.size(); ri++) {
    for (size_t bytes : {(size_t)13, big ? (size_t)(256 << 10) + 1 : (size_t)999}) {
      int root = roots[ri];
      std::vector<char> want = randomBytes(seed, stream(2, root, (int)ri, (int)bytes), bytes);
      std::vector<char> buf = me == root ? want : std::vector<char>(bytes, (char)0x5A);
      if (checkedCall(b, seed, b.broadcast(buf.data(), bytes, root), "broadcast")) return bad + 1;
      EXPECT_OR_COUNT(buf == want, "broadcast of %zu bytes from root %d: wrong data", bytes, root);
    }
  }

  for (int i = 0; i < 3; i++)
    if (checkedCall(b, seed, b.barrier(), "barrier")) return bad + 1;

  // send/recv to every rank (itself included): two messages per pair, FIFO, random sizes (0 too).
  // Some pairs send empty messages (sizes are a function of the pair, so both sides know them).
  auto msgSize = [&](int from, int to) {
    return (from + 2 * to) % 5 == 0 ? (size_t)0 : (size_t)(rand64(seed, stream(3, from, to)) % 5000);
  };
  for (int k = 0; k < 2; k++)
    for (int d = 0; d < n; d++) {
      int to = (me + d) % n;
      size_t bytes = k == 0 ? msgSize(me, to) : 17;
      std::vector<char> m = randomBytes(seed, stream(4, me, to, k), bytes);
      if (checkedCall(b, seed, b.send(to, 1000 + k, m.data(), bytes), "send")) return bad + 1;
    }
  for (int k = 0; k < 2; k++)
    for (int d = 0; d < n; d++) {
      int from = (me - d + n) % n;
      size_t bytes = k == 0 ? msgSize(from, me) : 17;
      std::vector<char> got(bytes, (char)0x11);
      if (checkedCall(b, seed, b.recv(from, 1000 + k, got.data(), bytes), "recv")) return bad + 1;
      EXPECT_OR_COUNT(got == randomBytes(seed, stream(4, from, me, k), bytes), "recv #%d from rank %d: wrong data",
                      k, from);
    }

  // A large message around the ring: even ranks send first, odd ones receive first, so it completes
  // even when the kernel cannot buffer it.
  if (big && n > 1) {
    size_t bytes = (2 << 20) + 7;
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    std::vector<char> out = randomBytes(seed, stream(5, me, 0), bytes), in(bytes, 0);
    for (int phase = 0; phase < 2; phase++) {
      bool sendNow = (me % 2 == 0) == (phase == 0);
      mkcclResult_t r = sendNow ? b.send(next, 7, out.data(), bytes) : b.recv(prev, 7, in.data(), bytes);
      if (checkedCall(b, seed, r, "large send/recv")) return bad + 1;
    }
    EXPECT_OR_COUNT(in == randomBytes(seed, stream(5, prev, 0), bytes), "large recv from rank %d: wrong data", prev);
  }
  return bad;
}

int rendezvousAndExercise(const mkcclUniqueId& id, int rank, int n, uint64_t seed, int timeoutMs, bool big) {
  std::unique_ptr<Bootstrap> b;
  mkcclResult_t r = Bootstrap::create(id, rank, n, timeoutMs, &b);
  if (r != mkcclSuccess) {
    fprintf(stderr, "rank %d/%d: Bootstrap::create failed: %s: %s\n", rank, n, resultName(r), lastError());
    return 100 + r;
  }
  if (b->rank() != rank || b->nranks() != n) {
    fprintf(stderr, "rank %d/%d: the bootstrap says rank %d of %d\n", rank, n, b->rank(), b->nranks());
    return 99;
  }
  return std::min(exerciseBootstrap(*b, seed, big), 98);
}

mkcclUniqueId idWithoutRoot() {
  SocketAddress a;
  memset(&a, 0, sizeof(a));
  a.sin.sin_family = AF_INET;
  a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin.sin_port = htons((uint16_t)freeLoopbackPort());
  mkcclUniqueId id;
  idEncode(a, randomU64(), randomKey(), 0, &id);
  return id;
}

int freeLoopbackPort() {
  // Below the kernel's ephemeral range: a port the kernel hands out to bind(0) could be handed to
  // another test's listener (running beside this one under ctest -j) before this test binds it,
  // and the ranks would then wait on a stranger. Random, then checked free; the ephemeral range
  // is read so that a host with a lowered one is honoured.
  int lo = 32768;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int a = 0, b = 0;
    if (fscanf(f, "%d %d", &a, &b) == 2 && a > 2048) lo = a;
    fclose(f);
  }
  static std::mt19937_64 rng(std::random_device{}() ^ (uint64_t)getpid());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = 1024 + int(rng() % uint64_t(lo - 1024));
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    const bool ok = bind(s, (sockaddr*)&a, sizeof(a)) == 0;
    close(s);
    if (ok) return port;
  }
  return 0;
}

static int countDir(const char* path) {
  DIR* d = opendir(path);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - (strcmp(path, "/proc/self/fd") == 0 ? 1 : 0);  // the DIR's own fd
}

int countOpenFds() { return countDir("/proc/self/fd"); }
int countThreads() { return countDir("/proc/self/task"); }

bool waitQuiet(int threads, int timeoutMs) {
  auto t0 = std::chrono::steady_clock::now();
  while (bootstrapRootsActive() > 0 || countThreads() > threads) {
    if (secondsSince(t0) * 1000 > timeoutMs) return false;
    usleep(5000);
  }
  return true;
}

const char* resultName(int r) {
  static const char* names[] = {"mkcclSuccess",        "mkcclUnhandledCudaError", "mkcclSystemError",
                                "mkcclInternalError",  "mkcclInvalidArgument",    "mkcclInvalidUsage",
                                "mkcclRemoteError",    "mkcclInProgress",         "mkcclTimeout"};
  return r >= 0 && r < 9 ? names[r] : "?";
}

}  // namespace test
}  // namespace mkccl
