// mkcclAttention on one GPU against an fp32 reference kernel (attn_ref.cu): bf16 and fp16, head
// dims 64 and 128, causal or not, GQA ratios 1 / 4 / 8, odd and unequal lengths, batches, with
// and without LSE, every kernel variant, calls back to back, and arguments the API refuses.
#include <math.h>
#include <stdlib.h>
#include <memory>
#include <string>
#include <vector>
#include "attn_ref.h"
#include "test_util.h"

using namespace mkccl::test;

namespace {

struct Case {
  int B, sq, skv, hq, hkv, d, causal;
  mkcclDataType_t t;
  bool lse = true;
};

std::string name(const Case& c) {
  return "B " + std::to_string(c.B) + " sq " + std::to_string(c.sq) + " skv " + std::to_string(c.skv) + " h " +
         std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " d " + std::to_string(c.d) +
         (c.causal ? " causal" : "") + (c.t == mkcclBfloat16 ? " bf16" : " fp16") + (c.lse ? "" : " no-lse");
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { EXPECT_EQ(cudaSuccess, cudaMalloc(&p, bytes ? bytes : 16)); }
  ~DevBuf() { cudaFree(p); }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// One call's buffers, inputs and reference.
struct AttnRun {
  Case c;
  size_t qN, kvN, lseN;
  std::unique_ptr<DevBuf> Q, K, V, O, lse, refO, refLse;
  explicit AttnRun(const Case& cc) : c(cc) {
    qN = static_cast<size_t>(c.B) * c.sq * c.hq * c.d;
    kvN = static_cast<size_t>(c.B) * c.skv * c.hkv * c.d;
    lseN = static_cast<size_t>(c.B) * c.hq * c.sq;
    Q.reset(new DevBuf(qN * 2));
    K.reset(new DevBuf(kvN * 2));
    V.reset(new DevBuf(kvN * 2));
    O.reset(new DevBuf(qN * 2));
    lse.reset(new DevBuf(lseN * 4));
    refO.reset(new DevBuf(qN * 4));
    refLse.reset(new DevBuf(lseN * 4));
  }
  float scale() const { return 1.0f / sqrtf(static_cast<float>(c.d)); }
  void fill(uint64_t seed, cudaStream_t s) {
    fillRandom(Q->p, qN, c.t, seed, 1.0f, s);
    fillRandom(K->p, kvN, c.t, seed + 1, 1.0f, s);
    fillRandom(V->p, kvN, c.t, seed + 2, 1.0f, s);
    poison(O->p, qN * 2, s);
    poison(lse->p, lseN * 4, s);
  }
  mkcclResult_t call(cudaStream_t s) {
    return mkcclAttention(Q->p, K->p, V->p, O->p, c.lse ? lse->as<float>() : nullptr, c.B, c.sq, c.skv, c.hq, c.hkv,
                          c.d, scale(), c.causal, c.t, s);
  }
  void reference(cudaStream_t s) {
    refAttention(Q->p, K->p, V->p, refO->as<float>(), refLse->as<float>(), c.B, c.sq, c.skv, c.hq, c.hkv, c.d,
                 scale(), c.causal, c.skv - c.sq, c.t, s);
  }
  AttnErr check() {
    std::vector<float> ro(qN), rl(lseN), gl;
    EXPECT_EQ(cudaSuccess, cudaMemcpy(ro.data(), refO->p, qN * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(cudaSuccess, cudaMemcpy(rl.data(), refLse->p, lseN * 4, cudaMemcpyDeviceToHost));
    if (c.lse) {
      gl.resize(lseN);
      EXPECT_EQ(cudaSuccess, cudaMemcpy(gl.data(), lse->p, lseN * 4, cudaMemcpyDeviceToHost));
    }
    return compareAttention(toHostDouble(O->p, qN, c.t), ro, gl, rl, 2e-2, 2e-3);
  }
};

void expectGood(const AttnErr& e, const std::string& what) {
  EXPECT_EQ(0u, e.oWrong) << what << ": " << e.first << " (max rel err " << e.oRel << ")";
  EXPECT_EQ(0u, e.lseWrong) << what << ": " << e.first << " (max LSE err " << e.lseAbs << ")";
}

void runCases(const std::vector<Case>& cases) {
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t i = 0; i < cases.size(); ++i) {
    AttnRun r(cases[i]);
    r.fill(seed + 10 * i, s);
    ASSERT_EQ(mkcclSuccess, r.call(s)) << name(r.c) << ": " << mkcclGetLastError(nullptr);
    r.reference(s);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s)) << name(r.c);
    const AttnErr e = r.check();
    expectGood(e, name(r.c));
    printf("  %-60s max rel err %.2e, LSE %.2e\n", name(r.c).c_str(), e.oRel, e.lseAbs);
  }
  cudaStreamDestroy(s);
}

// The process's tuner overrides select the kernel variant (mkcclAttention has no communicator).
class ScopedVariant {
 public:
  explicit ScopedVariant(const char* v) {
    const std::string t = std::string("attention.variant=") + v;
    EXPECT_EQ(mkcclSetTuning(nullptr, t.c_str()), mkcclSuccess) << mkcclGetLastError(nullptr);
  }
  ~ScopedVariant() { mkcclSetTuning(nullptr, ""); }
};

TEST(Attention, HeadDimsTypesMasks) {
  MKCCL_REQUIRE_GPUS(1);
  std::vector<Case> cases;
  for (mkcclDataType_t t : {mkcclBfloat16, mkcclFloat16})
    for (int d : {64, 128})
      for (int causal : {0, 1}) cases.push_back(Case{1, 1000, 1000, 8, 2, d, causal, t});
  runCases(cases);
}

TEST(Attention, GqaRatios) {
  MKCCL_REQUIRE_GPUS(1);
  std::vector<Case> cases;
  for (int g : {1, 4, 8})
    for (int causal : {0, 1}) cases.push_back(Case{2, 384, 384, 8, 8 / g, 128, causal, mkcclBfloat16});
  runCases(cases);
}

TEST(Attention, OddAndUnequalLengths) {
  MKCCL_REQUIRE_GPUS(1);
  std::vector<Case> cases;
  const std::pair<int, int> lens[] = {{1, 1},     {1, 300},   {7, 7},     {127, 127}, {129, 129},
                                      {255, 257}, {300, 77},  {77, 300},  {1000, 130}, {130, 1000}};
  for (auto [sq, skv] : lens)
    for (int causal : {0, 1}) cases.push_back(Case{2, sq, skv, 4, 2, 128, causal, mkcclBfloat16});
  cases.push_back(Case{3, 333, 555, 4, 1, 64, 1, mkcclFloat16});
  cases.push_back(Case{1, 200, 200, 2, 2, 128, 1, mkcclBfloat16, false});
  runCases(cases);
}

TEST(Attention, LongerSequences) {
  MKCCL_REQUIRE_GPUS(1);
  runCases({Case{1, 4096, 4096, 8, 2, 128, 1, mkcclBfloat16}, Case{1, 4096, 4096, 4, 4, 128, 0, mkcclBfloat16},
            Case{1, 3000, 5000, 4, 1, 64, 1, mkcclFloat16}});
}

TEST(Attention, EveryVariant) {
  MKCCL_REQUIRE_GPUS(1);
  for (const char* v : {"simple", "overlap", "fast"}) {
    SCOPED_TRACE(v);
    ScopedVariant sv(v);
    runCases({Case{1, 777, 777, 4, 2, 128, 1, mkcclBfloat16}, Case{2, 300, 900, 4, 4, 64, 0, mkcclFloat16},
              Case{1, 1024, 1024, 8, 1, 128, 0, mkcclBfloat16}});
  }
}

// Many calls queued on one stream without a sync between them, shapes changing; every output checked.
TEST(Attention, BackToBack) {
  MKCCL_REQUIRE_GPUS(1);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<std::unique_ptr<AttnRun>> runs;
  for (int i = 0; i < 24; ++i) {
    const Case c{1 + i % 2, 100 + 37 * i, 100 + 53 * (i % 5), 4, i % 3 == 0 ? 4 : 1, i % 4 == 0 ? 64 : 128, i % 2,
                 i % 3 == 2 ? mkcclFloat16 : mkcclBfloat16};
    runs.emplace_back(new AttnRun(c));
    runs.back()->fill(seed + 10 * i, s);
    ASSERT_EQ(mkcclSuccess, runs.back()->call(s)) << mkcclGetLastError(nullptr);
  }
  for (auto& r : runs) r->reference(s);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  for (auto& r : runs) expectGood(r->check(), name(r->c));
  cudaStreamDestroy(s);
}

// Captured into a CUDA graph and replayed (after a first call loaded the kernel): the same O.
TEST(Attention, GraphCapture) {
  MKCCL_REQUIRE_GPUS(1);
  cudaStream_t s;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  AttnRun r(Case{1, 1000, 1000, 8, 2, 128, 1, mkcclBfloat16});
  r.fill(freshSeed(), s);
  ASSERT_EQ(mkcclSuccess, r.call(s)) << mkcclGetLastError(nullptr);
  r.reference(s);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  poison(r.O->p, r.qN * 2, s);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const mkcclResult_t res = r.call(s);
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &g));
  ASSERT_EQ(mkcclSuccess, res) << mkcclGetLastError(nullptr);
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&ge, g, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(ge, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  expectGood(r.check(), name(r.c) + " (graph)");
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

TEST(Attention, RefusedArguments) {
  MKCCL_REQUIRE_GPUS(1);
  AttnRun r(Case{1, 256, 256, 4, 2, 128, 0, mkcclBfloat16});
  const float sc = r.scale();
  auto* lse = r.lse->as<float>();
  // Misaligned, host memory, overlapping output, a stream of no device.
  EXPECT_EQ(mkcclInvalidArgument, mkcclAttention(r.Q->as<char>() + 2, r.K->p, r.V->p, r.O->p, lse, 1, 255, 256, 4, 2,
                                                 128, sc, 0, mkcclBfloat16, 0));
  std::vector<char> host(r.qN * 2);
  EXPECT_EQ(mkcclInvalidArgument,
            mkcclAttention(host.data(), r.K->p, r.V->p, r.O->p, lse, 1, 256, 256, 4, 2, 128, sc, 0, mkcclBfloat16, 0));
  EXPECT_EQ(mkcclInvalidArgument,
            mkcclAttention(r.Q->p, r.K->p, r.V->p, r.Q->p, lse, 1, 256, 256, 4, 2, 128, sc, 0, mkcclBfloat16, 0));
  EXPECT_EQ(mkcclInvalidArgument,
            mkcclAttention(r.Q->p, r.K->p, r.V->p, r.O->p, reinterpret_cast<float*>(r.O->p), 1, 256, 256, 4, 2, 128, sc,
                           0, mkcclBfloat16, 0));
  // Larger than the allocations.
  EXPECT_EQ(mkcclInvalidArgument,
            mkcclAttention(r.Q->p, r.K->p, r.V->p, r.O->p, lse, 2, 256, 256, 4, 2, 128, sc, 0, mkcclBfloat16, 0));
  // Still usable after the refusals.
  r.fill(freshSeed(), 0);
  ASSERT_EQ(mkcclSuccess, r.call(0)) << mkcclGetLastError(nullptr);
  r.reference(0);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  expectGood(r.check(), name(r.c));
}

}  // namespace
