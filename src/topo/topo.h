// What topology decided for one rank's GPU: the NICs its inter-node proxy uses and the CPUs that
// proxy thread runs on. comm->topo points to one of these after topoInitComm (src/runtime/hooks.h).
#pragma once
#include <string>
#include <vector>

namespace mkccl {

struct TopoNic {
  std::string name;   // OpenFabrics device name: "mlx5_0", "rdmap79s0", ...
  std::string pci;    // "0000:19:00.0" ("" for a device without a PCI function, e.g. soft RoCE)
  int numa = -1;
  std::string type;   // "ib" (verbs: InfiniBand or RoCE), "efa", "other"
  std::string state;  // "active", "down", "unknown"
  double gbps = 0;    // link rate where known, else 0
  int port = 1;       // port to use: the first active one, or the one named in MKCCL_NET_DEVICES
  int nports = 0;     // ports seen (0: unknown)
};

struct TopoMapping {             // what comm->topo points to for this rank
  std::string gpuPci;            // "0000:19:00.0"
  int numa = -1;
  std::vector<TopoNic> nics;     // chosen for this GPU, best first (empty: none)
  std::vector<int> proxyCpus;    // CPUs for this GPU's proxy thread (empty: don't pin)
  // Why these NICs: "switch", "host-bridge", "numa", "socket", "system" (how close the first
  // one is), with " (MKCCL_NET_DEVICES)" appended when the user chose the pool; "" without NIC.
  std::string closeness;
};

}  // namespace mkccl
