#include "topo/resolve.h"
#include <string.h>
#include "base/check.h"
#include "topo/discover.h"
#include "topo/mapping.h"
#include "topo/pci_id.h"

namespace mkccl {

mkcclResult_t topoResolve(const std::string& busId, const char* topoFile, const char* netDevices,
                          TopoResolved* out) {
  *out = TopoResolved();
  std::vector<NetDeviceChoice> choices;
  MKCCL_CHECK(parseNetDevices(netDevices, &choices));
  TopoMachine m;
  MKCCL_CHECK(topoDiscoverCached(topoFile, &m));
  out->source = m.source;
  out->note = m.note;

  std::string pci;
  if (!pciNormalize(busId, &pci)) pci = busId;
  int idx = -1;
  for (size_t i = 0; i < m.gpus.size(); i++)
    if (m.gpus[i].pci == pci) idx = (int)i;
  out->gpuFound = idx >= 0;
  if (idx < 0) {  // not in the tree (hidden by a container, or no hwloc): place unknown
    TopoGpuDesc g;
    g.pci = pci;
    m.gpus.push_back(g);
    idx = (int)m.gpus.size() - 1;
  }

  for (const TopoNicDesc& d : m.nics) {
    if (d.nic.state == "down") out->skipped.push_back(d.nic.name + " (all ports down)");
    else if (d.nic.pci.empty()) out->skipped.push_back(d.nic.name + " (no PCI function: software RDMA device)");
  }

  if (!topoHaveHwloc() && !choices.empty()) {
    // Nothing to check the names against: hand them over as given; the transport opens them.
    TopoMapping& t = out->mapping;
    t.gpuPci = pci;
    for (const NetDeviceChoice& c : choices) {
      TopoNic n;
      n.name = c.name;
      n.port = c.port > 0 ? c.port : 1;
      n.type = !strncmp(c.name.c_str(), "mlx", 3) ? "ib"
               : (!strncmp(c.name.c_str(), "efa", 3) || !strncmp(c.name.c_str(), "rdmap", 5)) ? "efa" : "other";
      n.state = "unknown";
      t.nics.push_back(n);
    }
    t.closeness = "unchecked (MKCCL_NET_DEVICES, built without hwloc)";
    return mkcclSuccess;
  }

  std::vector<TopoMapping> maps;
  MKCCL_CHECK(topoMapAll(m, choices, &maps));
  out->mapping = maps[idx];
  return mkcclSuccess;
}

}  // namespace mkccl
