// mkccl-topo: the machine's GPUs, RDMA NICs and NUMA nodes, and which NICs and CPUs each GPU's
// proxy would use (the same rules the runtime applies at init). Needs no GPU.
//   mkccl-topo [--xml FILE] [--json]
// Exit status: 0; 2 for a bad argument, topology file or MKCCL_NET_DEVICES; 1 otherwise.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include "base/log.h"
#include "base/settings.h"
#include "topo/discover.h"
#include "topo/mapping.h"
#include "topo/pci_id.h"
#include "topo/report.h"

namespace {

void usage(FILE* f) {
  fprintf(f,
          "usage: mkccl-topo [--xml FILE] [--json]\n"
          "  --xml FILE  read an hwloc XML topology instead of this machine (default: $MKCCL_TOPO_FILE if set)\n"
          "  --json      print {\"gpus\": [...], \"nics\": [...]} instead of text\n"
          "MKCCL_NET_DEVICES (name[:port],...) is applied as the runtime applies it.\n");
}

int fail(int status) {
  fprintf(stderr, "mkccl-topo: %s\n", mkccl::lastError());
  return status;
}

// CUDA's view, on the live machine only: marks the GPUs this process can use, and adds any the
// PCI tree does not show (a container may hide it).
void addCudaDevices(mkccl::TopoMachine* m) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  for (int d = 0; d < n; d++) {
    char raw[32] = {0};
    std::string pci;
    if (cudaDeviceGetPCIBusId(raw, sizeof(raw), d) != cudaSuccess || !mkccl::pciNormalize(raw, &pci)) continue;
    bool found = false;
    for (mkccl::TopoGpuDesc& g : m->gpus)
      if (g.pci == pci) {
        g.cudaDev = d;
        found = true;
      }
    if (!found) {
      mkccl::TopoGpuDesc g;
      g.pci = pci;
      g.cudaDev = d;
      m->gpus.push_back(g);
    }
  }
  mkccl::topoSortMachine(m);
}

}  // namespace

int main(int argc, char** argv) {
  if (mkccl::settingsCheck(mkccl::SettingId::TopoFile) != mkcclSuccess ||
      mkccl::settingsCheck(mkccl::SettingId::NetDevices) != mkcclSuccess)
    return fail(2);
  const mkccl::Settings& settings = mkccl::settings();
  const char* xml = settings.topoFile.empty() ? nullptr : settings.topoFile.c_str();
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--xml") && i + 1 < argc) {
      xml = argv[++i];
    } else if (!strncmp(argv[i], "--xml=", 6)) {
      xml = argv[i] + 6;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "mkccl-topo: unexpected argument \"%s\"\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (xml && !*xml) xml = nullptr;

  std::vector<mkccl::NetDeviceChoice> choices;
  if (mkccl::parseNetDevices(settings.netDevices.empty() ? nullptr : settings.netDevices.c_str(), &choices) !=
      mkcclSuccess)
    return fail(2);
  mkccl::TopoMachine m;
  mkcclResult_t r = mkccl::topoDiscover(xml, &m);
  if (r != mkcclSuccess) return fail(r == mkcclInvalidUsage ? 2 : 1);
  if (!xml) addCudaDevices(&m);

  std::vector<mkccl::TopoMapping> maps;
  if (!mkccl::topoHaveHwloc() && !choices.empty()) {
    fprintf(stderr, "mkccl-topo: built without hwloc: MKCCL_NET_DEVICES is not checked and not shown\n");
  } else if (mkccl::topoMapAll(m, choices, &maps) != mkcclSuccess) {
    return fail(2);
  }
  fputs(json ? mkccl::topoReportJson(m, maps).c_str() : mkccl::topoReportText(m, maps).c_str(), stdout);
  return 0;
}
