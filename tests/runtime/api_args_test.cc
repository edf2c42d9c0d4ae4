// Argument checks of every public call that can be made without a GPU: each wrong argument gets
// mkcclInvalidArgument (or InvalidUsage) and a message, never a crash.
#include <stdlib.h>
#include <string.h>
#include <set>
#include <string>
#include "ops/tuner/tuning.h"
#include "test_util.h"

namespace {

std::string lastErr() { return mkcclGetLastError(nullptr); }

TEST(Api, VersionAndErrorStrings) {
  int v = -1;
  EXPECT_EQ(mkcclSuccess, mkcclGetVersion(&v));
  EXPECT_EQ(MKCCL_VERSION_CODE, v);
  EXPECT_EQ(mkcclInvalidArgument, mkcclGetVersion(nullptr));
  EXPECT_NE(std::string::npos, lastErr().find("mkcclGetVersion"));
  std::set<std::string> seen;
  for (int r = 0; r < mkcclNumResults; ++r) {
    const char* s = mkcclGetErrorString((mkcclResult_t)r);
    ASSERT_NE(nullptr, s);
    EXPECT_GT(strlen(s), 3u);
    EXPECT_TRUE(seen.insert(s).second) << "duplicate string for result " << r;
  }
  EXPECT_STREQ("unknown result code", mkcclGetErrorString((mkcclResult_t)1234));
  EXPECT_STREQ("unknown result code", mkcclGetErrorString((mkcclResult_t)-1));
}

TEST(Api, UniqueIdAndInitArguments) {
  EXPECT_EQ(mkcclInvalidArgument, mkcclGetUniqueId(nullptr));
  mkcclUniqueId id;
  memset(&id, 0, sizeof(id));
  mkcclComm_t comm = (mkcclComm_t)0x1;
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(nullptr, 2, id, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(&comm, 0, id, 0));
  EXPECT_EQ(nullptr, comm) << "the output handle is cleared on failure";
  EXPECT_NE(std::string::npos, lastErr().find("nranks"));
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(&comm, -3, id, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(&comm, 2, id, -1));
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(&comm, 2, id, 2));
  EXPECT_NE(std::string::npos, lastErr().find("rank"));
  // An all-zero id and a random one are not ids.
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(&comm, 2, id, 0));
  srand((unsigned)mkccl::test::freshSeed());
  for (auto& c : id.internal) c = (char)rand();
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(&comm, 2, id, 0));
}

TEST(Api, CorruptedUniqueId) {
  mkcclUniqueId id;
  ASSERT_EQ(mkcclSuccess, mkcclGetUniqueId(&id)) << lastErr();
  const uint64_t seed = mkccl::test::freshSeed();
  for (int trial = 0; trial < 16; ++trial) {
    mkcclUniqueId bad = id;
    const size_t byte = (seed + trial * 7919) % 64;  // the meaningful part of the id
    bad.internal[byte] ^= (char)(1 << (trial % 8));
    mkcclComm_t comm = nullptr;
    EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRank(&comm, 2, bad, 0)) << "byte " << byte;
  }
}

TEST(Api, BadConfig) {
  mkcclUniqueId id;
  ASSERT_EQ(mkcclSuccess, mkcclGetUniqueId(&id)) << lastErr();
  mkcclComm_t comm = nullptr;
  mkcclConfig_t cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  EXPECT_NE(std::string::npos, lastErr().find("magic"));
  cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.version = 99;
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.size = 8;
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.blocking = 5;
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.timeoutMs = 0;
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  cfg = MKCCL_CONFIG_INITIALIZER;
  cfg.workspaceBytes = 1000;
  EXPECT_EQ(mkcclInvalidArgument, mkcclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  cfg = MKCCL_CONFIG_INITIALIZER;
  setenv("MKCCL_TIMEOUT_MS", "soon", 1);
  EXPECT_EQ(mkcclInvalidUsage, mkcclCommInitRankConfig(&comm, 1, id, 0, &cfg));
  EXPECT_NE(std::string::npos, lastErr().find("MKCCL_TIMEOUT_MS"));
  unsetenv("MKCCL_TIMEOUT_MS");
  EXPECT_EQ(nullptr, comm);
}

TEST(Api, HandlesThatAreNotCommunicators) {
  struct {
    char bytes[4096];
  } fake;
  memset(&fake, 0x5a, sizeof(fake));
  mkcclComm_t bogus = (mkcclComm_t)&fake;
  int x;
  mkcclResult_t r;
  for (mkcclComm_t c : {(mkcclComm_t) nullptr, bogus}) {
    EXPECT_EQ(mkcclInvalidArgument, mkcclCommDestroy(c));
    EXPECT_EQ(mkcclInvalidArgument, mkcclCommAbort(c));
    EXPECT_EQ(mkcclInvalidArgument, mkcclCommCount(c, &x));
    EXPECT_EQ(mkcclInvalidArgument, mkcclCommUserRank(c, &x));
    EXPECT_EQ(mkcclInvalidArgument, mkcclCommCuDevice(c, &x));
    EXPECT_EQ(mkcclInvalidArgument, mkcclCommGetAsyncError(c, &r));
    EXPECT_EQ(mkcclInvalidArgument, mkcclAllGather((void*)16, (void*)16, 4, mkcclFloat32, c, 0));
    EXPECT_EQ(mkcclInvalidArgument, mkcclReduceScatter((void*)16, (void*)16, 4, mkcclFloat32, mkcclSum, c, 0));
    EXPECT_EQ(mkcclInvalidArgument, mkcclAllReduce((void*)16, (void*)16, 4, mkcclFloat32, mkcclSum, c, 0));
    EXPECT_EQ(mkcclInvalidArgument, mkcclAllToAll((void*)16, (void*)32, 4, mkcclFloat32, c, 0));
    size_t counts[1] = {1}, displs[1] = {0};
    EXPECT_EQ(mkcclInvalidArgument, mkcclAllToAllv((void*)16, counts, displs, (void*)32, counts, displs, mkcclFloat32, c, 0));
    EXPECT_EQ(mkcclInvalidArgument, mkcclAllGatherGemm((void*)16, (void*)16, (void*)16, nullptr, 8, 8, 8, mkcclBfloat16, c, 0));
    EXPECT_EQ(mkcclInvalidArgument, mkcclGemmReduceScatter((void*)16, (void*)16, (void*)16, 8, 8, 8, mkcclBfloat16, c, 0));
    EXPECT_EQ(mkcclInvalidArgument, mkcclGemmAllReduce((void*)16, (void*)16, (void*)16, 8, 8, 8, mkcclBfloat16, c, 0));
  }
  EXPECT_NE(std::string::npos, lastErr().find("not a live communicator"));
}

TEST(Api, GemmArgumentsCheckedBeforeTheDevice) {
  const auto bf = mkcclBfloat16;
  void* p = (void*)256;
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 0, 8, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 8, 0, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 8, 8, 0, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 1ull << 31, 8, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 8, 8, 8, mkcclFloat32, bf, 0));
  EXPECT_NE(std::string::npos, lastErr().find("inType"));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 8, 8, 8, bf, mkcclInt32, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 8, 8, 12, bf, bf, 0));  // K pitch 24 bytes
  EXPECT_NE(std::string::npos, lastErr().find("16 bytes"));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(p, p, p, 8, 12, 8, bf, bf, 0));  // N pitch 24 bytes
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm(nullptr, p, p, 8, 8, 8, bf, bf, 0));
  EXPECT_EQ(mkcclInvalidArgument, mkcclGemm((void*)258, p, p, 8, 8, 8, bf, bf, 0));
  EXPECT_NE(std::string::npos, lastErr().find("aligned"));
}

// The tuner's MoE keys (CTA splits of the fused calls) parse without a device: a count in 0..1024 is
// taken, anything else is mkcclInvalidUsage naming the key. Process-wide; reset at the end.
TEST(Api, MoeCtaTuningKeys) {
  for (const char* key : {"moe.dispatch_ctas", "moe.combine_ctas"}) {
    const std::string k = key;
    for (const char* v : {"0", "1", "4", "1024"})
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, (k + "=" + v).c_str())) << k << "=" << v << ": " << lastErr();
    for (const char* v : {"-1", "1025", "many", ""}) {
      EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, (k + "=" + v).c_str())) << k << "=" << v;
      EXPECT_NE(std::string::npos, lastErr().find(key)) << lastErr();
    }
  }
  EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, "moe.dispatch_ctas=3;moe.combine_ctas=5"));
  EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, nullptr));
}

// gemm_rs.net / gemm_ar.net (the route across nodes: the fused kernel, sequential, or auto, the
// default: fused unless the GEMM is one wave)
// parse without a device; anything else is mkcclInvalidUsage naming the key. Process-wide; reset
// at the end.
TEST(Api, GemmReduceNetTuningKeys) {
  const mkccl::Tuning defaults;
  EXPECT_EQ(2, defaults.gemmRs.net) << "auto by default across nodes (fused unless one wave)";
  EXPECT_EQ(2, defaults.gemmAr.net) << "auto by default across nodes (fused unless one wave)";
  for (const char* key : {"gemm_rs.net", "gemm_ar.net"}) {
    const std::string k = key;
    for (const char* v : {"sequential", "fused", "auto"})
      EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, (k + "=" + v).c_str())) << k << "=" << v << ": " << lastErr();
    for (const char* v : {"on", "1x", ""}) {
      EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, (k + "=" + v).c_str())) << k << "=" << v;
      EXPECT_NE(std::string::npos, lastErr().find(key)) << lastErr();
    }
  }
  EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, "gemm_rs.net=fused;gemm_ar.net=sequential"));
  EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, nullptr));
}

// moe.combine_split (mkcclMoeGemmCombine's split combine): off or on; anything else is
// mkcclInvalidUsage naming the key.
TEST(Api, MoeCombineSplitTuningKey) {
  for (const char* v : {"off", "on"})
    EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, (std::string("moe.combine_split=") + v).c_str()))
        << v << ": " << lastErr();
  for (const char* v : {"auto", "1x", ""}) {
    EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, (std::string("moe.combine_split=") + v).c_str())) << v;
    EXPECT_NE(std::string::npos, lastErr().find("moe.combine_split")) << lastErr();
  }
  EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, nullptr));
}

// moe.fused_route (how mkcclMoeDispatchGemm / mkcclMoeGemmCombine run): auto, overlap or
// sequential; anything else is mkcclInvalidUsage naming the key.
TEST(Api, MoeFusedRouteTuningKey) {
  for (const char* v : {"auto", "overlap", "sequential"})
    EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, (std::string("moe.fused_route=") + v).c_str()))
        << v << ": " << lastErr();
  for (const char* v : {"fused", "on", ""}) {
    EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, (std::string("moe.fused_route=") + v).c_str())) << v;
    EXPECT_NE(std::string::npos, lastErr().find("moe.fused_route")) << lastErr();
  }
  EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, nullptr));
}

// ag_gemm.net_piece_kib (across nodes, the least piece of a shard on the network, KiB; 0 the
// default): whole numbers from 0; anything else is mkcclInvalidUsage naming the key.
TEST(Api, AgGemmNetPieceTuningKey) {
  for (const char* v : {"0", "64", "128", "4096"})
    EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, (std::string("ag_gemm.net_piece_kib=") + v).c_str()))
        << v << ": " << lastErr();
  for (const char* v : {"-1", "x", "", "auto"}) {
    EXPECT_EQ(mkcclInvalidUsage, mkcclSetTuning(nullptr, (std::string("ag_gemm.net_piece_kib=") + v).c_str())) << v;
    EXPECT_NE(std::string::npos, lastErr().find("ag_gemm.net_piece_kib")) << lastErr();
  }
  EXPECT_EQ(mkcclSuccess, mkcclSetTuning(nullptr, nullptr));
}

}  // namespace
