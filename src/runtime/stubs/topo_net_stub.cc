// Placeholders until topology (src/topo) and the inter-node transport land; each deletes its half.
#include "runtime/comm.h"
#include "runtime/log.h"
namespace mkccl {
mkcclResult_t topoInitComm(mkcclComm*) { return mkcclSuccess; }
void topoFreeComm(mkcclComm*) {}
mkcclResult_t netInitComm(mkcclComm* comm) {
  if (comm->nNodes > 1)
    return setError(mkcclInvalidUsage, "communicator spans %d nodes: inter-node transport not implemented yet",
                    comm->nNodes);
  return mkcclSuccess;
}
void netFreeComm(mkcclComm*) {}
}  // namespace mkccl
