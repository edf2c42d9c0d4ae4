// The machines the topology tests load as hwloc XML, with the mapping each must produce.
#pragma once
#include <string>
#include <vector>
#include "hwloc_xml.h"

namespace mkccl {
namespace test {

struct ExpectedGpu {
  std::string pci;
  int numa;
  std::vector<std::string> nics;  // chosen, in order
  std::string cpus;               // proxy CPUs as a list
  std::string closeness;          // "" when no NIC
};

struct ExpectedNic {
  std::string name, pci;
  int numa;
  std::string type, state;
};

struct Scenario {
  std::string name;
  HwlocXml xml;
  std::vector<ExpectedGpu> gpus;  // by bus id
  std::vector<ExpectedNic> nics;  // as reported: by bus id
};

// DGX-class: 2 sockets, 4 PCIe switches each with 2 H100 and 2 ConnectX-7 (IB), plus storage
// NICs on the root complexes (plain Ethernet, and RoCE ConnectX-6 Dx), NVSwitches and a BMC VGA.
Scenario dgxNode();
// AWS p5-class: 8 GPUs, 16 EFA, two beside each GPU (socket 0: 2 GPUs + 4 EFA per switch;
// socket 1: one sub-switch per GPU with its 2 EFA).
Scenario p5Node();
// NICs only on root ports (no switch shared with a GPU), one of them down.
Scenario rootComplexNicNode();
// A VM-like node: 2 GPUs and a virtio Ethernet on one host bridge, no RDMA NIC, no PCI locality.
Scenario noNicNode();

}  // namespace test
}  // namespace mkccl
