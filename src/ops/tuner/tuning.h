// The tuner's overrides: the one surface through which experts and tests steer plans, as a string
// of `op.key=value` items separated by ';' (e.g. "ag_gemm.plan=ce;gemm_rs.push=team"). Read from
// MKCCL_TUNING once per process, or from mkcclConfig_t.tuning for one communicator, or set with
// mkcclSetTuning; parsed once there, never on a call. A key it does not know, or a value a key does
// not take, is an error that names it. Unset keys leave the choice to the tuner's models and rules
// (each op's plan.cu / rule.h). Keys that change what a rank expects from its peers (plans,
// protocols, orders, batch sizes) must be set alike on every rank; the README's table says which.
#pragma once
#include <stdint.h>
#include <string>
#include "mkccl.h"
#include "ops/coll/coll_plan.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {

struct Tuning {
  struct Gemm {
    GemmVariant variant = GemmVariant::Auto;  // gemm.variant: the engine's tile configuration
    int splitK = 0;  // gemm.split_k: 0 the model's, 1 never, s > 1 parts of K (plain GEMM: split_k_model.h)
    // gemm.stream_k: auto (0, the default) | off (1) | on (2) | split (3): the plain GEMM's partial
    // last wave (stream_k_model.h): auto takes the split remainder where the model predicts a 12%
    // gain, on forces stream-K's ranges (measured slower: kept for experiments), split forces the
    // split remainder.
    int streamK = 0;
    int packK = 0;   // gemm.pack_k: auto (0) | off (1) | on (2): pack A and W whose K is not a multiple of 64 (gemm_pack.h)
    // gemm.pdl: on (0) | off (1, the default): the plain GEMM launched as a programmatic dependent
    // of the stream's previous kernel (its launch overlaps that kernel's end). Off by default: 20
    // decode GEMMs back to back gained 0.5-1 us per call with it at M <= 128 but lost up to 9 us at
    // 64 x 28672 x 8192 on an H200 (perf/results/20261127-s7-1xH100-H200/10-final-h200/).
    int pdl = 1;
    // gemm.cluster_n: auto (0) | 1 | 2 | 4: CTAs per cluster along N sharing the A tile by
    // multicast (the plain GEMM's whole tiles, M >= 128; gemm_plan_model.h: gemmWithClusterN), with
    // gemm.variant's cluster along M.
    int clusterN = 0;
  } gemm;

  struct AgGemm {
    enum Plan : int { kAuto = 0, kFused, kSequential, kCe };
    int plan = kAuto;          // ag_gemm.plan
    int commCtas = -1;         // ag_gemm.comm_ctas: the fused plan's comm CTAs (0: side teams); -1 model
    int64_t ceGroupBytes = 0;  // ag_gemm.ce_group_kib: the ce plan's bytes per copy; 0 its default
    int ceRing = 0;            // ag_gemm.ce: direct (0) | ring (1)
    int64_t netPieceBytes = 0;  // ag_gemm.net_piece_kib: across nodes, the smallest piece a shard
                                // crosses the network in; 0 the default (512 KiB)
    enum Net : int { kNetFused = 0, kNetAuto, kNetSplit };
    int net = kNetAuto;         // ag_gemm.net: across nodes, fused (the persistent kernel, its plan
                                // as ag_gemm.plan says) | split (the GEMM of this node's rows while
                                // the others' cross, then theirs piece by piece, net_split.h) |
                                // auto: split where it applies (eager calls, uniform nodes, a shard
                                // within a window slot) with one rank per node or over tcp; else fused
    int netPieces = 0;          // ag_gemm.net_pieces: the split route's pieces per shard, 1..64 (at
                                // most its rows); 0: netSplitPieces' rule
  } agGemm;

  // GEMM+ReduceScatter (gemm_rs.*) and GEMM+AllReduce (gemm_ar.*) take the same keys.
  struct Reduce {
    enum Plan : int { kAuto = 0, kFused, kSequential, kRsThenAg };
    enum Push : int { kPushAuto = -1, kBulk = 0, kTeam = 1, kCe = 2 };
    int plan = kAuto;      // plan: auto | fused | sequential | rs_ag (AllReduce only)
    int push = kPushAuto;  // push: how partials travel: bulk | team | ce
    int ceBatch = 0;       // ce_batch: tiles per copy-engine copy (0: 64)
    int ceStreams = 0;     // ce_streams: copy streams per peer (0: 1)
    int ring = 0;          // reduce: direct (0) | ring (1)
    int order = -1;        // order: phases (0) | interleaved (1); -1 the rule's
    int publish = -1;      // publish: late (0) | early (1); -1 the rule's
    enum Net : int { kNetSequential = 0, kNetFused, kNetAuto, kNetSplit };
    int net = kNetAuto;    // net: across nodes, sequential (0) | fused (1): the fused ReduceScatter
                           // kernel with the network inside (AR: then the hierarchical AllGather);
                           // split (3): GEMMs of row pieces, the other nodes' rows first, their
                           // sums sent while this node's rows are computed; auto (2, the default):
                           // one rank per node or tcp: split, else fused beyond one wave, else
                           // sequential; several on RDMA: fused beyond one wave, else split, else
                           // sequential; run on emulated nodes only (docs/INTERNODE.md 7.1, 7.2)
    int netPieces = 0;     // net_pieces: the split route's pieces of the other nodes' rows, 1..64
                           // (at most the rows per rank); 0: netSplitPieces' rule
  } gemmRs, gemmAr;

  coll::Tuning coll;  // coll.* and allreduce.*: the collectives' protocols and layout

  struct Attention {
    enum Variant : int { kAuto = 0, kFast, kOverlap, kSimple };
    int variant = kAuto;  // attention.variant: the kernel's pipeline (attn_params.h); auto = fast
  } attention;

  struct Moe {
    int dispatchCtas = 0;  // moe.dispatch_ctas: mkcclMoeDispatchGemm's dispatch CTAs (the GEMM gets
                           // the rest); 0 the rule's (moe_dispatch_gemm.cu: fusedDispatchCtas)
    int combineCtas = 0;   // moe.combine_ctas: mkcclMoeGemmCombine's combine CTAs (the GEMM gets the
                           // rest); 0 the same rule (moe_gemm_combine.cu)
    int combineSplit = 1;  // moe.combine_split: off (0) | on (1, default: faster in every row
                           // measured at 2 ranks, docs/MOE.md): mkcclMoeGemmCombine's combine
                           // returns rows beside the GEMM, then reduces on every CTA after it
    enum FusedRoute : int { kRouteAuto = 0, kRouteOverlap, kRouteSequential };
    int fusedRoute = kRouteAuto;  // moe.fused_route: how mkcclMoeDispatchGemm / mkcclMoeGemmCombine
                                  // run: overlap (the GEMM beside the dispatch / combine, on rows
                                  // as they land / blocks as they are stored) or sequential (the
                                  // dispatch then the GEMM, the GEMM then the combine, on all the
                                  // CTAs); auto = sequential: faster in every row measured at 2
                                  // ranks (docs/MOE.md)
  } moe;
};

// Parses `text` (may be null or empty: no overrides) into *out, starting from the defaults.
// mkcclInvalidUsage naming `source` and the bad item otherwise (*out unchanged).
mkcclResult_t parseTuning(const char* source, const char* text, Tuning* out);

// The overrides in force, as a string of the keys that differ from the defaults ("" if none).
std::string tuningString(const Tuning& t);

// The process's overrides: MKCCL_TUNING, read once (an error in it is returned by every call that
// needs it), or what mkcclSetTuning(NULL, ...) set since. New communicators start from them.
mkcclResult_t processTuning(Tuning* out);
mkcclResult_t setProcessTuning(const char* text);

}  // namespace mkccl
