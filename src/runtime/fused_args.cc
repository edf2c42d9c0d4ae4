// Checks and defaults of mkcclFusedGemmArgs_t (fused_args.h).
#include "runtime/fused_args.h"
#include <stdint.h>
#include <stdio.h>
#include "base/check.h"
#include "runtime/arg_checks.h"

namespace mkccl {
namespace {

bool isIn(mkcclDataType_t t) { return t == mkcclBfloat16 || t == mkcclFloat16; }
bool isOut(mkcclDataType_t t) { return isIn(t) || t == mkcclFloat32; }
size_t bytesOf(mkcclDataType_t t) { return t == mkcclFloat32 ? 4 : 2; }

// A pitch: 0 takes `width`; else at least the width, and a multiple of 16 bytes (TMA).
mkcclResult_t pitch(const char* op, const char* what, size_t given, size_t width, size_t es, size_t* out) {
  const size_t ld = given ? given : width;
  ARG_CHECK(ld >= width, "%s: %s = %zu is below the row's width (%zu elements)", op, what, ld, width);
  ARG_CHECK((ld * es) % 16 == 0,
            "%s: %s = %zu elements (%zu bytes): a row pitch must be a multiple of 16 bytes (TMA)", op, what, ld,
            ld * es);
  ARG_CHECK(ld <= (size_t(1) << 40), "%s: %s = %zu is too large", op, what, ld);
  *out = ld;
  return mkcclSuccess;
}

mkcclResult_t checkAligned(const char* op, const char* what, const void* p, size_t align) {
  ARG_CHECK((reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0, "%s: %s = %p must be %zu-byte aligned", op, what, p,
            align);
  return mkcclSuccess;
}

}  // namespace

mkcclResult_t fusedArgsResolve(const char* op, FusedKind kind, int nranks, int rank, const mkcclFusedGemmArgs_t* in,
                               FusedArgs* out) {
  ARG_CHECK(in != nullptr, "%s: args is NULL", op);
  ARG_CHECK(in->magic == MKCCL_FUSED_GEMM_ARGS_MAGIC,
            "%s: args->magic is 0x%x: initialize the struct with MKCCL_FUSED_GEMM_ARGS_INITIALIZER", op, in->magic);
  ARG_CHECK(in->version == MKCCL_FUSED_GEMM_ARGS_VERSION && in->size == sizeof(mkcclFusedGemmArgs_t),
            "%s: args version %u, size %zu: this library knows version %u, size %zu", op, in->version, in->size,
            (unsigned)MKCCL_FUSED_GEMM_ARGS_VERSION, sizeof(mkcclFusedGemmArgs_t));
  ARG_CHECK(nranks >= 1 && rank >= 0 && rank < nranks, "%s: rank %d of %d", op, rank, nranks);
  const bool ag = kind == FusedKind::AllGatherGemm;
  FusedArgs r;
  r.A = in->A;
  r.M = in->M;
  r.K = in->K;
  r.inType = in->inType;
  r.outType = in->outType == mkcclNumTypes ? in->inType : in->outType;
  r.biasType = in->biasType == mkcclNumTypes ? in->inType : in->biasType;
  r.gatheredA = in->gatheredA;
  r.numWeights = in->numWeights;

  ARG_CHECK(isIn(r.inType), "%s: inType must be mkcclBfloat16 or mkcclFloat16", op);
  ARG_CHECK(isOut(r.outType), "%s: outType must be mkcclBfloat16, mkcclFloat16 or mkcclFloat32 (mkcclNumTypes: inType)",
            op);
  ARG_CHECK(isOut(r.biasType),
            "%s: biasType must be mkcclBfloat16, mkcclFloat16 or mkcclFloat32 (mkcclNumTypes: inType)", op);
  ARG_CHECK(r.M >= 1 && r.K >= 1 && r.M <= kMaxTmaDim && r.K <= kMaxTmaDim,
            "%s: M=%zu K=%zu: each must be in [1, 2^31)", op, r.M, r.K);
  ARG_CHECK(kind == FusedKind::GemmAllReduce || r.M % size_t(nranks) == 0,
            "%s: M=%zu must be divisible by the number of ranks (%d)", op, r.M, nranks);
  ARG_CHECK(r.K % 8 == 0, "%s: K=%zu must be a multiple of 8 (the %s operand's rows are 16-byte multiples)", op, r.K,
            ag ? "gathered" : "reduced");
  ARG_CHECK(r.numWeights >= 1 && r.numWeights <= (ag ? MKCCL_FUSED_MAX_WEIGHTS : 1),
            "%s: numWeights=%d: expected %s", op, r.numWeights,
            ag ? "1..MKCCL_FUSED_MAX_WEIGHTS (8)" : "1 (several weights share one gathered A: AllGather+GEMM only)");
  ARG_CHECK(ag || r.gatheredA == nullptr, "%s: gatheredA is for AllGather+GEMM only: pass NULL", op);
  ARG_CHECK(r.A != nullptr, "%s: A is NULL", op);
  MKCCL_CHECK(pitch(op, "lda", in->lda, r.K, 2, &r.lda));
  MKCCL_CHECK(checkAligned(op, "A", r.A, 16));
  r.aRows = ag ? r.M / size_t(nranks) : r.M;
  r.cRows = kind == FusedKind::GemmReduceScatter ? r.M / size_t(nranks) : r.M;
  const size_t oes = bytesOf(r.outType), bes = bytesOf(r.biasType);
  const size_t aSpan = matrixSpan(r.aRows, r.K, r.lda, 2);
  for (int i = 0; i < r.numWeights; ++i) {
    mkcclFusedWeight_t w = in->weights[i];
    char name[32];
    ARG_CHECK(w.W != nullptr && w.C != nullptr, "%s: weights[%d]: W and C must not be NULL", op, i);
    ARG_CHECK(w.N >= 1 && w.N <= kMaxTmaDim, "%s: weights[%d].N=%zu: must be in [1, 2^31)", op, i, w.N);
    ARG_CHECK(ag || w.N % 8 == 0,
              "%s: N=%zu must be a multiple of 8 (the partial sums travel in 16-byte vectors)", op, w.N);
    // TMA stores a row's last 16-byte piece whole: a row of C that ends inside one would have its
    // padding (another tensor's columns, with ldc > N) overwritten.
    ARG_CHECK((w.N * oes) % 16 == 0,
              "%s: weights[%d].N=%zu: a row of C (%zu bytes of outType) must be a multiple of 16 bytes (TMA "
              "stores whole 16-byte pieces)",
              op, i, w.N, w.N * oes);
    snprintf(name, sizeof(name), "weights[%d].ldw", i);
    MKCCL_CHECK(pitch(op, name, w.ldw, r.K, 2, &w.ldw));
    snprintf(name, sizeof(name), "weights[%d].ldc", i);
    MKCCL_CHECK(pitch(op, name, w.ldc, w.N, oes, &w.ldc));
    snprintf(name, sizeof(name), "weights[%d].W", i);
    MKCCL_CHECK(checkAligned(op, name, w.W, 16));
    snprintf(name, sizeof(name), "weights[%d].C", i);
    MKCCL_CHECK(checkAligned(op, name, w.C, 16));
    if (w.bias) {
      snprintf(name, sizeof(name), "weights[%d].bias", i);
      MKCCL_CHECK(checkAligned(op, name, w.bias, bes));
    }
    r.w[i] = w;
  }
  // No output may overlap an input or another output (inputs may share memory: one A, or weights
  // stacked in one tensor).
  for (int i = 0; i < r.numWeights; ++i) {
    const mkcclFusedWeight_t& w = r.w[i];
    const size_t cSpan = matrixSpan(r.cRows, w.N, w.ldc, oes);
    ARG_CHECK(!rangesOverlap(w.C, cSpan, r.A, aSpan), "%s: weights[%d].C overlaps A", op, i);
    ARG_CHECK(!rangesOverlap(w.C, cSpan, r.gatheredA, r.M * r.K * 2), "%s: weights[%d].C overlaps gatheredA", op, i);
    for (int j = 0; j < r.numWeights; ++j) {
      const mkcclFusedWeight_t& v = r.w[j];
      ARG_CHECK(!rangesOverlap(w.C, cSpan, v.W, matrixSpan(v.N, r.K, v.ldw, 2)),
                "%s: weights[%d].C overlaps weights[%d].W", op, i, j);
      ARG_CHECK(!rangesOverlap(w.C, cSpan, v.bias, v.N * bes), "%s: weights[%d].C overlaps weights[%d].bias", op, i, j);
      if (j != i)
        ARG_CHECK(!rangesOverlap(w.C, cSpan, v.C, matrixSpan(r.cRows, v.N, v.ldc, oes)),
                  "%s: weights[%d].C overlaps weights[%d].C", op, i, j);
    }
    ARG_CHECK(!rangesOverlap(r.gatheredA, r.M * r.K * 2, w.W, matrixSpan(w.N, r.K, w.ldw, 2)),
              "%s: gatheredA overlaps weights[%d].W", op, i);
    ARG_CHECK(!rangesOverlap(r.gatheredA, r.M * r.K * 2, w.bias, w.N * bes), "%s: gatheredA overlaps weights[%d].bias",
              op, i);
  }
  if (r.gatheredA) {
    MKCCL_CHECK(checkAligned(op, "gatheredA", r.gatheredA, 16));
    // In place: A is this rank's block of gatheredA (then lda must be K).
    const bool inPlace = r.lda == r.K && static_cast<const char*>(r.A) ==
                                             static_cast<const char*>(r.gatheredA) + size_t(rank) * r.aRows * r.K * 2;
    ARG_CHECK(inPlace || !rangesOverlap(r.gatheredA, r.M * r.K * 2, r.A, aSpan),
              "%s: gatheredA overlaps A without A being this rank's block of it (lda = K)", op);
  }
  *out = r;
  return mkcclSuccess;
}

}  // namespace mkccl
