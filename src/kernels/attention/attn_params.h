// Arguments of the attention kernel, shared by the host (planning, launch) and the device: the
// tensor maps, the shape (attn_layout.h) and, for Ring Attention, the symmetric buffers and flags.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/attention/attn_layout.h"
#include "kernels/abi/devcomm.h"

namespace mkccl {
namespace attn {

// TMA descriptors of one launch. Q, K, V, O are [B, S, H, D] row-major (D contiguous), mapped as
// 4-D tensors {D, H, S, B}: a box {64, 1, rows, 1} is one head's rows, 64 columns (128 bytes,
// 128-byte swizzle), zero-filled past S on loads and clipped on stores.
struct AttnMaps {
  CUtensorMap q;     // box {64, 1, 128, 1}
  CUtensorMap o;     // box {64, 1, 64, 1} (plain calls: the TMA-store epilogue)
  CUtensorMap k[3];  // key sources, box {64, 1, 128, 1}: [0] the caller's; ring: [1], [2] this rank's receive slots
  CUtensorMap v[3];
};

// Ring Attention: where keys/values travel and how the partial results merge.
struct RingArgs {
  int32_t nComm;                 // blocks [0, nComm) forward key/value chunks to the next rank
  int32_t commLanes;             // threads per comm block that stream (one per warp)
  const char* srcK;              // the caller's K and V (this rank's chunk)
  const char* srcV;
  char* slot[2];                 // this rank's receive slots: K (kvBytes) then V (kvBytes)
  char* nextSlot[2];             // the next rank's slots, mapped here
  int64_t kvBytes;               // bytes of one rank's K (= of its V)
  uint64_t* arrive;              // this rank's flags [nComm], raised by the previous rank's comm blocks
  uint64_t* nextArrive;          // the next rank's
  uint64_t* freeFlag;            // this rank's flag raised by the next rank: its slots may be overwritten
  uint64_t* prevFree;            // the previous rank's (where this rank reports its progress)
  // (The flags live in the ring's own symmetric scratch, zeroed when it is allocated: no other op
  // writes them.)
  float* oAcc;                   // merge state per tile: 2 x 128 threads x D/2 fp32 (fragment order)
  float* lseAcc;                 // 2 x 128 threads x 2 fp32 per tile
  uint64_t* itemFlags;           // 2 per tile: flagValue(seq, t + 1) once step t's state is written
  unsigned long long* counters;  // [kMaxSteps] warpgroups done per step; zeroed before each call
  const uint64_t* epoch;         // this call's flag epoch (ringEpoch): every flag value is flagValue(epoch, ...)
  int32_t doneTarget[kMaxSteps]; // counts that complete a step (2 per tile with work, +1 from the step before)
  void* O;                       // [B, sLocal, Hq, D]
};

struct AttnParams {
  AttnShape shape;
  float scaleLog2;         // softmax scale x log2(e)
  int32_t lseRows;         // rows (S) of the LSE tensor [B, Hq, S]
  float* lse;              // or null
  uint64_t waitTimeoutNs;  // bound of the intra-CTA mbarrier waits
  int* fault;              // host-mapped: an intra-CTA wait that gave up writes (block + 1) << 8 | site
  DevComm comm;            // ring only
  RingArgs ring;           // ring only
};

enum AttnFaultSite : int { kAttnFaultProducer = 1, kAttnFaultConsumer = 2, kAttnFaultComm = 3 };

// Kernel variants (the tuner's attention.variant): fast = softmax overlapped with the next block's QK^T inside
// a warpgroup and the two warpgroups' GEMMs in turns (ping-pong); overlap = without the turns;
// simple = each GEMM waited for before the softmax (debugging).
enum AttnVariant : int { kVariantFast = 0, kVariantOverlap = 1, kVariantSimple = 2 };

}  // namespace attn
}  // namespace mkccl
