// The topology hook of communicator init (src/runtime/hooks.h): comm->topo for this rank's GPU,
// from src/topo's discovery and mapping rules.
#include <string.h>
#include "base/check.h"
#include "runtime/comm.h"
#include "runtime/hooks.h"
#include "base/settings.h"
#include "topo/report.h"
#include "topo/resolve.h"

namespace mkccl {

mkcclResult_t topoInitComm(mkcclComm* comm) {
  std::string busId;
  if (comm->rank >= 0 && comm->rank < (int)comm->peers.size()) {
    const char* b = comm->peers[comm->rank].busId;
    busId.assign(b, strnlen(b, sizeof(comm->peers[comm->rank].busId)));
  }
  if (busId.empty() && comm->cudaDev >= 0) {
    char b[32] = {0};
    if (cudaDeviceGetPCIBusId(b, sizeof(b), comm->cudaDev) == cudaSuccess) busId = b;
  }
  TopoResolved r;
  const Settings& set = settings();
  MKCCL_CHECK(topoResolve(busId, set.topoFile.empty() ? nullptr : set.topoFile.c_str(),
                          set.netDevices.empty() ? nullptr : set.netDevices.c_str(), &r));
  MKCCL_INFO("topo: from %s", r.source.c_str());
  if (!r.note.empty()) MKCCL_INFO("topo: %s", r.note.c_str());
  if (!r.gpuFound)
    MKCCL_INFO("topo: GPU %s is not in the topology (hidden PCI tree?): its NUMA node and PCI path are unknown",
               busId.empty() ? "(bus id unknown)" : busId.c_str());
  for (const std::string& s : r.skipped) MKCCL_INFO("topo: not chosen automatically: %s", s.c_str());
  MKCCL_INFO("topo: %s", topoMappingLine(r.mapping).c_str());
  if (r.mapping.nics.empty()) MKCCL_INFO("topo: no RDMA NIC for GPU %s", r.mapping.gpuPci.c_str());
  comm->topo = new TopoMapping(std::move(r.mapping));
  return mkcclSuccess;
}

void topoFreeComm(mkcclComm* comm) {
  delete comm->topo;
  comm->topo = nullptr;
}

}  // namespace mkccl
