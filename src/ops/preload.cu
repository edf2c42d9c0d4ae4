// Loads every kernel of the library on a communicator's device at init. CUDA loads kernels lazily
// by default (CUDA_MODULE_LOADING=LAZY), at their first launch, and that load waits for the device
// to go idle: in a process that drives several GPUs (mkcclCommInitAll), a rank's first launch of a
// kernel could then wait behind another rank's persistent kernel, which waits for this rank. NCCL
// loads its kernels at init for the same reason. The inter-node kernels are loaded by the network
// setup (netCollPreload).
#include <chrono>
#include "ops/coll/coll_direct.h"
#include "ops/coll/coll_kernels.h"
#include "ops/attention/attn_launch.h"
#include "kernels/device/wgmma.cuh"
#include "ops/ag_gemm/host.h"
#include "ops/gemm_rs/host.h"
#include "ops/gemm/gemm_plain.cuh"
#include "ops/gemm/gemm_narrow.h"
#include "ops/moe/moe_kernels.h"
#include "base/check.h"
#include "runtime/hooks.h"
#include "runtime/ops.h"
#include "base/log.h"

namespace mkccl {

void barrierKernels(const void** out);  // barrier.cu

namespace {

mkcclResult_t load(const void* kernel) {
  if (kernel == nullptr) return mkcclSuccess;  // a (type, op) pair without a kernel
  cudaFuncAttributes a;
  CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
  return mkcclSuccess;
}

mkcclResult_t loadCollectives() {
  const mkcclDataType_t floats[] = {mkcclFloat16, mkcclBfloat16, mkcclFloat32, mkcclFloat64};
  const mkcclDataType_t ints[] = {mkcclInt8, mkcclUint8, mkcclInt32, mkcclUint32, mkcclInt64, mkcclUint64};
  const mkcclRedOp_t ops[] = {mkcclSum, mkcclProd, mkcclMax, mkcclMin};
  MKCCL_CHECK(load(coll::copyKernel()));
  MKCCL_CHECK(load(coll::llCopyKernel()));
  MKCCL_CHECK(load(coll::directAllGatherKernelPtr()));
  MKCCL_CHECK(load(coll::directAllToAllKernelPtr()));
  for (mkcclRedOp_t op : ops) {
    for (mkcclDataType_t t : floats) {
      MKCCL_CHECK(load(coll::reduceKernelFloat(t, op)));
      MKCCL_CHECK(load(coll::llReduceKernelFloat(t, op)));
      MKCCL_CHECK(load(coll::directReduceKernelFloat(t, op)));
    }
    for (mkcclDataType_t t : ints) {
      MKCCL_CHECK(load(coll::reduceKernelInt(t, op)));
      MKCCL_CHECK(load(coll::llReduceKernelInt(t, op)));
      MKCCL_CHECK(load(coll::directReduceKernelInt(t, op)));
    }
  }
  return mkcclSuccess;
}

}  // namespace

mkcclResult_t preloadKernels(int dev, int smCount) {
  const auto t0 = std::chrono::steady_clock::now();
  const void* barriers[3];
  barrierKernels(barriers);
  MKCCL_CHECK(load(barriers[0]));
  MKCCL_CHECK(load(barriers[1]));
  MKCCL_CHECK(load(barriers[2]));
  MKCCL_CHECK(loadCollectives());
  MKCCL_CHECK(plainGemmPreload<dev::Bf16>(dev, smCount));
  MKCCL_CHECK(plainGemmPreload<dev::F16>(dev, smCount));
  MKCCL_CHECK(plainGemmNarrowPreload<dev::Bf16>(dev, smCount));
  MKCCL_CHECK(plainGemmNarrowPreload<dev::F16>(dev, smCount));
  MKCCL_CHECK(groupedGemmPreload(dev, smCount));
  MKCCL_CHECK(groupedSwigluPreload(dev, smCount));
  MKCCL_CHECK(ag::fusedPreload<dev::Bf16>(dev, smCount));
  MKCCL_CHECK(ag::fusedPreload<dev::F16>(dev, smCount));
  MKCCL_CHECK(ag::gatherPreload(dev));
  rs::Occupancy occ;
  MKCCL_CHECK(rs::reduceOccupancy<dev::Bf16>(dev, smCount, &occ));
  MKCCL_CHECK(rs::reduceOccupancy<dev::F16>(dev, smCount, &occ));
  MKCCL_CHECK(rs::finishPreload());
  MKCCL_CHECK(attn::attnPrepareBf16D64(dev, smCount));
  MKCCL_CHECK(attn::attnPrepareBf16D128(dev, smCount));
  MKCCL_CHECK(attn::attnPrepareF16D64(dev, smCount));
  MKCCL_CHECK(attn::attnPrepareF16D128(dev, smCount));
  // MoE: the dispatch kernel is loaded by mkcclMoeCreate (it sets its shared memory there).
  MKCCL_CHECK(load(moe::combineKernelFn(false)));
  MKCCL_CHECK(load(moe::combineKernelFn(true)));
  MKCCL_CHECK(load(moe::combineKernelFn(false, true)));
  MKCCL_CHECK(load(moe::combineKernelFn(true, true)));
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat16}) {
    MKCCL_CHECK(moe::dispatchGemmPreload(t, dev, smCount));
    MKCCL_CHECK(moe::gemmCombinePreload(t, dev, smCount));
  }
  MKCCL_INFO("device %d: kernels loaded in %.0f ms", dev,
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return mkcclSuccess;
}

}  // namespace mkccl
