// The plain GEMM's kernels of the widths besides 128, 192 and 256 (kGemmNarrowWidths): one
// instantiation of the engine per width and input type, picked at run time by the plan's width.
// Whole tiles only (no split K or split remainder: the widths are the other answer to a partly
// empty last wave, gemm_plan_model.h).
#pragma once
#include <type_traits>
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "ops/gemm/gemm_launch.cuh"
#include "ops/gemm/gemm_narrow.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {
namespace narrow {

template <class In, int W>
using Launcher = GemmLauncher<GemmCfg<In, W, EpilogueTmaStore>, PlainGemmOp>;

template <class In, int W>
mkcclResult_t launchWidth(const NarrowLaunch& l) {
  int unused = 0;
  using L = Launcher<In, W>;
  MKCCL_CHECK(L::prepare(l.dev, l.smCount, l.g->clusterSize, &unused));
  return L::launch(*l.mapA, *l.mapB, *l.mapC, *l.g, PlainGemmOp::Params{}, l.ctas, l.stream, l.pdl);
}

// Calls f(std::integral_constant<int, bn>{}); false if bn is not one of the widths.
template <class F>
bool forWidth(int bn, F&& f) {
  switch (bn) {
    case 64: f(std::integral_constant<int, 64>{}); return true;
    case 80: f(std::integral_constant<int, 80>{}); return true;
    case 96: f(std::integral_constant<int, 96>{}); return true;
    case 112: f(std::integral_constant<int, 112>{}); return true;
    case 144: f(std::integral_constant<int, 144>{}); return true;
    case 160: f(std::integral_constant<int, 160>{}); return true;
    case 176: f(std::integral_constant<int, 176>{}); return true;
    case 208: f(std::integral_constant<int, 208>{}); return true;
    case 224: f(std::integral_constant<int, 224>{}); return true;
    case 240: f(std::integral_constant<int, 240>{}); return true;
  }
  return false;
}

}  // namespace narrow

template <class In>
mkcclResult_t plainGemmNarrow(const NarrowLaunch& l) {
  mkcclResult_t r = mkcclSuccess;
  const bool known = narrow::forWidth(l.bn, [&](auto w) { r = narrow::launchWidth<In, decltype(w)::value>(l); });
  if (!known) return setError(mkcclInternalError, "mkcclGemm: no kernel of width %d", l.bn);
  return r;
}

template <class In>
mkcclResult_t plainGemmNarrowPreload(int dev, int smCount) {
  mkcclResult_t r = mkcclSuccess;
  for (int bn : kGemmNarrowWidths)
    narrow::forWidth(bn, [&](auto w) {
      int unused = 0;
      if (r == mkcclSuccess) r = narrow::Launcher<In, decltype(w)::value>::prepare(dev, smCount, 1, &unused);
    });
  return r;
}

}  // namespace mkccl
