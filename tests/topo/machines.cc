#include "machines.h"

namespace mkccl {
namespace test {
namespace {

constexpr int kOsNet = 2, kOsOpenFabrics = 3;

std::vector<int> range(int a, int b) {  // [a, b]
  std::vector<int> v;
  for (int i = a; i <= b; i++) v.push_back(i);
  return v;
}

std::vector<int> cat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int h100(HwlocXml& x, int parent, int bus) { return x.pciDev(parent, bdf(bus), 0x0302, 0x10de, 0x2330); }

void cx7(HwlocXml& x, int parent, int bus, const std::string& name) {
  int d = x.pciDev(parent, bdf(bus), 0x0207, 0x15b3, 0x1021);
  x.osDev(d, "ibp" + std::to_string(bus) + "s0", kOsNet);
  x.osDev(d, name, kOsOpenFabrics,
          {{"NodeGUID", "a088:c203:00" + std::to_string(bus) + ":0001"}, {"Port1State", "4"}, {"Port1LID", "0x12"},
           {"Port1Rate", "400"}});
}

void efa(HwlocXml& x, int parent, int bus) {
  int d = x.pciDev(parent, bdf(bus), 0x0200, 0x1d0f, 0xefa1);
  x.osDev(d, "rdmap" + std::to_string(bus) + "s0", kOsOpenFabrics, {{"Port1State", "4"}});
}

// Host bridge at `bus` -> root port -> switch upstream port; returns the upstream port.
int switchUnder(HwlocXml& x, int socket, int bus) {
  int hb = x.hostBridge(socket, bus);
  int rp = x.bridge(hb, bdf(bus, 1), bus + 1);
  return x.bridge(rp, bdf(bus + 1), bus + 2);
}

// Downstream port `port` of a switch whose upstream port leads to bus `upBus`, to bus `secondary`.
int downPort(HwlocXml& x, int up, int upBus, int port, int secondary) {
  return x.bridge(up, bdf(upBus, port), secondary);
}

}  // namespace

Scenario dgxNode() {
  Scenario s{"dgx", HwlocXml({cat(range(0, 7), range(16, 23)), cat(range(8, 15), range(24, 31))}), {}, {}};
  HwlocXml& x = s.xml;
  const std::string cpus[2] = {"0-7,16-23", "8-15,24-31"};
  const int base[4] = {0x10, 0x30, 0x90, 0xb0};
  for (int i = 0; i < 4; i++) {
    int socket = i / 2, b = base[i];
    int up = switchUnder(x, socket, b);
    // Downstream ports to buses b+3 .. b+6: GPU, GPU, NIC, NIC.
    h100(x, downPort(x, up, b + 2, 0, b + 3), b + 3);
    h100(x, downPort(x, up, b + 2, 1, b + 4), b + 4);
    cx7(x, downPort(x, up, b + 2, 2, b + 5), b + 5, "mlx5_" + std::to_string(2 * i));
    cx7(x, downPort(x, up, b + 2, 3, b + 6), b + 6, "mlx5_" + std::to_string(2 * i + 1));
    for (int g = 0; g < 2; g++)
      s.gpus.push_back({"0000:" + bdf(b + 3 + g), socket, {"mlx5_" + std::to_string(2 * i + g)}, cpus[socket], "switch"});
  }
  // Socket 0 root complex: BMC VGA, NVSwitches (NVIDIA, but not GPUs), a plain Ethernet storage NIC.
  int hb0 = x.hostBridge(0, 0x00);
  x.pciDev(hb0, bdf(0x00, 0x1f), 0x0300, 0x1a03, 0x2000);
  int nvs = x.bridge(hb0, bdf(0x00, 3), 0x02);
  x.pciDev(nvs, bdf(0x02), 0x0680, 0x10de, 0x22a3);
  x.pciDev(nvs, bdf(0x02, 1), 0x0680, 0x10de, 0x22a3);
  int eth = x.bridge(hb0, bdf(0x00, 2), 0x01);
  x.osDev(x.pciDev(eth, bdf(0x01, 0, 0), 0x0200, 0x8086, 0x1572), "eno1", kOsNet);
  x.osDev(x.pciDev(eth, bdf(0x01, 0, 1), 0x0200, 0x8086, 0x1572), "eno2", kOsNet);
  // Socket 1 root complex: a dual-port RoCE storage NIC (RDMA-capable, far from every GPU).
  int hb1 = x.hostBridge(1, 0x80);
  int st = x.bridge(hb1, bdf(0x80, 2), 0x81);
  for (int f = 0; f < 2; f++) {
    int d = x.pciDev(st, bdf(0x81, 0, f), 0x0200, 0x15b3, 0x101d);
    x.osDev(d, "enp129s0f" + std::to_string(f) + "np" + std::to_string(f), kOsNet);
    x.osDev(d, "mlx5_" + std::to_string(8 + f), kOsOpenFabrics, {{"Port1State", "4"}});
  }
  for (int i = 0; i < 4; i++) {
    int socket = i / 2, b = base[i];
    if (i == 2)
      for (int f = 0; f < 2; f++)
        s.nics.push_back({"mlx5_" + std::to_string(8 + f), "0000:" + bdf(0x81, 0, f), 1, "ib", "active"});
    for (int n = 0; n < 2; n++)
      s.nics.push_back({"mlx5_" + std::to_string(2 * i + n), "0000:" + bdf(b + 5 + n), socket, "ib", "active"});
  }
  return s;
}

Scenario p5Node() {
  Scenario s{"p5", HwlocXml({range(0, 47), range(48, 95)}), {}, {}};
  HwlocXml& x = s.xml;
  const std::string cpus[2] = {"0-47", "48-95"};
  const int base[4] = {0x10, 0x30, 0x90, 0xb0};
  auto name = [](int bus) { return "rdmap" + std::to_string(bus) + "s0"; };
  for (int i = 0; i < 4; i++) {
    int socket = i / 2, b = base[i];
    int up = switchUnder(x, socket, b);
    if (socket == 0) {
      // One switch: GPU, GPU, EFA x4 on buses b+3 .. b+8 (two GPUs share four EFAs).
      h100(x, downPort(x, up, b + 2, 0, b + 3), b + 3);
      h100(x, downPort(x, up, b + 2, 1, b + 4), b + 4);
      for (int e = 0; e < 4; e++) efa(x, downPort(x, up, b + 2, 2 + e, b + 5 + e), b + 5 + e);
      s.gpus.push_back({"0000:" + bdf(b + 3), 0, {name(b + 5), name(b + 6)}, cpus[0], "switch"});
      s.gpus.push_back({"0000:" + bdf(b + 4), 0, {name(b + 7), name(b + 8)}, cpus[0], "switch"});
      for (int e = 0; e < 4; e++) s.nics.push_back({name(b + 5 + e), "0000:" + bdf(b + 5 + e), 0, "efa", "active"});
    } else {
      // A sub-switch per GPU with its two EFAs. Sub-switch g spans buses sb .. sb+4: its upstream
      // port at sb:00.0, its internal bus sb+1, then GPU, EFA, EFA.
      for (int g = 0; g < 2; g++) {
        int sb = b + 3 + 5 * g;
        int sub = x.bridge(downPort(x, up, b + 2, g, sb), bdf(sb), sb + 1);
        h100(x, x.bridge(sub, bdf(sb + 1, 0), sb + 2), sb + 2);
        efa(x, x.bridge(sub, bdf(sb + 1, 1), sb + 3), sb + 3);
        efa(x, x.bridge(sub, bdf(sb + 1, 2), sb + 4), sb + 4);
        s.gpus.push_back({"0000:" + bdf(sb + 2), 1, {name(sb + 3), name(sb + 4)}, cpus[1], "switch"});
        for (int e = 3; e <= 4; e++) s.nics.push_back({name(sb + e), "0000:" + bdf(sb + e), 1, "efa", "active"});
      }
    }
  }
  return s;
}

Scenario rootComplexNicNode() {
  Scenario s{"rootnics", HwlocXml({range(0, 15), range(16, 31)}), {}, {}};
  HwlocXml& x = s.xml;
  auto gpuPair = [&](int up, int b) {
    h100(x, downPort(x, up, b + 2, 0, b + 3), b + 3);
    h100(x, downPort(x, up, b + 2, 1, b + 4), b + 4);
  };
  // Socket 0: two GPU switches; two NICs, each on a root port of its own host bridge.
  gpuPair(switchUnder(x, 0, 0x10), 0x10);
  gpuPair(switchUnder(x, 0, 0x30), 0x30);
  cx7(x, x.bridge(x.hostBridge(0, 0x50), bdf(0x50, 1), 0x51), 0x51, "mlx5_0");
  cx7(x, x.bridge(x.hostBridge(0, 0x60), bdf(0x60, 1), 0x61), 0x61, "mlx5_1");
  // Socket 1: one GPU switch alone; one sharing its host bridge with a NIC on another root port;
  // and a NIC whose port is down (it would otherwise be the least used).
  gpuPair(switchUnder(x, 1, 0x90), 0x90);
  int hb = x.hostBridge(1, 0xb0);
  int rp = x.bridge(hb, bdf(0xb0, 1), 0xb1);
  int up = x.bridge(rp, bdf(0xb1), 0xb2);
  h100(x, x.bridge(up, bdf(0xb2, 0), 0xb3), 0xb3);
  h100(x, x.bridge(up, bdf(0xb2, 1), 0xb4), 0xb4);
  cx7(x, x.bridge(hb, bdf(0xb0, 2), 0xb5), 0xb5, "mlx5_2");
  int dn = x.pciDev(x.bridge(x.hostBridge(1, 0xd0), bdf(0xd0, 1), 0xd1), bdf(0xd1), 0x0207, 0x15b3, 0x1021);
  x.osDev(dn, "mlx5_3", kOsOpenFabrics, {{"Port1State", "1"}});

  const std::string c0 = "0-15", c1 = "16-31";
  s.gpus = {{"0000:13:00.0", 0, {"mlx5_0"}, c0, "numa"},       {"0000:14:00.0", 0, {"mlx5_0"}, c0, "numa"},
            {"0000:33:00.0", 0, {"mlx5_1"}, c0, "numa"},       {"0000:34:00.0", 0, {"mlx5_1"}, c0, "numa"},
            {"0000:93:00.0", 1, {"mlx5_2"}, c1, "numa"},       {"0000:94:00.0", 1, {"mlx5_2"}, c1, "numa"},
            {"0000:b3:00.0", 1, {"mlx5_2"}, c1, "host-bridge"}, {"0000:b4:00.0", 1, {"mlx5_2"}, c1, "host-bridge"}};
  s.nics = {{"mlx5_0", "0000:51:00.0", 0, "ib", "active"},
            {"mlx5_1", "0000:61:00.0", 0, "ib", "active"},
            {"mlx5_2", "0000:b5:00.0", 1, "ib", "active"},
            {"mlx5_3", "0000:d1:00.0", 1, "ib", "down"}};
  return s;
}

Scenario noNicNode() {
  Scenario s{"nonic", HwlocXml({range(0, 15)}), {}, {}};
  HwlocXml& x = s.xml;
  int hb = x.hostBridge(-1, 0x00);
  x.osDev(x.pciDev(hb, bdf(0x00, 3), 0x0200, 0x1af4, 0x1041), "eth0", kOsNet);
  x.pciDev(hb, bdf(0x00, 5), 0x0302, 0x10de, 0x2330);
  x.pciDev(hb, bdf(0x00, 6), 0x0302, 0x10de, 0x2330);
  s.gpus = {{"0000:00:05.0", 0, {}, "0-15", ""}, {"0000:00:06.0", 0, {}, "0-15", ""}};
  return s;
}

}  // namespace test
}  // namespace mkccl
