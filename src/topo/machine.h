// A discovered machine, independent of hwloc: what the mapping rules (mapping.h) work on. Filled
// by discovery (discover.h) from hwloc, or by hand in unit tests.
#pragma once
#include <string>
#include <vector>
#include "topo/topo.h"

namespace mkccl {

// Where a PCI device sits. pciPath lists the bridges above it, root first: [0] is its host bridge
// (root complex), then each PCI-to-PCI bridge (root port, switch ports) down to its parent. Two
// devices whose paths share [0] share a host bridge; sharing more than [0] means a PCIe switch
// (or root port) in common, and the longer the shared prefix the closer they are.
struct TopoPlace {
  int numa = -1;                      // NUMA node (os index) the device is local to; -1: unknown
  int socket = -1;                    // package it is local to; -1: unknown
  std::vector<std::string> pciPath;   // empty: not in the PCI tree (no PCI closeness)
  std::vector<int> cpus;              // CPUs local to the device (os indexes); empty: unknown
};

struct TopoGpuDesc {
  std::string pci;  // normalised bus id, "0000:19:00.0"
  TopoPlace place;
  int cudaDev = -1;  // CUDA device index in this process where known (mkccl-topo), else -1
};

struct TopoNicDesc {
  TopoNic nic;
  TopoPlace place;
};

struct TopoNumaDesc {
  int os = -1;
  int socket = -1;
  std::vector<int> cpus;
};

struct TopoMachine {
  std::vector<TopoGpuDesc> gpus;    // ordered by PCI bus id
  std::vector<TopoNicDesc> nics;    // ordered by PCI bus id, then name
  std::vector<TopoNumaDesc> numas;  // ordered by os index
  std::string source;               // "hwloc XML <file>", "live system (hwloc 2.9.0)", ...
  std::string note;                 // why something is missing ("built without hwloc"), or ""
};

// Sorts gpus and nics into the documented order (discovery and tests call it).
void topoSortMachine(TopoMachine* m);

}  // namespace mkccl
