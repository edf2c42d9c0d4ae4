// The machines of machines.h written as hwloc XML, loaded by hwloc, and mapped: exact results.
#include <gtest/gtest.h>
#include "machines.h"
#include "base/log.h"
#include "tmp_dir.h"
#include "topo/discover.h"
#include "topo/mapping.h"
#include "topo/pci_id.h"
#include "topo_desc.h"

namespace mkccl {
namespace test {
namespace {

#define REQUIRE_HWLOC() \
  if (!topoHaveHwloc()) GTEST_SKIP() << "built without hwloc: XML topologies cannot be read"

void loadAndCheck(const Scenario& s, TopoMachine* m, std::vector<TopoMapping>* maps) {
  std::string path = writeScratch(s.name + ".xml", s.xml.str());
  ASSERT_EQ(mkcclSuccess, topoDiscover(path.c_str(), m)) << lastError();
  EXPECT_EQ("hwloc XML " + path, m->source);

  ASSERT_EQ(s.gpus.size(), m->gpus.size()) << "GPUs found in " << path;
  ASSERT_EQ(s.nics.size(), m->nics.size()) << "NICs found in " << path;
  for (size_t i = 0; i < s.nics.size(); i++) {
    SCOPED_TRACE("NIC " + s.nics[i].name);
    const TopoNic& n = m->nics[i].nic;
    EXPECT_EQ(s.nics[i].name, n.name);
    EXPECT_EQ(s.nics[i].pci, n.pci);
    EXPECT_EQ(s.nics[i].numa, n.numa);
    EXPECT_EQ(s.nics[i].type, n.type);
    EXPECT_EQ(s.nics[i].state, n.state);
  }
  ASSERT_EQ(mkcclSuccess, topoMapAll(*m, {}, maps)) << lastError();
  ASSERT_EQ(s.gpus.size(), maps->size());
  for (size_t i = 0; i < s.gpus.size(); i++) {
    SCOPED_TRACE("GPU " + s.gpus[i].pci);
    const TopoMapping& t = (*maps)[i];
    EXPECT_EQ(s.gpus[i].pci, m->gpus[i].pci);
    EXPECT_EQ(s.gpus[i].pci, t.gpuPci);
    EXPECT_EQ(s.gpus[i].numa, t.numa);
    EXPECT_EQ(s.gpus[i].nics, nicNames(t));
    EXPECT_EQ(s.gpus[i].cpus, cpuListString(t.proxyCpus));
    EXPECT_EQ(s.gpus[i].closeness, t.closeness);
  }
}

TEST(TopoXml, DgxClass) {
  REQUIRE_HWLOC();
  TopoMachine m;
  std::vector<TopoMapping> maps;
  loadAndCheck(dgxNode(), &m, &maps);
  // The storage NICs on the root complexes: the Ethernet ones are no RDMA NIC at all, the RoCE
  // ones exist but serve no GPU.
  for (const TopoNicDesc& d : m.nics) EXPECT_NE(0u, d.nic.name.find("eno")) << d.nic.name;
  for (const TopoMapping& t : maps)
    for (const TopoNic& n : t.nics) EXPECT_TRUE(n.name != "mlx5_8" && n.name != "mlx5_9") << t.gpuPci;
  // Port and link rate come through.
  EXPECT_EQ(1, maps[0].nics[0].port);
  EXPECT_EQ(1, maps[0].nics[0].nports);
  EXPECT_DOUBLE_EQ(400.0, maps[0].nics[0].gbps);
  ASSERT_EQ(2u, m.numas.size());
  EXPECT_EQ("0-7,16-23", cpuListString(m.numas[0].cpus));
  EXPECT_EQ(1, m.numas[1].socket);
  // Each GPU sits two switch levels below its host bridge: root port, upstream, downstream port.
  EXPECT_EQ(4u, m.gpus[0].place.pciPath.size());
}

TEST(TopoXml, P5Class) {
  REQUIRE_HWLOC();
  TopoMachine m;
  std::vector<TopoMapping> maps;
  loadAndCheck(p5Node(), &m, &maps);
  for (const TopoMapping& t : maps) EXPECT_EQ(2u, t.nics.size()) << t.gpuPci;
}

TEST(TopoXml, NicsOnlyOnRootComplexes) {
  REQUIRE_HWLOC();
  TopoMachine m;
  std::vector<TopoMapping> maps;
  loadAndCheck(rootComplexNicNode(), &m, &maps);
}

TEST(TopoXml, NoNic) {
  REQUIRE_HWLOC();
  TopoMachine m;
  std::vector<TopoMapping> maps;
  loadAndCheck(noNicNode(), &m, &maps);
  EXPECT_EQ(0, m.gpus[0].place.socket);  // attached to the machine, which has one package
}

TEST(TopoXml, OverrideOnDgx) {
  REQUIRE_HWLOC();
  Scenario s = dgxNode();
  TopoMachine m;
  ASSERT_EQ(mkcclSuccess, topoDiscover(writeScratch("dgx-o.xml", s.xml.str()).c_str(), &m)) << lastError();
  std::vector<NetDeviceChoice> c;
  ASSERT_EQ(mkcclSuccess, parseNetDevices("mlx5_9", &c));
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, c, &maps)) << lastError();
  for (size_t i = 0; i < maps.size(); i++) {
    EXPECT_EQ((Names{"mlx5_9"}), nicNames(maps[i]));
    EXPECT_EQ(i < 4 ? "system (MKCCL_NET_DEVICES)" : "numa (MKCCL_NET_DEVICES)", maps[i].closeness);
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
