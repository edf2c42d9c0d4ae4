#include "topo/machine.h"
#include <algorithm>
#include "topo/pci_id.h"

namespace mkccl {

void topoSortMachine(TopoMachine* m) {
  std::stable_sort(m->gpus.begin(), m->gpus.end(),
                   [](const TopoGpuDesc& a, const TopoGpuDesc& b) { return pciLess(a.pci, b.pci); });
  std::stable_sort(m->nics.begin(), m->nics.end(), [](const TopoNicDesc& a, const TopoNicDesc& b) {
    // NICs without a PCI function (soft devices) last.
    if (a.nic.pci.empty() != b.nic.pci.empty()) return b.nic.pci.empty();
    if (a.nic.pci != b.nic.pci) return pciLess(a.nic.pci, b.nic.pci);
    return a.nic.name < b.nic.name;
  });
  std::stable_sort(m->numas.begin(), m->numas.end(),
                   [](const TopoNumaDesc& a, const TopoNumaDesc& b) { return a.os < b.os; });
}

}  // namespace mkccl
