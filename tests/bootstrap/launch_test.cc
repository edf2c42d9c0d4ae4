// The launcher: spawnLocal and its hub (through launch_child), the world alone, mkccl-run's
// arguments and exit codes, and the GPU count.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include <vector>
#include "launch/launch.h"

extern char** environ;

namespace mkccl {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct CmdResult {
  int status = -1;  // exit status, 128+signal
  std::string out, err;
  double seconds = 0;
};

// Runs argv with extra environment entries, capturing stdout and stderr; killed after timeoutSec.
CmdResult runCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnv = {},
               int timeoutSec = 60) {
  CmdResult res;
  int outPipe[2], errPipe[2];
  EXPECT_EQ(0, pipe2(outPipe, O_CLOEXEC));
  EXPECT_EQ(0, pipe2(errPipe, O_CLOEXEC));
  std::vector<std::string> env;
  for (char** e = environ; *e; e++)
    if (strncmp(*e, "MKCCL_LAUNCH_", 13)) env.push_back(*e);
  for (const auto& e : extraEnv) env.push_back(e);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(&e[0]);
  cenv.push_back(nullptr);
  auto t0 = Clock::now();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(outPipe[1], 1);
    dup2(errPipe[1], 2);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(outPipe[1]);
  close(errPipe[1]);
  pollfd p[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  int open = 2;
  while (open > 0) {
    int left = (int)(timeoutSec * 1000 - secondsSince(t0) * 1000);
    if (left <= 0 || poll(p, 2, left) == 0) {
      kill(pid, SIGKILL);
      ADD_FAILURE() << argv[0] << " ran past " << timeoutSec << " s";
      break;
    }
    for (int i = 0; i < 2; i++) {
      if (!p[i].revents) continue;
      char buf[4096];
      ssize_t n = read(p[i].fd, buf, sizeof(buf));
      if (n > 0) {
        (i ? res.err : res.out).append(buf, n);
      } else {
        p[i].fd = -1;
        open--;
      }
    }
  }
  close(outPipe[0]);
  close(errPipe[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  res.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  res.seconds = secondsSince(t0);
  return res;
}

std::string show(const CmdResult& r) { return "status " + std::to_string(r.status) + "\nstdout:\n" + r.out + "stderr:\n" + r.err; }

class SpawnCollectives : public ::testing::TestWithParam<int> {};

TEST_P(SpawnCollectives, AllGatherBroadcastBarrier) {
  SpawnOptions opt;
  opt.timeoutSec = 120;
  auto t0 = Clock::now();
  EXPECT_EQ(0, spawnLocal(GetParam(), {LAUNCH_CHILD_PATH, "collectives"}, opt));
  EXPECT_LT(secondsSince(t0), 60.0);
}
INSTANTIATE_TEST_SUITE_P(Launch, SpawnCollectives, ::testing::Values(1, 3, 8));

TEST(Spawn, FailedRankStopsTheOthersAndGivesItsStatus) {
  auto t0 = Clock::now();
  EXPECT_EQ(3, spawnLocal(4, {LAUNCH_CHILD_PATH, "fail", "2", "3"}, SpawnOptions()));
  // The others sleep 60 s unless killed (after a 2 s grace period).
  EXPECT_LT(secondsSince(t0), 15.0);
}

TEST(Spawn, KilledRankGives128PlusSignal) {
  auto t0 = Clock::now();
  EXPECT_EQ(128 + SIGKILL, spawnLocal(3, {LAUNCH_CHILD_PATH, "signal", "1"}, SpawnOptions()));
  EXPECT_LT(secondsSince(t0), 15.0);
}

TEST(Spawn, TimeoutKillsEverythingAndGives124) {
  SpawnOptions opt;
  opt.timeoutSec = 1;
  auto t0 = Clock::now();
  EXPECT_EQ(124, spawnLocal(2, {LAUNCH_CHILD_PATH, "sleep", "30"}, opt));
  EXPECT_GT(secondsSince(t0), 0.9);
  EXPECT_LT(secondsSince(t0), 10.0);
}

TEST(Spawn, MissingProgram) {
  SpawnOptions opt;
  opt.quiet = true;
  EXPECT_EQ(127, spawnLocal(2, {"/nonexistent/program"}, opt));
  EXPECT_EQ(127, spawnLocal(2, {"no-such-program-mkccl"}, opt));
  EXPECT_NE(0, spawnLocal(0, {LAUNCH_CHILD_PATH}, opt));
  EXPECT_NE(0, spawnLocal(1, {}, opt));
}

TEST(Spawn, RankLeavingEarlyFailsTheCollectiveInsteadOfHanging) {
  SpawnOptions opt;
  opt.timeoutSec = 60;
  EXPECT_EQ(0, spawnLocal(3, {LAUNCH_CHILD_PATH, "exit-early"}, opt));
}

TEST(Spawn, DisagreeingRanksGetAnError) {
  SpawnOptions opt;
  opt.timeoutSec = 60;
  EXPECT_EQ(0, spawnLocal(3, {LAUNCH_CHILD_PATH, "mismatch"}, opt));
}

TEST(World, AloneIsRankZeroOfOne) {
  CmdResult r = runCommand({LAUNCH_CHILD_PATH, "single"});
  EXPECT_EQ(0, r.status) << show(r);
  // And in this process (not launched by anything).
  World w;
  std::string err;
  ASSERT_EQ(0, worldInit(&w, &err)) << err;
  EXPECT_EQ("single", w.how);
  EXPECT_EQ(1, w.nranks);
  int in = 12345, out = 0;
  EXPECT_EQ(0, worldAllGather(&in, sizeof(in), &out, &err));
  EXPECT_EQ(in, out);
  EXPECT_NE(0, worldBroadcast(&in, sizeof(in), 1, &err)) << "root 1 of a world of 1";
  worldFinalize();
}

TEST(World, MpirunWithoutMpiSaysWhatToDo) {
  if (MKCCL_TOOLS_HAVE_MPI) GTEST_SKIP() << "the tools are built with MPI (see the launch_mpirun_test)";
  CmdResult r = runCommand({LAUNCH_CHILD_PATH, "mpirun-nompi"}, {"OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0"});
  EXPECT_EQ(0, r.status) << show(r);
}

TEST(World, BrokenLauncherEnvironmentIsAnError) {
  World w;
  std::string err;
  CmdResult r = runCommand({LAUNCH_CHILD_PATH, "single"}, {"MKCCL_LAUNCH_RANK=5", "MKCCL_LAUNCH_NRANKS=2"});
  EXPECT_EQ(1, r.status) << show(r);
  EXPECT_NE(std::string::npos, r.err.find("MKCCL_LAUNCH_")) << show(r);
}

// ---- mkccl-run ----

TEST(MkcclRun, ArgumentErrorsExit2WithUsage) {
  std::vector<std::vector<std::string>> bad = {
      {},
      {"-n"},
      {"-n", "0"},
      {"-n", "abc"},
      {"-n", "-3", "prog"},
      {"-n", "100000", "prog"},
      {"-n", "2"},
      {"-n", "2", "--"},
      {"--bogus", "-n", "2", "prog"},
      {"-n", "2", "--timeout"},
      {"-n", "2", "--timeout", "soon", "prog"},
      {"--skip-if-fewer-gpus", "prog"},
  };
  for (const auto& args : bad) {
    std::vector<std::string> argv = {MKCCL_RUN_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    CmdResult r = runCommand(argv);
    std::string cmd;
    for (const auto& a : args) cmd += " " + a;
    EXPECT_EQ(2, r.status) << "mkccl-run" << cmd << "\n" << show(r);
    EXPECT_NE(std::string::npos, r.err.find("usage: mkccl-run")) << "mkccl-run" << cmd << "\n" << show(r);
  }
  CmdResult help = runCommand({MKCCL_RUN_PATH, "--help"});
  EXPECT_EQ(0, help.status);
  EXPECT_NE(std::string::npos, help.out.find("usage: mkccl-run"));
}

TEST(MkcclRun, SkipsWithTooFewGpus) {
  CmdResult r = runCommand({MKCCL_RUN_PATH, "-n", "1024", "--skip-if-fewer-gpus", LAUNCH_CHILD_PATH, "collectives"});
  EXPECT_EQ(77, r.status) << show(r);
  EXPECT_NE(std::string::npos, r.out.find("mkccl-run: SKIP: 1024 processes need 1024 GPUs, found ")) << show(r);
  if (visibleGpuCount() == 0) {
    CmdResult one = runCommand({MKCCL_RUN_PATH, "-n", "1", "--skip-if-fewer-gpus", "--", LAUNCH_CHILD_PATH, "collectives"});
    EXPECT_EQ(77, one.status) << show(one);
    EXPECT_NE(std::string::npos, one.out.find("found 0")) << show(one);
  }
}

TEST(MkcclRun, RunsAndPropagatesFailures) {
  CmdResult ok = runCommand({MKCCL_RUN_PATH, "-n", "3", LAUNCH_CHILD_PATH, "collectives"});
  EXPECT_EQ(0, ok.status) << show(ok);
  CmdResult ok2 = runCommand({MKCCL_RUN_PATH, "-n2", "--timeout=60", "--", LAUNCH_CHILD_PATH, "collectives"});
  EXPECT_EQ(0, ok2.status) << show(ok2);
  CmdResult bad = runCommand({MKCCL_RUN_PATH, "-n", "2", LAUNCH_CHILD_PATH, "fail", "1", "5"});
  EXPECT_EQ(5, bad.status) << show(bad);
  EXPECT_NE(std::string::npos, bad.err.find("rank 1 exited with status 5")) << show(bad);
  CmdResult sig = runCommand({MKCCL_RUN_PATH, "-n", "2", LAUNCH_CHILD_PATH, "signal", "0"});
  EXPECT_EQ(128 + SIGKILL, sig.status) << show(sig);
  EXPECT_NE(std::string::npos, sig.err.find("rank 0 killed by signal 9")) << show(sig);
  CmdResult slow = runCommand({MKCCL_RUN_PATH, "-n", "2", "--timeout", "1", LAUNCH_CHILD_PATH, "sleep", "30"});
  EXPECT_EQ(124, slow.status) << show(slow);
  CmdResult missing = runCommand({MKCCL_RUN_PATH, "-n", "2", "/nonexistent/program"});
  EXPECT_EQ(127, missing.status) << show(missing);
}

// ---- GPU count ----

TEST(GpuCount, NoContextNoCrash) {
  bool cudaLoadedBefore = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr;
  int n = visibleGpuCount();
  EXPECT_GE(n, 0);
  if (!cudaLoadedBefore)
    EXPECT_EQ(nullptr, dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) << "the driver got loaded into this process";
  if (access("/dev/nvidiactl", F_OK) != 0) EXPECT_EQ(0, n) << "no NVIDIA driver here";
  {
    // CUDA_VISIBLE_DEVICES is honoured (the count comes from a child that inherits it).
    const char* old = getenv("CUDA_VISIBLE_DEVICES");
    std::string saved = old ? old : "";
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    EXPECT_EQ(0, visibleGpuCount());
    if (old)
      setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
    else
      unsetenv("CUDA_VISIBLE_DEVICES");
  }
  EXPECT_EQ(n, visibleGpuCount()) << "stable";
}

}  // namespace
}  // namespace launch
}  // namespace mkccl
