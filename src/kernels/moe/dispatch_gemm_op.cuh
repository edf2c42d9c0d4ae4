// The first expert GEMM of the fused MoE dispatch + GEMM1 (mkcclMoeDispatchGemm): the grouped GEMM
// (grouped.cuh), with or without the SwiGLU epilogue (grouped_swiglu.cuh), on recvX while the
// dispatch kernel (moe_dispatch.cu, Args::fused) is still filling it, on a stream of its own.
//
//   start   thread 0 of each CTA waits for the dispatch's layout flag (this call's expertOffsets
//           and expertCounts are written) before any role reads the offsets: the scheduler of
//           the grouped GEMM reads them from its first tile on. The flag and the counters are
//           zeroed on the stream before the call, so whatever they hold names this call.
//   Loads   before a tile's first k-block, the producer waits until the tile's 128-row block of
//           recvX has as many arrivals as it has rows with data (the expert's count tells how
//           many: padding rows are never sent), then orders that read before its TMA loads
//           (fence.proxy.async: the rows were written by generic stores, partly over NVLink).
//
// Both waits are dev::waitGeq (bounded by the communicator's timeout, giving up at once when the
// communicator has an error, e.g. the dispatch found its receive buffer over capacity); a failed
// wait puts the CTA in the engine's drain mode (the schedule runs on whatever memory holds, the
// kernel ends, the error is the communicator's).
#pragma once
#include <stdint.h>
#include "kernels/abi/devcomm.h"
#include "kernels/device/signal.cuh"
#include "kernels/gemm/grouped.cuh"
#include "kernels/gemm/grouped_swiglu.cuh"
#include "kernels/moe/moe_layout.h"

namespace mkccl {

struct MoeArrivalParams {
  DevComm comm;               // for the bounded waits and their error records
  const uint64_t* arrivals;   // this rank's Region::arrivals: [0] layout flag, [1 + b] block b
  const int32_t* counts;      // expertCounts [E_loc] (the handle's, written by the dispatch)
  int site;                   // error site of a wait that gives up
};

// The layout wait, by thread 0 of each CTA before the CTA's first barrier. On failure the CTA
// drains from the start (shared word 1, which MoeArrivalLoads reads).
template <class Params>
__device__ __forceinline__ void moeLayoutWait(const Params& p, uint32_t words) {
  volatile uint32_t* w = reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(words));
  if (!dev::waitGeqInline(p.moe.comm, p.moe.arrivals, 1, -1, p.moe.site)) w[1] = 1;
}

template <class Cfg, class Base = GroupedLoads<Cfg>>
struct MoeArrivalLoads : Base {
  const MoeArrivalParams* moe;
  const int* offsets;
  volatile uint32_t* words;
  template <class Params>
  __device__ __forceinline__ MoeArrivalLoads(const GemmArgs& g, const Params& p, const CUtensorMap* mapA_,
                                             uint32_t words_)
      : Base(g, p, mapA_, words_),
        moe(&p.moe),
        offsets(p.grouped.rowOffsets),
        words(reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(words_))) {}

  __device__ __forceinline__ bool wait(const GroupTile& t, int kb) const {
    if (kb != 0) return true;
    if (words[1] != 0) return false;  // the layout wait failed: drain
    // Rows of the tile's block that carry data: the expert's rows past the block's start.
    const long long start = (long long)t.m * Cfg::BM - __ldcg(offsets + t.g);
    long long rows = (long long)__ldcg(moe->counts + t.g) - start;
    rows = rows < 0 ? 0 : (rows > Cfg::BM ? Cfg::BM : rows);
    if (rows == 0) return true;
    if (!dev::waitGeqInline(moe->comm, moe->arrivals + 1 + t.m, (uint64_t)rows, -1, moe->site)) return false;
    dev::fenceProxyAsync();
    return true;
  }
};

// The plain grouped GEMM on arriving rows (act = recvX . W1^T per expert).
struct MoeDispatchGemmOp : GroupedGemmOp {
  struct Params {
    GroupedParams grouped;
    MoeArrivalParams moe;
  };
  static constexpr bool kStart = true;
  // The producer's inlined arrival wait spilled at the engine's 40 registers (82 bytes).
  static constexpr uint32_t kProducerRegs = 56, kConsumerRegs = 224;
  __device__ __forceinline__ static void start(const GemmArgs&, const Params& p, uint32_t words) {
    moeLayoutWait(p, words);
  }
  template <class Cfg, class Op>
  using Loads = MoeArrivalLoads<Cfg>;
};

// The SwiGLU grouped GEMM on arriving rows (act = silu(recvX . gate^T) * (recvX . up^T)).
struct MoeDispatchSwigluOp : MoeDispatchGemmOp {
  template <class Cfg, class Op>
  using Epilogue = SwigluEpilogue<Cfg, Op>;
};

// The same with W1 stored gate then up (grouped_swiglu.cuh, GateUpLoads).
struct MoeDispatchSwigluGateUpOp : MoeDispatchSwigluOp {
  template <class Cfg, class Op>
  using Loads = MoeArrivalLoads<Cfg, GateUpLoads<Cfg>>;
};

}  // namespace mkccl
