// mkccl-topo as a user runs it: --json parsed and checked, text output, exit status 2 on errors.
#include <gtest/gtest.h>
#include <set>
#include "json_check.h"
#include "machines.h"
#include "tmp_dir.h"
#include "topo/discover.h"

namespace mkccl {
namespace test {
namespace {

const std::string kTool = MKCCL_TOPO_EXE;

CommandResult topoTool(const std::string& args, const std::string& env = "") {
  // The caller's MKCCL_TOPO_FILE / MKCCL_NET_DEVICES must not leak into the run.
  return runCommand("env -u MKCCL_TOPO_FILE -u MKCCL_NET_DEVICES " + env + " '" + kTool + "' " + args);
}

std::set<std::string> keysOf(const Json& j) { return std::set<std::string>(j.keys.begin(), j.keys.end()); }

void checkJson(const Scenario& s, const std::string& text) {
  Json j;
  std::string err;
  ASSERT_TRUE(JsonReader::parse(text, &j, &err)) << err << "\n" << text;
  ASSERT_EQ(Json::Object, j.kind);
  EXPECT_EQ((std::vector<std::string>{"gpus", "nics"}), j.keys);
  const Json& gpus = j["gpus"];
  const Json& nics = j["nics"];
  ASSERT_EQ(Json::Array, gpus.kind);
  ASSERT_EQ(Json::Array, nics.kind);
  ASSERT_EQ(s.gpus.size(), gpus.arr.size());
  for (size_t i = 0; i < s.gpus.size(); i++) {
    const Json& g = gpus[i];
    SCOPED_TRACE("gpus[" + std::to_string(i) + "]");
    EXPECT_EQ((std::set<std::string>{"pci", "numa", "nics", "cpus"}), keysOf(g));
    EXPECT_EQ(s.gpus[i].pci, g["pci"].str);
    ASSERT_EQ(Json::Number, g["numa"].kind);
    EXPECT_EQ(s.gpus[i].numa, (int)g["numa"].num);
    ASSERT_EQ(Json::Array, g["nics"].kind);
    std::vector<std::string> names;
    for (const Json& n : g["nics"].arr) {
      EXPECT_EQ(Json::String, n.kind);
      names.push_back(n.str);
    }
    EXPECT_EQ(s.gpus[i].nics, names);
    ASSERT_EQ(Json::String, g["cpus"].kind);
    EXPECT_EQ(s.gpus[i].cpus, g["cpus"].str);
  }
  ASSERT_EQ(s.nics.size(), nics.arr.size());
  for (size_t i = 0; i < s.nics.size(); i++) {
    const Json& n = nics[i];
    SCOPED_TRACE("nics[" + std::to_string(i) + "]");
    EXPECT_EQ((std::set<std::string>{"name", "pci", "numa", "type", "state"}), keysOf(n));
    EXPECT_EQ(s.nics[i].name, n["name"].str);
    EXPECT_EQ(s.nics[i].pci, n["pci"].str);
    EXPECT_EQ(s.nics[i].numa, (int)n["numa"].num);
    EXPECT_EQ(s.nics[i].type, n["type"].str);
    EXPECT_EQ(s.nics[i].state, n["state"].str);
  }
}

TEST(MkcclTopo, JsonForEachMachine) {
  if (!topoHaveHwloc()) GTEST_SKIP() << "built without hwloc";
  for (const Scenario& s : {dgxNode(), p5Node(), rootComplexNicNode(), noNicNode()}) {
    SCOPED_TRACE(s.name);
    std::string f = writeScratch("tool-" + s.name + ".xml", s.xml.str());
    CommandResult r = topoTool("--xml " + f + " --json");
    ASSERT_EQ(0, r.status) << r.err;
    checkJson(s, r.out);
    // The same file through MKCCL_TOPO_FILE, as the runtime reads it.
    CommandResult e = topoTool("--json", "MKCCL_TOPO_FILE=" + f);
    ASSERT_EQ(0, e.status) << e.err;
    EXPECT_EQ(r.out, e.out);
  }
}

TEST(MkcclTopo, Text) {
  if (!topoHaveHwloc()) GTEST_SKIP() << "built without hwloc";
  std::string f = writeScratch("tool-text.xml", dgxNode().xml.str());
  CommandResult r = topoTool("--xml=" + f);
  ASSERT_EQ(0, r.status) << r.err;
  for (const char* want : {"GPUs: 8", "RDMA NICs: 10", "0000:b4:00.0  numa 1  -> mlx5_7:1 [switch]  cpus 8-15,24-31",
                           "mlx5_8  0000:81:00.0  numa 1  ib  active", "400 Gb/s"})
    EXPECT_NE(std::string::npos, r.out.find(want)) << want << "\n" << r.out;
  std::string n = writeScratch("tool-nonic.xml", noNicNode().xml.str());
  r = topoTool("--xml " + n);
  ASSERT_EQ(0, r.status) << r.err;
  EXPECT_NE(std::string::npos, r.out.find("no RDMA NIC")) << r.out;
}

TEST(MkcclTopo, NetDevicesOverride) {
  if (!topoHaveHwloc()) GTEST_SKIP() << "built without hwloc";
  std::string f = writeScratch("tool-override.xml", dgxNode().xml.str());
  CommandResult r = topoTool("--xml " + f + " --json", "MKCCL_NET_DEVICES=mlx5_8");
  ASSERT_EQ(0, r.status) << r.err;
  Json j;
  std::string err;
  ASSERT_TRUE(JsonReader::parse(r.out, &j, &err)) << err;
  for (const Json& g : j["gpus"].arr) {
    ASSERT_EQ(1u, g["nics"].arr.size());
    EXPECT_EQ("mlx5_8", g["nics"][0].str);
  }
  r = topoTool("--xml " + f + " --json", "MKCCL_NET_DEVICES=mlx5_77");
  EXPECT_EQ(2, r.status);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(std::string::npos, r.err.find("mlx5_77")) << r.err;
  r = topoTool("--xml " + f, "MKCCL_NET_DEVICES=mlx5_0:x");
  EXPECT_EQ(2, r.status);
  EXPECT_NE(std::string::npos, r.err.find("MKCCL_NET_DEVICES")) << r.err;
}

TEST(MkcclTopo, ErrorsExitWith2) {
  std::string dgx = dgxNode().xml.str();
  const std::string missing = scratchDir() + "/tool-missing.xml";
  const std::string cases[] = {
      "--xml " + missing,
      "--xml " + writeScratch("tool-empty.xml", ""),
      "--xml " + writeScratch("tool-text.txt", "hello\n"),
      "--xml " + writeScratch("tool-trunc.xml", dgx.substr(0, dgx.size() / 2)) + " --json",
      "--bogus",
      "--xml",
  };
  for (const std::string& args : cases) {
    CommandResult r = topoTool(args);
    EXPECT_EQ(2, r.status) << args;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
    EXPECT_NE(std::string::npos, r.err.find("mkccl-topo")) << args << ": " << r.err;
  }
  CommandResult r = topoTool("--xml " + missing);
  EXPECT_NE(std::string::npos, r.err.find(missing)) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("No such file")) << r.err;
}

TEST(MkcclTopo, LiveMachine) {
  // This machine, whatever it is: a GPU-less CI runner works too.
  CommandResult r = topoTool("--json");
  ASSERT_EQ(0, r.status) << r.err;
  Json j;
  std::string err;
  ASSERT_TRUE(JsonReader::parse(r.out, &j, &err)) << err << "\n" << r.out;
  EXPECT_EQ(Json::Array, j["gpus"].kind);
  EXPECT_EQ(Json::Array, j["nics"].kind);
  r = topoTool("");
  ASSERT_EQ(0, r.status) << r.err;
  EXPECT_NE(std::string::npos, r.out.find("Topology from")) << r.out;
  if (!topoHaveHwloc()) {
    EXPECT_NE(std::string::npos, r.out.find("without hwloc")) << r.out;
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
