// AllGather+GEMM across nodes: the network plan of a call (kernels/ag_gemm/net_layout.h) from the
// communicator's node map and network window.
#include "ops/ag_gemm/host.h"
#include "base/check.h"
#include "runtime/comm.h"
#include "ops/tuner/op_state.h"
#include "runtime/net_coll_info.h"

namespace mkccl {
namespace ag {

mkcclResult_t netPlanFor(mkcclComm* comm, const Layout& L, const char* op, NetLayout* out, int* orderNodeRanks) {
  NetCollInfo* info = nullptr;
  MKCCL_CHECK(netUniformCollInfo(comm, op, &info));
  const int64_t piece = tuningOf(comm).agGemm.netPieceBytes;  // ag_gemm.net_piece_kib; 0: the default
  if (!netLayoutFor(L, info->nNodes, info->node, info->windowBytes, out, piece > 0 ? piece : kMinNetPieceBytes))
    return setError(mkcclInvalidUsage,
                    "%s across %d nodes: each rank's network window (%llu bytes) must hold one shard per node "
                    "(%d x %lld bytes); raise MKCCL_NET_BUFFER_BYTES",
                    op, info->nNodes, (unsigned long long)info->windowBytes, info->nNodes,
                    (long long)((L.shardBytes() + kNetSlotAlign - 1) / kNetSlotAlign * kNetSlotAlign));
  // The tile order's node-aware form needs ranks numbered node by node (MKCCL_RANKS_PER_NODE, and
  // launchers that place ranks host by host); otherwise the rotation (correct, less overlap).
  bool byNode = true;
  for (size_t i = 0; i < info->rankAt.size(); ++i) byNode = byNode && info->rankAt[i] == static_cast<int>(i);
  *orderNodeRanks = byNode ? info->localRanks : 0;
  return mkcclSuccess;
}

}  // namespace ag
}  // namespace mkccl
