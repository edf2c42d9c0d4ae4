// AllGather+GEMM: the auto plan, a rule on the shape. Every rank computes it from arguments all
// ranks pass the same (M, N, K, the world size, the SM budget), so every rank runs the same plan
// without talking, and the call only enqueues.
//
// Why not time the plans: a timing trial (the first calls of a shape ran both plans, each rank
// kept the faster by its own CUDA events) let ranks disagree. A call's time on one rank includes
// waiting for its peers, so near ties came out differently per rank, and a mix of plans ran
// slower than either: 4xH200, 2026-11-22, auto 1210 / 689 / 579 us at 2048x8192x8192 (ws = 4)
// where the sequential plan took 435-453, and 1310 us at 4096x8192x8192 (ws = 2) against 835.
//
// The rule, from the forced plans of six runs on 4xH200 (fused: comm CTAs chosen by the model;
// side: the compute CTAs' idle producer warps push, plus idle SMs; sequential: our AllGather,
// then the GEMM engine), with G the model's GEMM on every SM and P the shards' push at NVLink
// rate (ws-1 shards out of each rank):
//   1. fused      when the GEMM has >= kMinFusedWaves waves of tiles, P <= kFusedMaxPushShare * G
//                 and a shard is at most kFusedMaxShardBytes: the push hides under the GEMM
//                 (8192^3: 1380-1583 us vs sequential 1904-1946; 16384x8192x8192 ws 4: 2906-3299
//                 vs 3697-3763; 4096x8192x8192: 778-848 vs 955-967; ws 2 alike).
//   2. side       when P >= kSideMinPushShare * G, or a shard is larger: the push is as long as
//                 the GEMM, and the side teams hide part of it without taking SMs (8192x2048x8192
//                 ws 4: 574-643 vs sequential 651-670, ws 2: 407-410 vs 568-584). Shards above
//                 64 MiB: the fused plan's comm CTAs ran 10x slow at 16384x8192x8192 on 2 ranks
//                 (128 MiB shards, 33 ms in two runs; cause not found), side 3394-3466 us.
//   3. sequential otherwise: few waves and a short push (2048x8192x8192 ws 4: 435-453 us, where
//                 the fused plan took 530-657 and the side teams 432-568).
// Before all three, where the driver has stream memory operations and the world size was measured
// with it (2 ranks): the ce plan, every SM computing while the copy engines push. 2xH200,
// 2026-11-22, us, ce / the rule's plan above: 8192^3 1476 / 1442, 16384x8192x8192
// 3251 / 3284, 8192x2048x8192 424.7 (369 with 16 MiB copies, the size the ce plan now picks) / 419,
// 4096x8192x8192 746 / 843, 2048x8192x8192 370 / 423 -- within the run-to-run spread where it is
// not clearly faster, and never slower than the sequential plan. Not at 4 ranks: 4xH200
// (perf/results/20261122-175606-4xNVIDIA_H200), ce / auto: 8192^3 1543 / 1430,
// 16384x8192x8192 3209 / 3055, 8192x2048x8192 3957 / 677, 4096x8192x8192 907 / 802,
// 2048x8192x8192 931 / 437 (the copies crawl while the kernel's waits poll host memory often;
// with the waits as they are (perf/results/20261122-181104-4xNVIDIA_H200): 1549 / 3230 / 666 / 867
// / 444 against the comm CTAs' 1615 / 3304 / 492 / 812 / 433 -- the copy engines move ~200 GB/s
// out of a GPU at 4 ranks, too little for short GEMMs).
#pragma once
#include <stdint.h>
#include "ops/ag_gemm/model.h"

namespace mkccl {
namespace ag {

enum class AutoPlan : int { Fused, Side, Sequential, CopyEngines };

constexpr int kCeMaxRanks = 2;  // the ce plan wins at 2 ranks, loses at 4 (above)
// From this world size on, the fused plan with comm CTAs wherever a shard fits it (<= 64 MiB):
// 4xH200 (perf/results/20261122-181104-4xNVIDIA_H200), with device waits that rarely read host
// memory, us fused / side teams / sequential / ce: 8192^3 1615 / 1880 / 1950 / 1549,
// 16384x8192x8192 3304 / 4396 / 3760 / 3230, 8192x2048x8192 492 / 577 / 661 / 666,
// 4096x8192x8192 812 / 934 / 992 / 867, 2048x8192x8192 433 / 437 / 455 / 444 (runs whose waits
// polled host memory often favoured side teams at 8192x2048x8192 and the sequential plan at
// 2048x8192x8192). 3 ranks measured once (comm CTAs; the ce plan was faster at
// 3072x8192x8192, 549 vs 593 us); 2 ranks without copy engines keep the rule below.
constexpr int kFusedEverywhereRanks = 3;

constexpr double kMinFusedWaves = 7.5;
constexpr double kFusedMaxPushShare = 0.3;
constexpr double kSideMinPushShare = 0.5;
constexpr int64_t kFusedMaxShardBytes = int64_t{64} << 20;

struct RuleInputs {
  int ws = 1;
  int64_t shardBytes = 0;  // one rank's rows of A
  int64_t tiles = 0;       // output tiles of the GEMM on every SM
  int ctas = 1;            // its CTAs (one wave)
  double gemmUs = 0;       // the model's time of that GEMM
  bool copyEngines = false;  // the driver has the stream memory operations the ce plan needs
};

struct RuleChoice {
  AutoPlan plan = AutoPlan::Sequential;
  double waves = 0, pushShare = 0;  // what the rule looked at
  const char* why = "";
};

inline RuleChoice chooseAutoPlan(const RuleInputs& in) {
  RuleChoice c;
  c.waves = static_cast<double>(in.tiles) / (in.ctas > 0 ? in.ctas : 1);
  const double pushUs = static_cast<double>(in.shardBytes) * (in.ws - 1) / (kNvlinkGBps * 1e3);
  c.pushShare = in.gemmUs > 0 ? pushUs / in.gemmUs : 1e30;
  const bool bigShard = in.shardBytes > kFusedMaxShardBytes;
  if (in.copyEngines && in.ws >= 2 && in.ws <= kCeMaxRanks) {
    c.plan = AutoPlan::CopyEngines;
    c.why = "the copy engines push while every SM computes";
  } else if (in.ws >= kFusedEverywhereRanks && !bigShard) {
    c.plan = AutoPlan::Fused;
    c.why = "beyond 2 ranks the comm CTAs' push measured fastest at every shape";
  } else if (c.waves >= kMinFusedWaves && c.pushShare <= kFusedMaxPushShare && !bigShard) {
    c.plan = AutoPlan::Fused;
    c.why = "the GEMM's waves hide the push";
  } else if (c.pushShare >= kSideMinPushShare || bigShard) {
    c.plan = AutoPlan::Side;
    c.why = bigShard ? "shards above 64 MiB: the side teams push (comm CTAs measured slow)"
                     : "the push is as long as the GEMM: the side teams hide part of it without taking SMs";
  } else {
    c.plan = AutoPlan::Sequential;
    c.why = "few waves and a short push: fusion cannot pay";
  }
  return c;
}

inline const char* autoPlanName(AutoPlan p) {
  switch (p) {
    case AutoPlan::Fused: return "fused (comm CTAs)";
    case AutoPlan::Side: return "fused (side teams)";
    case AutoPlan::CopyEngines: return "fused (copy engines push)";
    default: return "sequential";
  }
}

}  // namespace ag
}  // namespace mkccl
