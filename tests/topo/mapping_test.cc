// The mapping rules on hand-built machine descriptions (no hwloc).
#include <gtest/gtest.h>
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include "base/log.h"
#include "topo/mapping.h"
#include "topo/pci_id.h"
#include "topo_desc.h"

namespace mkccl {
namespace test {
namespace {

// One switch under host bridge hb: GPUs and NICs on its downstream ports.
std::vector<std::string> sw(const std::string& hb, const std::string& s, const std::string& port) {
  return {hb, hb + "/rp", s, port};
}

TEST(TopoCloseness, Levels) {
  TopoPlace g = place(0, 0, sw("hbA", "swA", "p0"));
  EXPECT_EQ(TopoLevel::Switch, topoCloseness(g, place(0, 0, sw("hbA", "swA", "p1"))).level);
  EXPECT_EQ(TopoLevel::HostBridge, topoCloseness(g, place(0, 0, {"hbA", "hbA/rp2"})).level);
  EXPECT_EQ(TopoLevel::Numa, topoCloseness(g, place(0, 0, {"hbB", "hbB/rp"})).level);
  EXPECT_EQ(TopoLevel::Socket, topoCloseness(g, place(1, 0, {"hbC"})).level);
  EXPECT_EQ(TopoLevel::System, topoCloseness(g, place(2, 1, {"hbD"})).level);
  EXPECT_EQ(TopoLevel::System, topoCloseness(place(-1, -1, {}), place(-1, -1, {})).level);
  // Unknown NUMA on one side is never "the same NUMA node".
  EXPECT_EQ(TopoLevel::System, topoCloseness(place(-1, -1, {"x"}), place(-1, -1, {"y"})).level);
  // Inside a switch, a longer shared path is closer.
  TopoCloseness nearer = topoCloseness(g, place(0, 0, {"hbA", "hbA/rp", "swA", "p0"}));
  TopoCloseness farther = topoCloseness(g, place(0, 0, sw("hbA", "swA", "p9")));
  EXPECT_TRUE(nearer.closerThan(farther));
  EXPECT_FALSE(farther.closerThan(nearer));
  EXPECT_TRUE(farther.closerThan(topoCloseness(g, place(0, 0, {"hbA", "hbA/rp2"}))));
}

// k GPUs and n NICs on one switch: who gets what.
std::vector<Names> shareOnSwitch(int k, int n) {
  TopoMachine m;
  char pci[32];
  for (int i = 0; i < k; i++) {
    snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + i);
    m.gpus.push_back(gpuAt(pci, place(0, 0, sw("hb", "sw", "g" + std::to_string(i)))));
  }
  for (int j = 0; j < n; j++) {
    snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x40 + j);
    m.nics.push_back(nicAt("n" + std::to_string(j), pci, place(0, 0, sw("hb", "sw", "n" + std::to_string(j)))));
  }
  std::vector<TopoMapping> maps;
  EXPECT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  std::vector<Names> r;
  for (const TopoMapping& t : maps) {
    r.push_back(nicNames(t));
    EXPECT_EQ("switch", t.closeness);
  }
  return r;
}

TEST(TopoSharing, EqualCountsPairLowWithLow) {
  EXPECT_EQ((std::vector<Names>{{"n0"}, {"n1"}}), shareOnSwitch(2, 2));
}
TEST(TopoSharing, MoreNicsThanGpus) {
  EXPECT_EQ((std::vector<Names>{{"n0", "n1"}}), shareOnSwitch(1, 2));
  EXPECT_EQ((std::vector<Names>{{"n0", "n1"}, {"n2", "n3"}}), shareOnSwitch(2, 4));
  // n/k rounds down: 3 NICs for 2 GPUs gives one each, the third unused.
  EXPECT_EQ((std::vector<Names>{{"n0"}, {"n1"}}), shareOnSwitch(2, 3));
}
TEST(TopoSharing, MoreGpusThanNics) {
  // Each NIC serves at most ceil(k/n) GPUs, lower bus ids first.
  EXPECT_EQ((std::vector<Names>{{"n0"}, {"n0"}, {"n1"}}), shareOnSwitch(3, 2));
  EXPECT_EQ((std::vector<Names>{{"n0"}, {"n0"}, {"n0"}, {"n0"}}), shareOnSwitch(4, 1));
  EXPECT_EQ((std::vector<Names>{{"n0"}, {"n0"}, {"n1"}, {"n1"}, {"n2"}}), shareOnSwitch(5, 3));
}

// A DGX-2-like tree: GPU A and NIC x under one sub-switch, GPU B and NIC y under another, both
// under one top switch. Bus ids put y below x, so pairing by bus id alone would cross them.
TEST(TopoSharing, DeeperSharedPathWins) {
  TopoMachine m;
  m.gpus.push_back(gpuAt("0000:07:00.0", place(0, 0, {"hb", "top", "subA", "pA"})));
  m.gpus.push_back(gpuAt("0000:0f:00.0", place(0, 0, {"hb", "top", "subB", "pB"})));
  m.nics.push_back(nicAt("y", "0000:05:00.0", place(0, 0, {"hb", "top", "subB", "pY"})));
  m.nics.push_back(nicAt("x", "0000:0c:00.0", place(0, 0, {"hb", "top", "subA", "pX"})));
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  EXPECT_EQ((Names{"x"}), nicNames(maps[0]));
  EXPECT_EQ((Names{"y"}), nicNames(maps[1]));
}

TEST(TopoFar, TakesLeastUsedOnItsNumaNode) {
  TopoMachine m;
  std::vector<int> cpus0{0, 1, 2, 3}, cpus1{4, 5, 6, 7};
  m.gpus.push_back(gpuAt("0000:10:00.0", place(0, 0, sw("hb0", "sw0", "g"), cpus0)));
  m.gpus.push_back(gpuAt("0000:20:00.0", place(0, 0, sw("hb1", "sw1", "g"), cpus0)));
  m.gpus.push_back(gpuAt("0000:30:00.0", place(0, 0, sw("hb2", "sw2", "g"), cpus0)));
  m.nics.push_back(nicAt("a", "0000:11:00.0", place(0, 0, sw("hb0", "sw0", "n"), cpus0)));
  m.nics.push_back(nicAt("b", "0000:40:00.0", place(0, 0, {"hb4", "hb4/rp"}, cpus0)));
  m.nics.push_back(nicAt("c", "0000:90:00.0", place(1, 1, {"hb9", "hb9/rp"}, cpus1)));
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  EXPECT_EQ((Names{"a"}), nicNames(maps[0]));
  EXPECT_EQ("switch", maps[0].closeness);
  // The other two have nothing near: one NIC each on NUMA node 0, the unused "b" first.
  EXPECT_EQ((Names{"b"}), nicNames(maps[1]));
  EXPECT_EQ((Names{"a"}), nicNames(maps[2]));
  EXPECT_EQ("numa", maps[1].closeness);
  EXPECT_EQ(cpus0, maps[1].proxyCpus);
}

TEST(TopoFar, SocketThenAnywhere) {
  TopoMachine m;
  m.gpus.push_back(gpuAt("0000:10:00.0", place(1, 0, {"hb0", "r"}, {8, 9})));  // socket 0, numa 1 (SNC)
  m.gpus.push_back(gpuAt("0000:90:00.0", place(2, 1, {"hb9", "r"}, {16})));  // socket 1
  m.nics.push_back(nicAt("s0n0", "0000:50:00.0", place(0, 0, {"hb5", "r"}, {0, 1})));
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  EXPECT_EQ((Names{"s0n0"}), nicNames(maps[0]));
  EXPECT_EQ("socket", maps[0].closeness);
  EXPECT_EQ((Names{"s0n0"}), nicNames(maps[1]));
  EXPECT_EQ("system", maps[1].closeness);
  // Proxy CPUs follow the NIC (the proxy drives it).
  EXPECT_EQ((std::vector<int>{0, 1}), maps[1].proxyCpus);
}

TEST(TopoPool, DownAndSoftNicsAreNotChosen) {
  TopoMachine m;
  m.gpus.push_back(gpuAt("0000:10:00.0", place(0, 0, sw("hb", "sw", "g"), {0, 1})));
  m.nics.push_back(nicAt("down0", "0000:11:00.0", place(0, 0, sw("hb", "sw", "n")), "down"));
  m.nics.push_back(nicAt("rxe0", "", place(0, 0, {}), "active"));
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  ASSERT_EQ(1u, maps.size());
  EXPECT_TRUE(maps[0].nics.empty());
  EXPECT_EQ("", maps[0].closeness);
  EXPECT_EQ((std::vector<int>{0, 1}), maps[0].proxyCpus);  // no NIC: near the GPU
  EXPECT_EQ("0000:10:00.0", maps[0].gpuPci);
  EXPECT_EQ(0, maps[0].numa);

  // Unknown state counts as usable.
  m.nics.push_back(nicAt("maybe", "0000:60:00.0", place(0, 0, {"hb6"}), "unknown", 0));
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  EXPECT_EQ((Names{"maybe"}), nicNames(maps[0]));
}

TEST(TopoPool, NoGpusNoNics) {
  TopoMachine m;
  std::vector<TopoMapping> maps(3);
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  EXPECT_TRUE(maps.empty());
  m.gpus.push_back(gpuAt("0000:10:00.0", place(-1, -1, {})));
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
  ASSERT_EQ(1u, maps.size());
  EXPECT_TRUE(maps[0].nics.empty());
  EXPECT_TRUE(maps[0].proxyCpus.empty());  // nothing known: don't pin
}

TopoMachine fourNics() {
  TopoMachine m;
  m.gpus.push_back(gpuAt("0000:10:00.0", place(0, 0, sw("hb0", "sw0", "g"), {0})));
  m.gpus.push_back(gpuAt("0000:90:00.0", place(1, 1, sw("hb9", "sw9", "g"), {1})));
  m.nics.push_back(nicAt("mlx5_0", "0000:11:00.0", place(0, 0, sw("hb0", "sw0", "n"), {0}), "active", 2));
  m.nics.push_back(nicAt("mlx5_1", "0000:12:00.0", place(0, 0, sw("hb0", "sw0", "m"), {0}), "down", 1));
  m.nics.push_back(nicAt("mlx5_2", "0000:91:00.0", place(1, 1, sw("hb9", "sw9", "n"), {1})));
  m.nics.push_back(nicAt("mlx5_3", "0000:a1:00.0", place(1, 1, {"hba"}, {1})));
  return m;
}

TEST(TopoOverride, RestrictsThePool) {
  TopoMachine m = fourNics();
  std::vector<NetDeviceChoice> c;
  ASSERT_EQ(mkcclSuccess, parseNetDevices("mlx5_3", &c));
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, c, &maps));
  EXPECT_EQ((Names{"mlx5_3"}), nicNames(maps[0]));
  EXPECT_EQ((Names{"mlx5_3"}), nicNames(maps[1]));
  EXPECT_EQ("system (MKCCL_NET_DEVICES)", maps[0].closeness);
  EXPECT_EQ("numa (MKCCL_NET_DEVICES)", maps[1].closeness);
}

TEST(TopoOverride, NamedDownNicAndPort) {
  TopoMachine m = fourNics();
  std::vector<NetDeviceChoice> c;
  ASSERT_EQ(mkcclSuccess, parseNetDevices("mlx5_1:1,mlx5_0:2", &c));
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, topoMapAll(m, c, &maps));
  // Both on GPU 0's switch: GPU 0 takes both (k=1, n=2), in the user's order; GPU 1 takes one.
  EXPECT_EQ((Names{"mlx5_1", "mlx5_0"}), nicNames(maps[0]));
  EXPECT_EQ(1, maps[0].nics[0].port);
  EXPECT_EQ(2, maps[0].nics[1].port);
  EXPECT_EQ(1u, maps[1].nics.size());
  EXPECT_EQ("system (MKCCL_NET_DEVICES)", maps[1].closeness);
}

TEST(TopoOverride, UnknownNameOrPortIsAnError) {
  TopoMachine m = fourNics();
  m.source = "test machine";
  std::vector<NetDeviceChoice> c;
  std::vector<TopoMapping> maps;
  ASSERT_EQ(mkcclSuccess, parseNetDevices("mlx5_9", &c));
  EXPECT_EQ(mkcclInvalidUsage, topoMapAll(m, c, &maps));
  EXPECT_NE(std::string::npos, std::string(lastError()).find("mlx5_9")) << lastError();
  EXPECT_NE(std::string::npos, std::string(lastError()).find("mlx5_2")) << "lists the NICs that exist: " << lastError();
  ASSERT_EQ(mkcclSuccess, parseNetDevices("mlx5_2:2", &c));
  EXPECT_EQ(mkcclInvalidUsage, topoMapAll(m, c, &maps));
  EXPECT_NE(std::string::npos, std::string(lastError()).find("port 2")) << lastError();
  ASSERT_EQ(mkcclSuccess, parseNetDevices("mlx5_0:2", &c));
  EXPECT_EQ(mkcclSuccess, topoMapAll(m, c, &maps));
}

// Random machines: properties every mapping must have, whatever the shape.
uint64_t seed() {
  const char* s = getenv("MKCCL_TEST_SEED");
  return s ? strtoull(s, nullptr, 0) : std::random_device{}();
}

TEST(TopoRandom, Properties) {
  const uint64_t sd = seed();
  SCOPED_TRACE("MKCCL_TEST_SEED=" + std::to_string(sd));
  std::mt19937_64 rng(sd);
  auto pick = [&](int lo, int hi) { return (int)std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 300; iter++) {
    TopoMachine m;
    int bus = 1;
    const int sockets = pick(1, 2);
    for (int s = 0; s < sockets; s++)
      for (int h = pick(1, 3); h > 0; h--) {
        std::string hb = "hb" + std::to_string(bus);
        for (int w = pick(0, 3); w >= 0; w--) {
          // w == 0: devices straight on root ports of the host bridge; else behind a switch.
          std::vector<std::string> base{hb, hb + "/rp" + std::to_string(w)};
          if (w > 0) base.push_back(hb + "/sw" + std::to_string(w));
          for (int g = pick(0, 3); g > 0; g--) {
            char pci[32];
            snprintf(pci, sizeof(pci), "0000:%02x:00.0", bus++ % 256);
            std::vector<std::string> p = base;
            p.push_back(std::string(pci) + "/port");
            m.gpus.push_back(gpuAt(pci, place(s, s, p, {s})));
          }
          for (int n = pick(0, 4); n > 0; n--) {
            char pci[32];
            snprintf(pci, sizeof(pci), "0000:%02x:00.0", bus++ % 256);
            std::vector<std::string> p = base;
            p.push_back(std::string(pci) + "/port");
            int r = pick(0, 9);
            m.nics.push_back(nicAt("nic" + std::to_string(bus), r == 0 ? "" : pci, place(s, s, p, {s}),
                                   r == 1 ? "down" : "active"));
          }
        }
      }
    topoSortMachine(&m);
    std::vector<TopoMapping> maps;
    ASSERT_EQ(mkcclSuccess, topoMapAll(m, {}, &maps));
    ASSERT_EQ(m.gpus.size(), maps.size());
    std::vector<const TopoNicDesc*> pool;
    for (const TopoNicDesc& d : m.nics)
      if (d.nic.state != "down" && !d.nic.pci.empty()) pool.push_back(&d);
    std::map<std::string, const TopoNicDesc*> byName;
    for (const TopoNicDesc& d : m.nics) byName[d.nic.name] = &d;
    for (size_t g = 0; g < m.gpus.size(); g++) {
      const TopoMapping& t = maps[g];
      EXPECT_EQ(m.gpus[g].pci, t.gpuPci);
      EXPECT_EQ(pool.empty(), t.nics.empty());
      if (pool.empty()) continue;
      TopoCloseness best = topoCloseness(m.gpus[g].place, pool[0]->place);
      for (const TopoNicDesc* d : pool) {
        TopoCloseness c = topoCloseness(m.gpus[g].place, d->place);
        if (c.closerThan(best)) best = c;
      }
      EXPECT_EQ(topoLevelName(best.level), t.closeness);
      std::set<std::string> seen;
      for (const TopoNic& n : t.nics) {
        ASSERT_TRUE(byName.count(n.name));
        const TopoNicDesc* d = byName[n.name];
        EXPECT_NE("down", d->nic.state);
        EXPECT_FALSE(d->nic.pci.empty());
        EXPECT_TRUE(seen.insert(n.name).second) << "NIC chosen twice for one GPU";
        TopoCloseness c = topoCloseness(m.gpus[g].place, d->place);
        if (best.level <= TopoLevel::HostBridge) {
          EXPECT_TRUE(c == best) << n.name << " is not among the closest";
        } else {
          EXPECT_EQ(best.level, c.level);
        }
      }
      if (best.level > TopoLevel::HostBridge) {
        EXPECT_EQ(1u, t.nics.size());
      }
      EXPECT_EQ(byName[t.nics[0].name]->place.cpus, t.proxyCpus);
    }
    // The GPUs' order in the description does not matter.
    TopoMachine shuffled = m;
    std::shuffle(shuffled.gpus.begin(), shuffled.gpus.end(), rng);
    std::vector<TopoMapping> again;
    ASSERT_EQ(mkcclSuccess, topoMapAll(shuffled, {}, &again));
    for (size_t i = 0; i < shuffled.gpus.size(); i++) {
      size_t j = 0;
      while (m.gpus[j].pci != shuffled.gpus[i].pci) j++;
      EXPECT_EQ(nicNames(maps[j]), nicNames(again[i])) << shuffled.gpus[i].pci;
    }
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace test
}  // namespace mkccl
