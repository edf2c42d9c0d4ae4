// What topoInitComm decides for one GPU, without a communicator (so it is unit-tested on CPUs).
#pragma once
#include <string>
#include <vector>
#include "mkccl.h"
#include "topo/topo.h"

namespace mkccl {

struct TopoResolved {
  TopoMapping mapping;
  std::string source;                // where the topology came from
  std::string note;                  // e.g. "built without hwloc ..."
  bool gpuFound = false;             // the bus id is one of the machine's GPUs
  std::vector<std::string> skipped;  // NICs the automatic choice left out, and why
};

// busId: this rank's GPU ("0000:19:00.0"; any case, 4- or 8-digit domain). topoFile: hwloc XML or
// null/"" for the live system (MKCCL_TOPO_FILE). netDevices: MKCCL_NET_DEVICES or null.
// Errors (mkcclInvalidUsage, with a message) only for a bad file or a bad netDevices; a machine
// without NIC, or a GPU the topology does not show, gives a mapping without NIC.
mkcclResult_t topoResolve(const std::string& busId, const char* topoFile, const char* netDevices,
                          TopoResolved* out);

}  // namespace mkccl
