// What the host hands the MoE dispatch and combine kernels (by value). Shared by host and device.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "kernels/moe/moe_layout.h"
#include "kernels/moe/moe_net_layout.h"
#include "kernels/abi/devcomm.h"

namespace mkccl {
namespace moe {

// Buffers of this rank only (cudaMalloc), sized at creation.
struct LocalBufs {
  int32_t* ctaCounts;      // [maxCtas][keys]: per-CTA key counts of the count pass
  int32_t* slotRank;       // [cap][k]: a slot's rank among its warp's slots of the same expert
  int32_t* pairRank;       // [cap][k]: on a token's first slot to rank d, its rank among its warp's pairs to d
  Route* route;            // [cap][k]: where combine finds each slot (moe_layout.h)
  int32_t* expertOffsets;  // [E_loc + 1]
  int32_t* expertCounts;   // [E_loc]
  int32_t* sendList;       // [cap * k] fused mode: this rank's slots (t * 16 + j) in the order of
                           // their rows at the destinations (by global expert, then row)
  uint32_t* netCount;      // [kMaxRanks][kNetMaxPieces] across nodes: entries of each piece of what
                           // this rank sends each remote rank, staged so far (zeroed on the stream
                           // before each call); the warp that completes a piece puts it
  uint64_t* netSeen;       // [kMaxRanks][kNetMaxPieces] across nodes: device copies of the arrival flags of
                           // the pieces remote ranks send here (host memory), written by the call's one
                           // watcher warp (moe_net.cuh netWatch); zeroed at creation, values only grow
};

struct Args {
  DevComm dev;
  Dims dims;
  Region reg;
  char* region[kMaxRanks];  // every local rank's MoE region, mapped here (by local rank)
  // Ranks are global in the layout (experts, keys, counts, pairs); a region is a local rank's.
  int8_t lidx[kMaxRanks];   // local rank of each rank in this node; -1: another node (the network)
  uint8_t node[kMaxRanks];  // node of each rank
  bool net;                 // the communicator spans nodes (dev.net is set): moe_net.cuh
  LocalBufs local;
  int T;                    // this rank's tokens in this call
  int ctas;                 // grid size (all co-resident: the kernels sync the grid)
  // dispatch
  const char* x;            // [T][H]
  const int32_t* topkIdx;   // [T][k]
  const float* topkW;       // [T][k]
  bool xVec;                // X rows start on 16-byte boundaries (H * esize % 16 == 0, X aligned)
  // Fused with the first expert GEMM (mkcclMoeDispatchGemm): CTA 0 raises the layout flag once
  // expertOffsets / expertCounts of this call are written; the send step writes the metadata and
  // the send list only, and after it every slot's row is stored at its own row by the sender (no
  // expansion pass) in the order of the destination rows, each raising its 128-row block's
  // arrival counter at the receiver (Region::arrivals, zeroed on the stream before the call).
  bool fused;
  // combine
  const char* y;            // [rows][pitch]
  char* out;                // [T][H]
  bool outVec;              // rows of out start on 16-byte boundaries
  // Fused with the second expert GEMM (mkcclMoeGemmCombine): the GEMM writing Y runs beside this
  // kernel and raises yDone[1 + b] once per stored 64-row half of each of its N-blocks of Y's
  // 128-row block b (zeroed on the stream before the call); a row of Y is read only once its
  // block's word reaches yWant (2 x the GEMM's N-blocks). nullptr: Y is complete (mkcclMoeCombine).
  const uint64_t* yDone;
  uint64_t yWant;
  // Which steps of the combine this launch runs: kCombineWhole (both, one grid that syncs), or the
  // two halves of mkcclMoeGemmCombine's split form (moe.combine_split=on): kCombineReturn (step 1
  // beside the GEMM, its grid syncs, then the combine flags) and kCombineReduce (step 2, launched
  // after that kernel ends on the same call number, on a grid of any size: no grid sync).
  int part;
};

constexpr int kCombineWhole = 0, kCombineReturn = 1, kCombineReduce = 2;

// The error sites of these kernels (DevError::site; runtime/comm.cc words their messages).
constexpr int kSiteDispatch = kSiteMoeDispatch;
constexpr int kSiteCombine = kSiteMoeCombine;


}  // namespace moe
}  // namespace mkccl
