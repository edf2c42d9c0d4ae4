#include "hwloc_xml.h"
#include <stdio.h>
#include <algorithm>
#include <fstream>

namespace mkccl {
namespace test {
namespace {

// hwloc's bitmap text: 32-bit words, most significant first, "0x%08x" each, comma separated.
std::string bitmap(const std::vector<int>& bits) {
  int maxBit = 0;
  for (int b : bits) maxBit = std::max(maxBit, b);
  std::vector<unsigned> words(maxBit / 32 + 1, 0);
  for (int b : bits) words[b / 32] |= 1u << (b % 32);
  std::string s;
  for (int i = (int)words.size() - 1; i >= 0; i--) {
    char buf[16];
    snprintf(buf, sizeof(buf), "0x%08x", words[i]);
    s += (s.empty() ? "" : ",") + std::string(buf);
  }
  return s;
}

std::string sets(const std::vector<int>& cpus, const std::vector<int>& nodes) {
  std::string c = bitmap(cpus), n = bitmap(nodes);
  return " cpuset=\"" + c + "\" complete_cpuset=\"" + c + "\" nodeset=\"" + n + "\" complete_nodeset=\"" + n + "\"";
}

std::string hex(unsigned v, int width) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%0*x", width, v);
  return buf;
}

}  // namespace

std::string bdf(int bus, int dev, int fn) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%02x:%02x.%x", bus, dev, fn);
  return buf;
}

HwlocXml::HwlocXml(std::vector<std::vector<int>> pusPerSocket) : pus_(std::move(pusPerSocket)) {}

int HwlocXml::add(Node n) {
  nodes_.push_back(n);
  int id = (int)nodes_.size() - 1;
  if (n.parent >= 0) nodes_[n.parent].children.push_back(id);
  else roots_.push_back(id);
  return id;
}

int HwlocXml::hostBridge(int socket, int bus) {
  Node n;
  n.kind = "hostbridge";
  n.socket = socket;
  n.secondary = bus;
  return add(n);
}

int HwlocXml::bridge(int parent, const std::string& busid, int secondaryBus) {
  Node n;
  n.kind = "bridge";
  n.parent = parent;
  n.busid = busid;
  n.secondary = secondaryBus;
  sscanf(busid.c_str(), "%x", (unsigned*)&n.bus);
  return add(n);
}

int HwlocXml::pciDev(int parent, const std::string& busid, unsigned classId, unsigned vendor, unsigned device) {
  Node n;
  n.kind = "pci";
  n.parent = parent;
  n.busid = busid;
  n.cls = classId;
  n.vendor = vendor;
  n.device = device;
  sscanf(busid.c_str(), "%x", (unsigned*)&n.bus);
  return add(n);
}

void HwlocXml::osDev(int pciDev, const std::string& name, int osdevType,
                     std::vector<std::pair<std::string, std::string>> infos) {
  Node n;
  n.kind = "os";
  n.parent = pciDev;
  n.name = name;
  n.osdevType = osdevType;
  n.infos = std::move(infos);
  add(n);
}

// The highest bus number at or below a bridge, for its "[secondary-subordinate]" range.
int HwlocXml::subordinate(int id) const {
  const Node& n = nodes_[id];
  int m = n.kind == "pci" ? n.bus : n.secondary;
  for (int c : n.children)
    if (nodes_[c].kind != "os") m = std::max(m, subordinate(c));
  return m;
}

void HwlocXml::emit(int id, int depth, int indent, int* gp, std::string* out) const {
  const Node& n = nodes_[id];
  std::string pad(indent, ' ');
  std::string attrs = " gp_index=\"" + std::to_string((*gp)++) + "\"";
  if (n.kind == "hostbridge") {
    attrs = "<object type=\"Bridge\"" + attrs + " bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[" +
            hex(n.secondary, 2) + "-" + hex(subordinate(id), 2) + "]\"";
  } else if (n.kind == "bridge") {
    attrs = "<object type=\"Bridge\"" + attrs + " bridge_type=\"1-1\" depth=\"" + std::to_string(depth) +
            "\" bridge_pci=\"0000:[" + hex(n.secondary, 2) + "-" + hex(subordinate(id), 2) + "]\" pci_busid=\"0000:" +
            n.busid + "\" pci_type=\"0604 [1000:c030] [1000:a064] 00\" pci_link_speed=\"31.507692\"";
  } else if (n.kind == "pci") {
    attrs = "<object type=\"PCIDev\"" + attrs + " pci_busid=\"0000:" + n.busid + "\" pci_type=\"" + hex(n.cls, 4) +
            " [" + hex(n.vendor, 4) + ":" + hex(n.device, 4) + "] [" + hex(n.vendor, 4) + ":0001] 00\" pci_link_speed=\"31.507692\"";
  } else {
    attrs = "<object type=\"OSDev\"" + attrs + " name=\"" + n.name + "\" osdev_type=\"" + std::to_string(n.osdevType) + "\"";
  }
  if (n.children.empty() && n.infos.empty()) {
    *out += pad + attrs + "/>\n";
    return;
  }
  *out += pad + attrs + ">\n";
  for (const auto& kv : n.infos) *out += pad + "  <info name=\"" + kv.first + "\" value=\"" + kv.second + "\"/>\n";
  for (int c : n.children) emit(c, n.kind == "bridge" || n.kind == "hostbridge" ? depth + 1 : depth, indent + 2, gp, out);
  *out += pad + "</object>\n";
}

std::string HwlocXml::str() const {
  std::vector<int> all, nodes;
  for (size_t s = 0; s < pus_.size(); s++) {
    all.insert(all.end(), pus_[s].begin(), pus_[s].end());
    nodes.push_back((int)s);
  }
  int gp = 1;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
                    "<topology version=\"2.0\">\n";
  std::string c = bitmap(all), nd = bitmap(nodes);
  out += "  <object type=\"Machine\" os_index=\"0\"" + sets(all, nodes) + " allowed_cpuset=\"" + c +
         "\" allowed_nodeset=\"" + nd + "\" gp_index=\"" + std::to_string(gp++) + "\">\n";
  for (size_t s = 0; s < pus_.size(); s++) {
    std::vector<int> node{(int)s};
    out += "    <object type=\"Package\" os_index=\"" + std::to_string(s) + "\"" + sets(pus_[s], node) +
           " gp_index=\"" + std::to_string(gp++) + "\">\n";
    out += "      <object type=\"NUMANode\" os_index=\"" + std::to_string(s) + "\"" + sets(pus_[s], node) +
           " gp_index=\"" + std::to_string(gp++) + "\" local_memory=\"68719476736\"/>\n";
    for (int pu : pus_[s])
      out += "      <object type=\"PU\" os_index=\"" + std::to_string(pu) + "\"" + sets({pu}, node) + " gp_index=\"" +
             std::to_string(gp++) + "\"/>\n";
    for (int r : roots_)
      if (nodes_[r].socket == (int)s) emit(r, 0, 6, &gp, &out);
    out += "    </object>\n";
  }
  for (int r : roots_)
    if (nodes_[r].socket < 0) emit(r, 0, 4, &gp, &out);
  out += "  </object>\n</topology>\n";
  return out;
}

bool HwlocXml::write(const std::string& path) const {
  std::ofstream f(path);
  f << str();
  return (bool)f;
}

}  // namespace test
}  // namespace mkccl
