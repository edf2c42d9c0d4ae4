// Inputs and host references of the inter-node collective tests (see net_coll_check.h).
#include "net_coll_check.h"
#include <string.h>
#include <cmath>
#include "test_util.h"

namespace mkccl {
namespace test {
namespace netcheck {
namespace {

bool isFloat(mkcclDataType_t t) {
  return t == mkcclFloat16 || t == mkcclBfloat16 || t == mkcclFloat32 || t == mkcclFloat64;
}

// Relative to the largest reference magnitude: bf16/fp16 results are rounded twice across nodes
// (the node's partial, then the final value), each within half an ulp.
double tolerance(mkcclDataType_t t) {
  switch (t) {
    case mkcclBfloat16: return 8e-3;
    case mkcclFloat16: return 1e-3;
    case mkcclFloat32: return 1e-5;
    case mkcclFloat64: return 1e-12;
    default: return 0;
  }
}

double asDouble(const Bytes& b, size_t i, mkcclDataType_t t) {
  if (t == mkcclFloat64) {
    double v;
    memcpy(&v, b.data() + i * 8, 8);
    return v;
  }
  return toFloat(b.data(), i, t);
}

template <typename T>
std::string checkInt(const Bytes& got, size_t gotFirst, const std::vector<Bytes>& in, size_t inFirst, size_t count,
                     mkcclRedOp_t op) {
  const int n = (int)in.size();
  for (size_t i = 0; i < count; ++i) {
    T acc;
    memcpy(&acc, in[0].data() + (inFirst + i) * sizeof(T), sizeof(T));
    for (int q = 1; q < n; ++q) {
      T x;
      memcpy(&x, in[q].data() + (inFirst + i) * sizeof(T), sizeof(T));
      switch (op) {
        case mkcclProd: acc = (T)((uint64_t)acc * (uint64_t)x); break;
        case mkcclMax: acc = x > acc ? x : acc; break;
        case mkcclMin: acc = x < acc ? x : acc; break;
        default: acc = (T)((uint64_t)acc + (uint64_t)x); break;
      }
    }
    if (op == mkcclAvg) acc = (T)(acc / (T)n);
    T g;
    memcpy(&g, got.data() + (gotFirst + i) * sizeof(T), sizeof(T));
    if (g != acc)
      return "element " + std::to_string(i) + ": got " + std::to_string((long long)g) + ", want " +
             std::to_string((long long)acc);
  }
  return "";
}

}  // namespace

std::vector<Bytes> allInputs(size_t count, mkcclDataType_t t, uint64_t seed, int nranks, cudaStream_t s) {
  std::vector<Bytes> all;
  for (int q = 0; q < nranks; ++q) all.push_back(inputOf(count, t, seed, q, s));
  return all;
}

std::string checkReduced(const Bytes& got, size_t gotFirst, const std::vector<Bytes>& in, size_t inFirst, size_t count,
                         mkcclDataType_t t, mkcclRedOp_t op) {
  if (!isFloat(t)) {
    switch (t) {
      case mkcclInt8: return checkInt<int8_t>(got, gotFirst, in, inFirst, count, op);
      case mkcclUint8: return checkInt<uint8_t>(got, gotFirst, in, inFirst, count, op);
      case mkcclInt32: return checkInt<int32_t>(got, gotFirst, in, inFirst, count, op);
      case mkcclUint32: return checkInt<uint32_t>(got, gotFirst, in, inFirst, count, op);
      case mkcclInt64: return checkInt<int64_t>(got, gotFirst, in, inFirst, count, op);
      default: return checkInt<uint64_t>(got, gotFirst, in, inFirst, count, op);
    }
  }
  const int n = (int)in.size();
  std::vector<double> g(count), ref(count);
  // Rounding errors of the nodes' partials scale with the summands, not with the sum, which can
  // cancel to far below them (a 4-rank bf16 sum of count 1 failed a tolerance relative to the sum).
  double absScale = 0, refScale = 0;
  for (size_t i = 0; i < count; ++i) {
    double acc = asDouble(in[0], inFirst + i, t), abs = std::fabs(acc);
    for (int q = 1; q < n; ++q) {
      const double x = asDouble(in[q], inFirst + i, t);
      abs += std::fabs(x);
      switch (op) {
        case mkcclProd: acc *= x; break;
        case mkcclMax: acc = std::fmax(acc, x); break;
        case mkcclMin: acc = std::fmin(acc, x); break;
        default: acc += x; break;
      }
    }
    ref[i] = op == mkcclAvg ? acc / n : acc;
    g[i] = asDouble(got, gotFirst + i, t);
    absScale = std::fmax(absScale, op == mkcclAvg ? abs / n : abs);
    refScale = std::fmax(refScale, std::fabs(ref[i]));
  }
  // compare() measures errors against max|ref|; sums and averages get the summands' scale.
  double tol = tolerance(t);
  if (op == mkcclSum || op == mkcclAvg) tol *= std::fmax(1.0, absScale / std::fmax(refScale, 1e-30));
  const ErrStats st = compare(g, ref, tol);
  if (st.wrong == 0) return "";
  const size_t w = st.firstWrong;
  return std::to_string(st.wrong) + " of " + std::to_string(count) + " elements wrong (max rel err " +
         std::to_string(st.maxRelErr) + "); first at " + std::to_string(w) + ": got " + std::to_string(g[w]) +
         ", want " + std::to_string(ref[w]);
}

}  // namespace netcheck
}  // namespace test
}  // namespace mkccl
