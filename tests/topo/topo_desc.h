// Building machine descriptions by hand for the mapping-rule tests.
#pragma once
#include <string>
#include <vector>
#include "topo/machine.h"
#include "topo/topo.h"

namespace mkccl {
namespace test {

inline TopoPlace place(int numa, int socket, std::vector<std::string> path, std::vector<int> cpus = {}) {
  TopoPlace p;
  p.numa = numa;
  p.socket = socket;
  p.pciPath = std::move(path);
  p.cpus = std::move(cpus);
  return p;
}

inline TopoGpuDesc gpuAt(const std::string& pci, TopoPlace p) {
  TopoGpuDesc g;
  g.pci = pci;
  g.place = std::move(p);
  return g;
}

inline TopoNicDesc nicAt(const std::string& name, const std::string& pci, TopoPlace p,
                         const std::string& state = "active", int nports = 1) {
  TopoNicDesc d;
  d.nic.name = name;
  d.nic.pci = pci;
  d.nic.numa = p.numa;
  d.nic.type = "ib";
  d.nic.state = state;
  d.nic.nports = nports;
  d.place = std::move(p);
  return d;
}

inline std::vector<std::string> nicNames(const TopoMapping& t) {
  std::vector<std::string> v;
  for (const TopoNic& n : t.nics) v.push_back(n.name);
  return v;
}

using Names = std::vector<std::string>;

}  // namespace test
}  // namespace mkccl
