// Discovery: the machine's GPUs, RDMA NICs and NUMA nodes from hwloc, either the live system or
// an hwloc XML (MKCCL_TOPO_FILE, mkccl-topo --xml).
#pragma once
#include <string>
#include "mkccl.h"
#include "topo/machine.h"

namespace mkccl {

// xmlPath null or "": the live system. A missing, unreadable or malformed XML is
// mkcclInvalidUsage with a message (setError). Built without hwloc: the live system gives an
// empty machine whose note says so, and an XML is mkcclInvalidUsage.
mkcclResult_t topoDiscover(const char* xmlPath, TopoMachine* out);

// As topoDiscover, remembered per process and path (hardware does not change under us; hwloc's
// I/O discovery takes tens of milliseconds per communicator otherwise).
mkcclResult_t topoDiscoverCached(const char* xmlPath, TopoMachine* out);

// True when built with hwloc.
bool topoHaveHwloc();

}  // namespace mkccl
