// Writes hwloc 2.x XML topologies for tests: packages with one NUMA node each, and a PCI tree of
// host bridges, PCI bridges (root ports, switch ports), PCI devices and OS devices.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace mkccl {
namespace test {

class HwlocXml {
 public:
  // One package (and NUMA node) per entry, holding those PUs (os indexes).
  explicit HwlocXml(std::vector<std::vector<int>> pusPerSocket);

  // A host bridge whose secondary bus is `bus`, local to `socket` (-1: to the whole machine).
  int hostBridge(int socket, int bus);
  // A PCI-to-PCI bridge at bus id `busid` (domain 0, "bb:dd.f") leading to `secondaryBus`.
  int bridge(int parent, const std::string& busid, int secondaryBus);
  int pciDev(int parent, const std::string& busid, unsigned classId, unsigned vendor, unsigned device);
  // osdevType: hwloc's numbering (2 network, 3 OpenFabrics).
  void osDev(int pciDev, const std::string& name, int osdevType,
             std::vector<std::pair<std::string, std::string>> infos = {});

  std::string str() const;
  bool write(const std::string& path) const;

 private:
  struct Node {
    std::string kind;  // "hostbridge", "bridge", "pci", "os"
    int parent = -1, socket = -1;
    std::string busid, name;
    int secondary = 0, bus = 0;
    unsigned cls = 0, vendor = 0, device = 0;
    int osdevType = 0;
    std::vector<std::pair<std::string, std::string>> infos;
    std::vector<int> children;
  };
  int add(Node n);
  int subordinate(int id) const;
  void emit(int id, int depth, int indent, int* gp, std::string* out) const;
  std::vector<std::vector<int>> pus_;
  std::vector<Node> nodes_;
  std::vector<int> roots_;
};

// "bb:dd.f" for domain-0 bus/device/function.
std::string bdf(int bus, int dev = 0, int fn = 0);

}  // namespace test
}  // namespace mkccl
