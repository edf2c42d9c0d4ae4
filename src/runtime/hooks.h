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
// src/ops: loads every kernel of the library on a device (init; see src/ops/preload.cu for why).
mkcclResult_t preloadKernels(int dev, int smCount);
// src/ops/coll: loads the inter-node collectives' kernels (netInitComm). Why: with lazy module
// loading, CUDA's default, a kernel's first launch may wait until every kernel of the context has
// finished; if one of them waits for the network, and the network for this very thread, nothing
// moves.
mkcclResult_t netCollPreload();
}  // namespace mkccl
