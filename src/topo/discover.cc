#include "topo/discover.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <algorithm>
#include "base/check.h"
#include "topo/pci_id.h"

#if MKCCL_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace mkccl {
namespace {

// The file's own problem, said plainly, before hwloc tries (its failure says little).
mkcclResult_t checkFile(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return setError(mkcclInvalidUsage, "topology file %s: cannot open: %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode)) return setError(mkcclInvalidUsage, "topology file %s: not a regular file", path);
  if (st.st_size == 0) return setError(mkcclInvalidUsage, "topology file %s: empty", path);
  FILE* f = fopen(path, "r");
  if (!f) return setError(mkcclInvalidUsage, "topology file %s: cannot open: %s", path, strerror(errno));
  fclose(f);
  return mkcclSuccess;
}

}  // namespace

#if !MKCCL_HAVE_HWLOC

bool topoHaveHwloc() { return false; }

mkcclResult_t topoDiscover(const char* xmlPath, TopoMachine* out) {
  *out = TopoMachine();
  if (xmlPath && *xmlPath) {
    MKCCL_CHECK(checkFile(xmlPath));
    return setError(mkcclInvalidUsage, "topology file %s given, but libmkccl was built without hwloc: it cannot read it",
                    xmlPath);
  }
  out->source = "none";
  out->note = "built without hwloc: no topology discovered (no NIC chosen, proxy threads not pinned)";
  return mkcclSuccess;
}

#else

bool topoHaveHwloc() { return true; }

namespace {

constexpr unsigned kVendorNvidia = 0x10de, kVendorMellanox = 0x15b3, kVendorAmazon = 0x1d0f;

std::string pciString(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", (unsigned)a.domain, (unsigned)a.bus, (unsigned)a.dev,
           (unsigned)a.func);
  return buf;
}

// A stable name for a bridge: its bus id, or for a host bridge the buses below it.
std::string bridgeId(hwloc_obj_t b) {
  const auto& a = b->attr->bridge;
  if (a.upstream_type == HWLOC_OBJ_BRIDGE_PCI) return pciString(a.upstream.pci);
  char buf[48];
  snprintf(buf, sizeof(buf), "host %04x:[%02x-%02x]", (unsigned)a.downstream.pci.domain,
           (unsigned)a.downstream.pci.secondary_bus, (unsigned)a.downstream.pci.subordinate_bus);
  return buf;
}

std::vector<int> cpusOf(hwloc_const_cpuset_t set) {
  std::vector<int> cpus;
  if (!set || hwloc_bitmap_iszero(set) || hwloc_bitmap_isfull(set)) return cpus;
  unsigned i;
  hwloc_bitmap_foreach_begin(i, set) { cpus.push_back((int)i); }
  hwloc_bitmap_foreach_end();
  return cpus;
}

// The package whose CPUs include all of `set` (so a single-socket machine's devices attached at
// the Machine level still get socket 0); -1 if none or several.
int socketOf(hwloc_topology_t topo, hwloc_const_cpuset_t set) {
  if (!set || hwloc_bitmap_iszero(set)) return -1;
  for (hwloc_obj_t p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, nullptr); p;
       p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, p))
    if (hwloc_bitmap_isincluded(set, p->cpuset)) return (int)p->logical_index;
  return -1;
}

// Where an I/O object sits: its non-I/O ancestor gives CPUs, NUMA node and socket; the bridges
// above it give the PCI path.
TopoPlace placeOf(hwloc_topology_t topo, hwloc_obj_t io) {
  TopoPlace pl;
  hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo, io);
  if (local) {
    pl.cpus = cpusOf(local->cpuset);
    if (local->nodeset && hwloc_bitmap_weight(local->nodeset) == 1) pl.numa = hwloc_bitmap_first(local->nodeset);
    pl.socket = socketOf(topo, local->cpuset);
  }
  for (hwloc_obj_t p = io->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) pl.pciPath.push_back(bridgeId(p));
  std::reverse(pl.pciPath.begin(), pl.pciPath.end());
  return pl;
}

// "Port<N><what>" info attributes of an OpenFabrics device: N, or 0 if `name` is not one.
unsigned portInfo(const char* name, const char* what) {
  unsigned port = 0;
  int n = 0;
  char rest[32] = {0};
  if (sscanf(name, "Port%u%31s%n", &port, rest, &n) == 2 && name[n] == 0 && !strcmp(rest, what)) return port;
  return 0;
}

bool stateActive(const char* v) {
  // hwloc keeps the first character of sysfs "4: ACTIVE"; accept the spelled-out form too.
  return v[0] == '4' || strcasestr(v, "ACTIVE") != nullptr;
}

double readSysfsRate(const std::string& name, int port) {
  std::string path = "/sys/class/infiniband/" + name + "/ports/" + std::to_string(port) + "/rate";
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return 0;
  double g = 0;
  if (fscanf(f, "%lf", &g) != 1) g = 0;  // "400 Gb/sec (4X NDR)"
  fclose(f);
  return g;
}

TopoNicDesc nicOf(hwloc_topology_t topo, hwloc_obj_t os, bool live) {
  TopoNicDesc d;
  TopoNic& n = d.nic;
  n.name = os->name ? os->name : "?";
  hwloc_obj_t pci = os->parent && os->parent->type == HWLOC_OBJ_PCI_DEVICE ? os->parent : nullptr;
  d.place = placeOf(topo, pci ? pci : os);
  if (pci) n.pci = pciString(pci->attr->pcidev);
  n.numa = d.place.numa;
  unsigned vendor = pci ? pci->attr->pcidev.vendor_id : 0;
  if (vendor == kVendorMellanox || !strncmp(n.name.c_str(), "mlx", 3))
    n.type = "ib";
  else if (vendor == kVendorAmazon || !strncmp(n.name.c_str(), "efa", 3) || !strncmp(n.name.c_str(), "rdmap", 5))
    n.type = "efa";
  else
    n.type = "other";

  int firstActive = 0;
  std::vector<std::pair<int, double>> rates;
  for (unsigned i = 0; i < os->infos_count; i++) {
    const char* key = os->infos[i].name;
    const char* val = os->infos[i].value ? os->infos[i].value : "";
    if (unsigned p = portInfo(key, "State")) {
      n.nports = std::max(n.nports, (int)p);
      if (stateActive(val) && (firstActive == 0 || (int)p < firstActive)) firstActive = (int)p;
    } else if (unsigned p = portInfo(key, "Rate")) {  // not hwloc's: our XML files may carry it
      rates.push_back({(int)p, atof(val)});
    }
  }
  n.state = n.nports == 0 ? "unknown" : firstActive ? "active" : "down";
  n.port = firstActive ? firstActive : 1;
  for (const auto& r : rates)
    if (r.first == n.port) n.gbps = r.second;
  if (live && n.gbps == 0) n.gbps = readSysfsRate(n.name, n.port);
  return d;
}

void fill(hwloc_topology_t topo, bool live, TopoMachine* m) {
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, nullptr); o; o = hwloc_get_next_pcidev(topo, o)) {
    const auto& a = o->attr->pcidev;
    if (a.vendor_id != kVendorNvidia || (a.class_id != 0x0300 && a.class_id != 0x0302)) continue;
    TopoGpuDesc g;
    g.pci = pciString(a);
    g.place = placeOf(topo, o);
    m->gpus.push_back(g);
  }
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o; o = hwloc_get_next_osdev(topo, o))
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) m->nics.push_back(nicOf(topo, o, live));
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); o;
       o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) {
    TopoNumaDesc d;
    d.os = (int)o->os_index;
    d.cpus = cpusOf(o->cpuset);
    d.socket = socketOf(topo, o->cpuset);
    m->numas.push_back(d);
  }
  topoSortMachine(m);
}

// The release built against (the API version hwloc reports at run time is a different number).
std::string hwlocVersion() { return HWLOC_VERSION; }

}  // namespace

mkcclResult_t topoDiscover(const char* xmlPath, TopoMachine* out) {
  *out = TopoMachine();
  const bool xml = xmlPath && *xmlPath;
  if (xml) MKCCL_CHECK(checkFile(xmlPath));
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return setError(mkcclSystemError, "hwloc_topology_init failed");
  // hwloc drops I/O objects (PCI devices, bridges, NICs) unless asked to keep them.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  mkcclResult_t res = mkcclSuccess;
  if (xml) {
    // hwloc parses in set_xml or in load depending on its XML backend: either failing means the same.
    if (hwloc_topology_set_xml(topo, xmlPath) != 0 || hwloc_topology_load(topo) != 0)
      res = setError(mkcclInvalidUsage,
                     "topology file %s: malformed, or not an hwloc XML topology (hwloc %s cannot load it)", xmlPath,
                     hwlocVersion().c_str());
  } else if (hwloc_topology_load(topo) != 0) {
    res = setError(mkcclSystemError, "hwloc could not discover this machine's topology: %s", strerror(errno));
  }
  if (res == mkcclSuccess) {
    out->source = xml ? std::string("hwloc XML ") + xmlPath : "live system (hwloc " + hwlocVersion() + ")";
    fill(topo, !xml, out);
  }
  hwloc_topology_destroy(topo);
  return res;
}

#endif  // MKCCL_HAVE_HWLOC

}  // namespace mkccl
