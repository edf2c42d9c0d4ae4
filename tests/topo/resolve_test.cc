// topoResolve: what topoInitComm decides for one rank, from MKCCL_TOPO_FILE-style input.
#include <gtest/gtest.h>
#include "machines.h"
#include "base/log.h"
#include "tmp_dir.h"
#include "topo/discover.h"
#include "topo/pci_id.h"
#include "topo/resolve.h"
#include "topo_desc.h"

namespace mkccl {
namespace test {
namespace {

#define REQUIRE_HWLOC() \
  if (!topoHaveHwloc()) GTEST_SKIP() << "built without hwloc: XML topologies cannot be read"

std::string dgxFile() {
  static std::string path = writeScratch("resolve-dgx.xml", dgxNode().xml.str());
  return path;
}

TEST(TopoResolve, FindsTheGpuByCudaBusId) {
  REQUIRE_HWLOC();
  Scenario s = dgxNode();
  for (const ExpectedGpu& g : s.gpus) {
    // CUDA writes hex digits in upper case; NVML uses an 8-digit domain.
    std::string cuda = g.pci;
    for (char& c : cuda) c = toupper(c);
    for (const std::string& id : {cuda, "0000" + g.pci}) {
      TopoResolved r;
      ASSERT_EQ(mkcclSuccess, topoResolve(id, dgxFile().c_str(), nullptr, &r)) << lastError();
      EXPECT_TRUE(r.gpuFound) << id;
      EXPECT_EQ(g.pci, r.mapping.gpuPci);
      EXPECT_EQ(g.nics, nicNames(r.mapping)) << id;
      EXPECT_EQ(g.cpus, cpuListString(r.mapping.proxyCpus));
      EXPECT_EQ(g.numa, r.mapping.numa);
      EXPECT_EQ("hwloc XML " + dgxFile(), r.source);
    }
  }
}

TEST(TopoResolve, GpuNotInTopology) {
  REQUIRE_HWLOC();
  for (const std::string& id : {std::string("0000:ee:00.0"), std::string(""), std::string("garbage")}) {
    TopoResolved r;
    ASSERT_EQ(mkcclSuccess, topoResolve(id, dgxFile().c_str(), nullptr, &r)) << lastError();
    EXPECT_FALSE(r.gpuFound);
    EXPECT_EQ(-1, r.mapping.numa);
    // Place unknown: one NIC from anywhere, never a failure.
    EXPECT_EQ(1u, r.mapping.nics.size()) << id;
    EXPECT_EQ("system", r.mapping.closeness);
  }
}

TEST(TopoResolve, NoNicIsNotAnError) {
  REQUIRE_HWLOC();
  std::string f = writeScratch("resolve-nonic.xml", noNicNode().xml.str());
  TopoResolved r;
  ASSERT_EQ(mkcclSuccess, topoResolve("0000:00:06.0", f.c_str(), "", &r)) << lastError();
  EXPECT_TRUE(r.gpuFound);
  EXPECT_TRUE(r.mapping.nics.empty());
  EXPECT_EQ("0-15", cpuListString(r.mapping.proxyCpus));
  EXPECT_EQ(0, r.mapping.numa);
}

TEST(TopoResolve, SkippedNicsAreReported) {
  REQUIRE_HWLOC();
  std::string f = writeScratch("resolve-root.xml", rootComplexNicNode().xml.str());
  TopoResolved r;
  ASSERT_EQ(mkcclSuccess, topoResolve("0000:93:00.0", f.c_str(), nullptr, &r)) << lastError();
  EXPECT_EQ((Names{"mlx5_2"}), nicNames(r.mapping));
  ASSERT_EQ(1u, r.skipped.size());
  EXPECT_NE(std::string::npos, r.skipped[0].find("mlx5_3")) << r.skipped[0];
  // Named explicitly, the down NIC is used (the user knows better than a stale port state).
  ASSERT_EQ(mkcclSuccess, topoResolve("0000:93:00.0", f.c_str(), "mlx5_3:1", &r)) << lastError();
  EXPECT_EQ((Names{"mlx5_3"}), nicNames(r.mapping));
  EXPECT_EQ("down", r.mapping.nics[0].state);
}

TEST(TopoResolve, UserErrors) {
  // Bad MKCCL_NET_DEVICES: caught before the topology is even read.
  TopoResolved r;
  EXPECT_EQ(mkcclInvalidUsage, topoResolve("0000:13:00.0", nullptr, "mlx5_0:zero", &r));
  EXPECT_NE(std::string::npos, std::string(lastError()).find("MKCCL_NET_DEVICES")) << lastError();
  // A missing MKCCL_TOPO_FILE.
  std::string missing = scratchDir() + "/missing-topology.xml";
  EXPECT_EQ(mkcclInvalidUsage, topoResolve("0000:13:00.0", missing.c_str(), nullptr, &r));
  EXPECT_NE(std::string::npos, std::string(lastError()).find(missing)) << lastError();
  if (!topoHaveHwloc()) return;
  // A NIC name the machine doesn't have.
  EXPECT_EQ(mkcclInvalidUsage, topoResolve("0000:13:00.0", dgxFile().c_str(), "mlx5_42", &r));
  EXPECT_NE(std::string::npos, std::string(lastError()).find("mlx5_42")) << lastError();
}

TEST(TopoResolve, LiveSystemNeverFails) {
  // Whatever this machine is (CI: no GPU, no NIC), live discovery gives a mapping, not an error.
  TopoResolved r;
  ASSERT_EQ(mkcclSuccess, topoResolve("0000:01:00.0", nullptr, nullptr, &r)) << lastError();
  EXPECT_FALSE(r.source.empty());
  if (!topoHaveHwloc()) {
    EXPECT_NE(std::string::npos, r.note.find("without hwloc")) << r.note;
    EXPECT_TRUE(r.mapping.nics.empty());
    EXPECT_TRUE(r.mapping.proxyCpus.empty());
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
