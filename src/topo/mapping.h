// The GPU -> NIC mapping rules, on a discovered machine (machine.h); no hwloc here.
//
//  1. Closeness of a NIC to a GPU, best first: same PCIe switch (the longer the shared PCI path,
//     the closer), same host bridge, same NUMA node, same socket, anywhere.
//  2. A GPU's candidates are the NICs at its best closeness. GPUs with the same candidates share
//     them: k GPUs and n NICs give each GPU max(1, n/k) NICs and each NIC at most ceil(k/n) GPUs,
//     lower bus ids paired with lower bus ids.
//  3. A GPU whose best NIC is not behind its own switch or host bridge takes one NIC: on its NUMA
//     node, else its socket, else any; the least used first, then by bus id.
//  4. Automatic choice skips NICs whose ports are all down and NICs without a PCI function (soft
//     RDMA devices). MKCCL_NET_DEVICES replaces the pool by the NICs it names, in any state, and
//     the rules above then choose among them.
//  5. Proxy CPUs: the CPUs local to the first chosen NIC, else to the GPU.
#pragma once
#include <vector>
#include "mkccl.h"
#include "topo/machine.h"
#include "topo/net_devices.h"
#include "topo/topo.h"

namespace mkccl {

enum class TopoLevel : int { Switch = 0, HostBridge = 1, Numa = 2, Socket = 3, System = 4 };
const char* topoLevelName(TopoLevel level);

struct TopoCloseness {
  TopoLevel level = TopoLevel::System;
  int shared = 0;  // length of the PCI path the two devices share (ranks NICs inside a switch)
  bool operator==(const TopoCloseness& o) const { return level == o.level && shared == o.shared; }
  bool closerThan(const TopoCloseness& o) const {
    return level != o.level ? level < o.level : shared > o.shared;
  }
};
TopoCloseness topoCloseness(const TopoPlace& gpu, const TopoPlace& nic);

// out[i] is the mapping of m.gpus[i]. choices: parsed MKCCL_NET_DEVICES (empty: automatic).
// A choice naming no NIC of m, or a port the NIC does not have, is mkcclInvalidUsage.
mkcclResult_t topoMapAll(const TopoMachine& m, const std::vector<NetDeviceChoice>& choices,
                         std::vector<TopoMapping>* out);

}  // namespace mkccl
