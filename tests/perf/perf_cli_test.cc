// mkccl-perf without a GPU: bad arguments give a clear message and exit status 2 before any CUDA
// work; --help works; the JSON writer's output parses and has the fields the issue names.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <string>
#include "json.h"

namespace {

struct Proc {
  int status = -1;
  std::string out;
};

// Runs a shell command line, stdout and stderr together.
Proc sh(const std::string& cmd) {
  Proc r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

Proc perf(const std::string& args) { return sh(std::string("'") + MKCCL_PERF_BIN + "' " + args); }

bool hasPython() { return sh("python3 -c 'import json'").status == 0; }

TEST(PerfCli, Help) {
  for (const char* a : {"--help", "-h", "allreduce --help"}) {
    const Proc r = perf(a);
    EXPECT_EQ(0, r.status) << a << "\n" << r.out;
    EXPECT_NE(std::string::npos, r.out.find("usage: mkccl-perf")) << r.out;
    for (const char* op : {"allgather", "reducescatter", "allreduce", "alltoall"})
      EXPECT_NE(std::string::npos, r.out.find(op)) << "op " << op << " missing from --help";
    EXPECT_NE(std::string::npos, r.out.find("--iters")) << "the -n/--iters rule must be documented";
    EXPECT_NE(std::string::npos, r.out.find("--rounds")) << "the alternating timing must be documented";
  }
}

TEST(PerfCli, List) {
  const Proc r = perf("--list");
  EXPECT_EQ(0, r.status) << r.out;
  for (const char* op : {"allgather\n", "reducescatter\n", "allreduce\n", "alltoall\n"})
    EXPECT_NE(std::string::npos, r.out.find(op)) << op << " missing from --list:\n" << r.out;
}

TEST(PerfCli, BadArgumentsExit2WithMessage) {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"", "no op given"},
      {"nosuchop", "unknown op 'nosuchop'"},
      {"allreduce -b", "needs a value"},
      {"allreduce -b abc", "expected a size"},
      {"allreduce -b 0", "expected a size"},
      {"allreduce -b 1X", "expected a size"},
      {"allreduce -b 1M -e 4K", "smaller than -b"},
      {"allreduce -f 1", "expected a number > 1"},
      {"allreduce -f -3", "expected a number > 1"},
      {"allreduce -n 0", "iteration count"},
      {"allreduce --iters x", "iteration count"},
      {"allreduce -w -1", "expected a count"},
      {"allreduce -d float7", "unknown data type"},
      {"allreduce -o mean", "unknown reduction"},
      {"allreduce -c 2", "expected 0 or 1"},
      {"allreduce -g 0", "GPU count"},
      {"allreduce --gpus 1000", "GPU count"},
      {"allreduce --frobnicate", "unknown option '--frobnicate'"},
      {"allreduce -m 128", "-m/-k/--shapes are for shape ops"},
      {"allreduce --shapes 1x2x3", "-m/-k/--shapes are for shape ops"},
      {"allreduce allgather", "unexpected argument 'allgather'"},
      {"allreduce --json", "needs a value"},
      {"allreduce --seed 0", "expected a seed"},
      {"allreduce --no-baseline=1", "takes no value"},
      {"allreduce -G -1", "calls per graph"},
      {"allreduce --cuda-graph x", "calls per graph"},
      {"allreduce -R 2", "expected 0 or 1"},
      {"ag_gemm --rounds 0", "round count"},
      {"ag_gemm --rounds x", "round count"},
  };
  for (const auto& c : cases) {
    const Proc r = perf(c.args);
    EXPECT_EQ(2, r.status) << "mkccl-perf " << c.args << "\n" << r.out;
    EXPECT_NE(std::string::npos, r.out.find(c.says)) << "mkccl-perf " << c.args << ": expected '" << c.says
                                                      << "' in:\n" << r.out;
    EXPECT_NE(std::string::npos, r.out.find("mkccl-perf --help")) << r.out;
  }
}

TEST(PerfCli, GoodArgumentsGetPastParsing) {
  // Without a GPU these fail later (status 1, not 2); with one they would run, so only check
  // parsing where there is no GPU.
  if (sh("nvidia-smi -L").status == 0) GTEST_SKIP() << "a GPU is present: this check is for machines without one";
  const Proc r = perf("allreduce -b 8 -e 64 -f 2 -n 3 -w 1 -d fp32 -o max -c 1 --no-baseline -G 10 -R 1");
  EXPECT_NE(2, r.status) << r.out;
  const Proc s = perf("ag_gemm -m 256 -n 256 -k 256 --iters 8 --rounds 1");
  EXPECT_NE(2, s.status) << s.out;
}

mkccl::perf::JsonDoc sampleDoc() {
  using mkccl::perf::Result;
  mkccl::perf::JsonDoc d;
  d.device = "NVIDIA H200";
  d.date = mkccl::perf::isoDateUtc();
  d.commit = "abc1234";
  Result a;
  a.op = "allreduce";
  a.worldSize = 4;
  a.dtype = "bf16";
  a.redop = "sum";
  a.bytes = 1 << 20;
  a.count = 1 << 19;
  a.timeUs = 21.5;
  a.baseline = "nccl";
  a.baselineTimeUs = 30.25;
  a.busFactor = 1.5;
  a.algbwGbps = 48.8;
  a.busbwGbps = 73.2;
  a.maxRelErr = 0.0039;
  a.wrong = 0;
  a.note = "plan \"two-shot\"\n\tC=16";
  d.results.push_back(a);
  Result g;
  g.op = "ag_gemm";
  g.worldSize = 4;
  g.dtype = "bf16";
  g.hasShape = true;
  g.shape.m = 8192;
  g.shape.n = 8192;
  g.shape.k = 8192;
  g.timeUs = 1500;
  g.baseline = "nccl+cublas";
  g.baselineTimeUs = 1887;
  g.maxRelErr = std::nan("");  // not finite: must become null
  g.wrong = 3;
  g.extra["gemm_alone_us"] = 1421;
  g.extra["floor_ratio"] = 0.75;
  d.results.push_back(g);
  Result n;  // no baseline
  n.op = "alltoall";
  n.worldSize = 2;
  n.dtype = "fp32";
  n.bytes = 4096;
  n.count = 1024;
  n.timeUs = 9;
  d.results.push_back(n);
  return d;
}

TEST(PerfJson, ParsesAndHasTheFields) {
  if (!hasPython()) GTEST_SKIP() << "python3 not available";
  char path[] = "/tmp/mkccl_perf_json_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string err;
  ASSERT_TRUE(mkccl::perf::writeJson(path, sampleDoc(), &err)) << err;
  Proc r = sh(std::string("python3 -m json.tool '") + path + "' > /dev/null");
  EXPECT_EQ(0, r.status) << r.out << "\n" << mkccl::perf::toJson(sampleDoc());
  const std::string check = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("device", "date", "commit", "results"):
    assert k in d, k
assert d["commit"] == "abc1234" and d["device"] == "NVIDIA H200"
need = ["op", "world_size", "dtype", "shape", "time_us", "baseline", "baseline_time_us", "speedup",
        "busbw_gbps", "max_rel_err", "wrong"]
rs = d["results"]
assert len(rs) == 3
for r in rs:
    for k in need:
        assert k in r, (k, r)
a, g, n = rs
assert a["shape"] == {"bytes": 1048576} and a["redop"] == "sum"
assert abs(a["speedup"] - 30.25 / 21.5) < 1e-4 and abs(a["busbw_gbps"] - 73.2) < 1e-6
assert a["note"] == 'plan "two-shot"\n\tC=16'
assert g["shape"] == {"m": 8192, "n": 8192, "k": 8192}
assert g["busbw_gbps"] is None and g["max_rel_err"] is None and g["wrong"] == 3
assert g["gemm_alone_us"] == 1421 and g["floor_ratio"] == 0.75
assert n["baseline"] is None and n["baseline_time_us"] is None and n["speedup"] is None
print("ok")
)PY";
  r = sh("python3 -c '" + [&] {
    std::string q;
    for (char c : check) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q;
  }() + "' '" + path + "'");
  EXPECT_EQ(0, r.status) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("ok")) << r.out;
  unlink(path);
}

TEST(PerfPlot, TurnsJsonIntoPngs) {
  if (sh("python3 -c 'import matplotlib'").status != 0) GTEST_SKIP() << "python3 with matplotlib not available";
  char dir[] = "/tmp/mkccl_perf_plot_XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  const std::string json = std::string(dir) + "/r.json";
  std::string err;
  ASSERT_TRUE(mkccl::perf::writeJson(json, sampleDoc(), &err)) << err;
  const Proc r = sh(std::string("python3 '") + MKCCL_PERF_PLOT + "' '" + json + "' -o '" + dir + "/png'");
  EXPECT_EQ(0, r.status) << r.out;
  EXPECT_EQ(0, sh(std::string("ls '") + dir + "'/png/allreduce_bf16_sum_ws4.png").status) << r.out;
  EXPECT_EQ(0, sh(std::string("ls '") + dir + "'/png/ag_gemm_bf16_ws4.png").status) << r.out;
  sh(std::string("rm -rf '") + dir + "'");
}

}  // namespace
