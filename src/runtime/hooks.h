// Component hooks called by communicator init/destroy.
#pragma once
#include "mkccl.h"
struct mkcclComm;
namespace mkccl {
// src/topo: choose NICs and proxy CPUs for this rank's GPU, log the mapping at INFO; sets comm->topo.
mkcclResult_t topoInitComm(mkcclComm* comm);
void topoFreeComm(mkcclComm* comm);
// src/transport + proxy: when comm->nNodes > 1, connect to the other nodes; sets comm->net.
mkcclResult_t netInitComm(mkcclComm* comm);
void netFreeComm(mkcclComm* comm);
}  // namespace mkccl
