#include "topo/report.h"
#include <stdio.h>
#include "topo/pci_id.h"

namespace mkccl {
namespace {

std::string jsonString(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += (char)c;
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      r += buf;
    } else {
      r += (char)c;
    }
  }
  return r + "\"";
}

std::string nicBrief(const TopoNic& n) {
  std::string s = n.name + " port " + std::to_string(n.port) + " (" + n.type + ", " + n.state;
  if (n.gbps > 0) {
    char buf[32];
    snprintf(buf, sizeof(buf), ", %g Gb/s", n.gbps);
    s += buf;
  }
  return s + ")";
}

std::string numaText(int numa) { return numa >= 0 ? std::to_string(numa) : "?"; }

}  // namespace

std::string topoMappingLine(const TopoMapping& t) {
  std::string s = "GPU " + t.gpuPci + " numa " + numaText(t.numa) + " -> ";
  if (t.nics.empty()) {
    s += "no NIC";
  } else {
    for (size_t i = 0; i < t.nics.size(); i++) s += (i ? ", " : "") + nicBrief(t.nics[i]);
    s += " [" + t.closeness + "]";
  }
  s += "; proxy CPUs " + (t.proxyCpus.empty() ? std::string("not pinned") : cpuListString(t.proxyCpus));
  return s;
}

std::string topoReportText(const TopoMachine& m, const std::vector<TopoMapping>& maps) {
  std::string s = "Topology from " + m.source + "\n";
  if (!m.note.empty()) s += "Note: " + m.note + "\n";
  s += "NUMA nodes: " + std::to_string(m.numas.size()) + "\n";
  for (const TopoNumaDesc& n : m.numas)
    s += "  numa " + std::to_string(n.os) + "  socket " + (n.socket >= 0 ? std::to_string(n.socket) : "?") +
         "  cpus " + cpuListString(n.cpus) + "\n";
  s += "GPUs: " + std::to_string(m.gpus.size()) + "  (-> NICs chosen [how close], proxy CPUs)\n";
  for (size_t i = 0; i < m.gpus.size(); i++) {
    const TopoGpuDesc& g = m.gpus[i];
    s += "  " + g.pci + "  numa " + numaText(g.place.numa);
    if (g.cudaDev >= 0) s += "  cuda " + std::to_string(g.cudaDev);
    if (i < maps.size()) {
      const TopoMapping& t = maps[i];
      s += "  -> ";
      if (t.nics.empty()) s += "no NIC";
      for (size_t j = 0; j < t.nics.size(); j++) s += (j ? "," : "") + t.nics[j].name + ":" + std::to_string(t.nics[j].port);
      if (!t.nics.empty()) s += " [" + t.closeness + "]";
      s += "  cpus " + (t.proxyCpus.empty() ? std::string("not pinned") : cpuListString(t.proxyCpus));
    }
    s += "\n";
  }
  s += "RDMA NICs: " + std::to_string(m.nics.size()) + "\n";
  for (const TopoNicDesc& d : m.nics) {
    const TopoNic& n = d.nic;
    s += "  " + n.name + "  " + (n.pci.empty() ? std::string("(no PCI)") : n.pci) + "  numa " + numaText(n.numa) +
         "  " + n.type + "  " + n.state;
    if (n.nports > 0) s += "  ports " + std::to_string(n.nports);
    if (n.gbps > 0) {
      char buf[32];
      snprintf(buf, sizeof(buf), "  %g Gb/s", n.gbps);
      s += buf;
    }
    s += "\n";
  }
  if (m.nics.empty()) s += "  none: no RDMA NIC (OpenFabrics device) found\n";
  return s;
}

std::string topoReportJson(const TopoMachine& m, const std::vector<TopoMapping>& maps) {
  std::string s = "{\"gpus\": [";
  for (size_t i = 0; i < m.gpus.size(); i++) {
    const TopoGpuDesc& g = m.gpus[i];
    s += i ? ", " : "";
    s += "{\"pci\": " + jsonString(g.pci) + ", \"numa\": " + std::to_string(g.place.numa) + ", \"nics\": [";
    std::vector<int> cpus;
    if (i < maps.size()) {
      for (size_t j = 0; j < maps[i].nics.size(); j++) s += (j ? ", " : "") + jsonString(maps[i].nics[j].name);
      cpus = maps[i].proxyCpus;
    }
    s += "], \"cpus\": " + jsonString(cpuListString(cpus)) + "}";
  }
  s += "], \"nics\": [";
  for (size_t i = 0; i < m.nics.size(); i++) {
    const TopoNic& n = m.nics[i].nic;
    s += i ? ", " : "";
    s += "{\"name\": " + jsonString(n.name) + ", \"pci\": " + jsonString(n.pci) + ", \"numa\": " +
         std::to_string(n.numa) + ", \"type\": " + jsonString(n.type) + ", \"state\": " + jsonString(n.state) + "}";
  }
  return s + "]}\n";
}

}  // namespace mkccl
