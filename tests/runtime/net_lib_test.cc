// The network libraries are loaded when a communicator needs them, and leave the process's signal
// handlers alone (transport/net_lib.h): after libfabric is loaded and its providers initialised, a
// crash is still a crash by signal, and no backtrace file is left behind.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string>
#include "transport/net.h"
#include "transport/net_lib.h"

namespace {

bool mapped(const char* lib) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[1024];
  bool found = false;
  while (fgets(line, sizeof(line), f)) found |= strstr(line, lib) != nullptr;
  fclose(f);
  return found;
}

int btrFiles() {
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

const int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM};

TEST(NetLib, LibibverbsIsLoadedLate) {
  if (!MKCCL_HAVE_IBVERBS) GTEST_SKIP() << "built without libibverbs";
  // (libfabric's verbs provider loads it too: this test runs before libfabric's.)
  if (!mapped("libfabric"))
    EXPECT_FALSE(mapped("libibverbs")) << "libibverbs was loaded before any communicator needed it";
  std::string why = mkccl::net::ibUnavailableReason();  // loads it, lists the devices
  if (!mapped("libibverbs")) GTEST_SKIP() << "libibverbs is not installed here: " << why;
  for (int s : kSignals) {
    struct sigaction a;
    sigaction(s, nullptr, &a);
    EXPECT_EQ(SIG_DFL, a.sa_handler) << "signal " << s << " got a handler from libibverbs";
  }
  printf("ib here: %s\n", why.empty() ? "an RDMA device is usable" : why.c_str());
}

TEST(NetLib, LibfabricIsLoadedLateAndLeavesTheHandlersAlone) {
  if (!MKCCL_HAVE_LIBFABRIC) GTEST_SKIP() << "built without libfabric";
  EXPECT_FALSE(mapped("libfabric")) << "libfabric was loaded before any communicator needed it";
  for (int s : kSignals) {
    struct sigaction a;
    sigaction(s, nullptr, &a);
    ASSERT_EQ(SIG_DFL, a.sa_handler) << "signal " << s << " has a handler before the test";
  }
  std::string why = mkccl::net::fabricUnavailableReason("tcp");  // loads libfabric, initialises providers
  if (!mapped("libfabric")) GTEST_SKIP() << "libfabric is not installed here: " << why;
  for (int s : kSignals) {
    struct sigaction a;
    sigaction(s, nullptr, &a);
    EXPECT_EQ(SIG_DFL, a.sa_handler) << "signal " << s << " (" << strsignal(s) << ") got a handler from libfabric";
  }
  // A crash after that is a crash by SIGSEGV, and leaves no file.
  const int btr0 = btrFiles();
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child == 0) {
    raise(SIGSEGV);
    _exit(3);
  }
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) << "status " << st;
  EXPECT_EQ(btr0, btrFiles()) << "a backtrace file was left in the working directory";
}

TEST(NetLib, AHandlerOfTheProgramIsKept) {
  struct sigaction mine, got;
  memset(&mine, 0, sizeof(mine));
  mine.sa_handler = [](int) {};
  sigaction(SIGUSR1, &mine, nullptr);
  {
    mkccl::net::SignalHandlersKept keep("a test");
    signal(SIGUSR1, SIG_IGN);  // what a provider might do
    signal(SIGSEGV, [](int) {});
  }
  sigaction(SIGUSR1, nullptr, &got);
  EXPECT_EQ(mine.sa_handler, got.sa_handler);
  sigaction(SIGSEGV, nullptr, &got);
  EXPECT_EQ(SIG_DFL, got.sa_handler);
  signal(SIGUSR1, SIG_DFL);
}

}  // namespace
