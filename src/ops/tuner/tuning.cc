// The tuner's override string (tuning.h): one table of keys, one parser (base/env.h's).
#include "ops/tuner/tuning.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <functional>
#include <mutex>
#include <string>
#include <vector>
#include "base/check.h"
#include "base/env.h"

namespace mkccl {
namespace {

struct Key {
  std::string name;
  std::vector<const char*> choices;  // empty: a number in [lo, hi]
  long long lo, hi;
  std::function<void(Tuning&, long long)> set;
  std::function<long long(const Tuning&)> get;
};

// The same keys under gemm_rs. and gemm_ar.
void addReduceKeys(std::vector<Key>& k, const char* prefix, Tuning::Reduce Tuning::*r, bool allReduce) {
  auto name = [prefix](const char* key) { return std::string(prefix) + key; };
  std::vector<const char*> plans = {"auto", "fused", "sequential"};
  if (allReduce) plans.push_back("rs_ag");
  k.push_back({name("plan"), plans, 0, 0, [r](Tuning& t, long long v) { (t.*r).plan = int(v); },
               [r](const Tuning& t) { return (long long)(t.*r).plan; }});
  k.push_back({name("push"), {"bulk", "team", "ce"}, 0, 0, [r](Tuning& t, long long v) { (t.*r).push = int(v); },
               [r](const Tuning& t) { return (long long)(t.*r).push; }});
  k.push_back({name("ce_batch"), {}, 1, 1 << 20, [r](Tuning& t, long long v) { (t.*r).ceBatch = int(v); },
               [r](const Tuning& t) { return (long long)(t.*r).ceBatch; }});
  k.push_back({name("ce_streams"), {}, 1, kMaxLocalRanks, [r](Tuning& t, long long v) { (t.*r).ceStreams = int(v); },
               [r](const Tuning& t) { return (long long)(t.*r).ceStreams; }});
  k.push_back({name("reduce"), {"direct", "ring"}, 0, 0, [r](Tuning& t, long long v) { (t.*r).ring = int(v); },
               [r](const Tuning& t) { return (long long)(t.*r).ring; }});
  k.push_back({name("order"), {"phases", "interleaved"}, 0, 0, [r](Tuning& t, long long v) { (t.*r).order = int(v); },
               [r](const Tuning& t) { return (long long)(t.*r).order; }});
  k.push_back({name("publish"), {"late", "early"}, 0, 0, [r](Tuning& t, long long v) { (t.*r).publish = int(v); },
               [r](const Tuning& t) { return (long long)(t.*r).publish; }});
}

const std::vector<Key>& keys() {
  static const std::vector<Key> k = [] {
    std::vector<Key> v;
    // Values in order: the named configurations (their enum values), then the plain GEMM's other
    // widths (GemmVariant::kNarrow on).
    std::vector<const char*> variants;  // gemmVariantName: static strings
    constexpr int kNamed = static_cast<int>(GemmVariant::Skinny) + 1;
    for (int i = 0; i < kNamed + 2 * kGemmNarrowCount; ++i)
      variants.push_back(gemmVariantName(static_cast<GemmVariant>(
          i < kNamed ? i : static_cast<int>(GemmVariant::kNarrow) + i - kNamed)));
    v.push_back({"gemm.variant", variants, 0, 0,
                 [](Tuning& t, long long x) {
                   t.gemm.variant = static_cast<GemmVariant>(
                       x < kNamed ? x : static_cast<long long>(GemmVariant::kNarrow) + x - kNamed);
                 },
                 [](const Tuning& t) {
                   const long long x = (long long)t.gemm.variant;
                   return x < kNamed ? x : x - static_cast<long long>(GemmVariant::kNarrow) + kNamed;
                 }});
    v.push_back({"gemm.split_k", {}, 0, 16, [](Tuning& t, long long x) { t.gemm.splitK = int(x); },
                 [](const Tuning& t) { return (long long)t.gemm.splitK; }});
    v.push_back({"gemm.stream_k", {"auto", "off", "on", "split"}, 0, 0,
                 [](Tuning& t, long long x) { t.gemm.streamK = int(x); },
                 [](const Tuning& t) { return (long long)t.gemm.streamK; }});
    v.push_back({"gemm.pdl", {"on", "off"}, 0, 0, [](Tuning& t, long long x) { t.gemm.pdl = int(x); },
                 [](const Tuning& t) { return (long long)t.gemm.pdl; }});
    v.push_back({"gemm.cluster_n", {"auto", "1", "2", "4"}, 0, 0,
                 [](Tuning& t, long long x) { t.gemm.clusterN = x == 0 ? 0 : 1 << (x - 1); },
                 [](const Tuning& t) { return (long long)(t.gemm.clusterN == 0 ? 0 : t.gemm.clusterN == 1 ? 1 : t.gemm.clusterN == 2 ? 2 : 3); }});
    v.push_back({"gemm.pack_k", {"auto", "off", "on"}, 0, 0, [](Tuning& t, long long x) { t.gemm.packK = int(x); },
                 [](const Tuning& t) { return (long long)t.gemm.packK; }});
    v.push_back({"ag_gemm.plan", {"auto", "fused", "sequential", "ce"}, 0, 0,
                 [](Tuning& t, long long x) { t.agGemm.plan = int(x); },
                 [](const Tuning& t) { return (long long)t.agGemm.plan; }});
    v.push_back({"ag_gemm.comm_ctas", {}, 0, 1024, [](Tuning& t, long long x) { t.agGemm.commCtas = int(x); },
                 [](const Tuning& t) { return (long long)t.agGemm.commCtas; }});
    // In KiB already: a K/M/G suffix would multiply a second time.
    v.push_back({"ag_gemm.ce_group_kib", {}, 1, 1ll << 30,
                 [](Tuning& t, long long x) { t.agGemm.ceGroupBytes = int64_t(x) << 10; },
                 [](const Tuning& t) { return (long long)(t.agGemm.ceGroupBytes >> 10); }});
    v.push_back({"ag_gemm.ce", {"direct", "ring"}, 0, 0, [](Tuning& t, long long x) { t.agGemm.ceRing = int(x); },
                 [](const Tuning& t) { return (long long)t.agGemm.ceRing; }});
    // In KiB already, as ce_group_kib; 0: the default piece (kMinNetPieceBytes).
    v.push_back({"ag_gemm.net_piece_kib", {}, 0, 1ll << 30,
                 [](Tuning& t, long long x) { t.agGemm.netPieceBytes = int64_t(x) << 10; },
                 [](const Tuning& t) { return (long long)(t.agGemm.netPieceBytes >> 10); }});
    v.push_back({"ag_gemm.net", {"fused", "auto", "split"}, 0, 0, [](Tuning& t, long long x) { t.agGemm.net = int(x); },
                 [](const Tuning& t) { return (long long)t.agGemm.net; }});
    v.push_back({"ag_gemm.net_pieces", {}, 0, 64, [](Tuning& t, long long x) { t.agGemm.netPieces = int(x); },
                 [](const Tuning& t) { return (long long)t.agGemm.netPieces; }});
    addReduceKeys(v, "gemm_rs.", &Tuning::gemmRs, false);
    v.push_back({"gemm_rs.net", {"sequential", "fused", "auto", "split"}, 0, 0, [](Tuning& t, long long x) { t.gemmRs.net = int(x); },
                 [](const Tuning& t) { return (long long)t.gemmRs.net; }});
    v.push_back({"gemm_rs.net_pieces", {}, 0, 64, [](Tuning& t, long long x) { t.gemmRs.netPieces = int(x); },
                 [](const Tuning& t) { return (long long)t.gemmRs.netPieces; }});
    addReduceKeys(v, "gemm_ar.", &Tuning::gemmAr, true);
    v.push_back({"gemm_ar.net", {"sequential", "fused", "auto", "split"}, 0, 0, [](Tuning& t, long long x) { t.gemmAr.net = int(x); },
                 [](const Tuning& t) { return (long long)t.gemmAr.net; }});
    v.push_back({"gemm_ar.net_pieces", {}, 0, 64, [](Tuning& t, long long x) { t.gemmAr.netPieces = int(x); },
                 [](const Tuning& t) { return (long long)t.gemmAr.netPieces; }});
    v.push_back({"coll.proto", {"auto", "ll", "simple"}, 0, 0, [](Tuning& t, long long x) { t.coll.proto = int(x); },
                 [](const Tuning& t) { return (long long)t.coll.proto; }});
    v.push_back({"coll.ll_bytes", {}, 0, 1ll << 40, [](Tuning& t, long long x) { t.coll.llMaxBytes = size_t(x); },
                 [](const Tuning& t) { return (long long)t.coll.llMaxBytes; }});
    v.push_back({"coll.ll_cta_units", {}, 32, 1 << 20, [](Tuning& t, long long x) { t.coll.llCtaUnits = size_t(x); },
                 [](const Tuning& t) { return (long long)t.coll.llCtaUnits; }});
    v.push_back({"coll.channels", {}, 1, coll::kMaxChannels, [](Tuning& t, long long x) { t.coll.channels = int(x); },
                 [](const Tuning& t) { return (long long)t.coll.channels; }});
    v.push_back({"coll.slot_bytes", {}, coll::kMinSlotBytes, 1ll << 30,
                 [](Tuning& t, long long x) { t.coll.slotBytes = size_t(x) & ~size_t(15); },
                 [](const Tuning& t) { return (long long)t.coll.slotBytes; }});
    v.push_back({"coll.slots", {}, 2, 16, [](Tuning& t, long long x) { t.coll.slots = int(x); },
                 [](const Tuning& t) { return (long long)t.coll.slots; }});
    v.push_back({"allreduce.algo", {"auto", "oneshot", "twoshot"}, 0, 0,
                 [](Tuning& t, long long x) { t.coll.algo = int(x); },
                 [](const Tuning& t) { return (long long)t.coll.algo; }});
    v.push_back({"allreduce.oneshot_bytes", {}, 0, 1ll << 40,
                 [](Tuning& t, long long x) { t.coll.oneShotMaxBytes = size_t(x); },
                 [](const Tuning& t) {
                   return t.coll.oneShotMaxBytes == coll::Tuning::kUnset ? -1ll : (long long)t.coll.oneShotMaxBytes;
                 }});
    v.push_back({"coll.direct", {"auto", "on", "off"}, 0, 0, [](Tuning& t, long long x) { t.coll.direct = int(x); },
                 [](const Tuning& t) { return (long long)t.coll.direct; }});
    v.push_back({"coll.direct_bytes", {}, 0, 1ll << 40,
                 [](Tuning& t, long long x) { t.coll.directMinBytes = size_t(x); },
                 [](const Tuning& t) { return (long long)t.coll.directMinBytes; }});
    v.push_back({"coll.direct_max_bytes", {}, 0, 1ll << 40,
                 [](Tuning& t, long long x) { t.coll.directMaxBytes = size_t(x); },
                 [](const Tuning& t) { return (long long)t.coll.directMaxBytes; }});
    v.push_back({"attention.variant", {"auto", "fast", "overlap", "simple"}, 0, 0,
                 [](Tuning& t, long long x) { t.attention.variant = int(x); },
                 [](const Tuning& t) { return (long long)t.attention.variant; }});
    v.push_back({"moe.dispatch_ctas", {}, 0, 1024, [](Tuning& t, long long x) { t.moe.dispatchCtas = int(x); },
                 [](const Tuning& t) { return (long long)t.moe.dispatchCtas; }});
    v.push_back({"moe.combine_ctas", {}, 0, 1024, [](Tuning& t, long long x) { t.moe.combineCtas = int(x); },
                 [](const Tuning& t) { return (long long)t.moe.combineCtas; }});
    v.push_back({"moe.combine_split", {"off", "on"}, 0, 0,
                 [](Tuning& t, long long x) { t.moe.combineSplit = int(x); },
                 [](const Tuning& t) { return (long long)t.moe.combineSplit; }});
    v.push_back({"moe.fused_route", {"auto", "overlap", "sequential"}, 0, 0,
                 [](Tuning& t, long long x) { t.moe.fusedRoute = int(x); },
                 [](const Tuning& t) { return (long long)t.moe.fusedRoute; }});
    return v;
  }();
  return k;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\n')) --b;
  return s.substr(a, b - a);
}

std::mutex gProcessMu;
bool gProcessRead = false;
mkcclResult_t gProcessResult = mkcclSuccess;
std::string gProcessError;
Tuning gProcess;

}  // namespace

mkcclResult_t parseTuning(const char* source, const char* text, Tuning* out) {
  Tuning t;
  const std::string all = text ? text : "";
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find(';', pos);
    if (end == std::string::npos) end = all.size();
    const std::string item = trim(all.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return setError(mkcclInvalidUsage, "%s: '%s' is not key=value (e.g. \"ag_gemm.plan=ce;gemm_rs.push=team\")",
                      source, item.c_str());
    const std::string name = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    const Key* key = nullptr;
    for (const Key& k : keys())
      if (name == k.name) key = &k;
    if (key == nullptr) {
      std::string known;
      for (const Key& k : keys()) known += (known.empty() ? "" : ", ") + k.name;
      return setError(mkcclInvalidUsage, "%s: unknown key '%s' (known: %s)", source, name.c_str(), known.c_str());
    }
    const std::string what = std::string(source) + " key " + key->name;
    long long v = 0;
    if (!key->choices.empty()) {
      int i = 0;
      bool found = false;
      for (size_t c = 0; c < key->choices.size(); ++c)
        if (value == key->choices[c]) {
          i = int(c);
          found = true;
        }
      if (!found) {
        std::string list;
        for (size_t c = 0; c < key->choices.size(); ++c)
          list += std::string(c == 0 ? "" : c + 1 == key->choices.size() ? " or " : ", ") + key->choices[c];
        return setError(mkcclInvalidUsage, "%s=%s: expected %s", what.c_str(), value.c_str(), list.c_str());
      }
      v = i;
    } else {
      // A value already in KiB takes no K/M/G suffix: it would multiply a second time.
      const bool kib = key->name.size() > 4 && key->name.compare(key->name.size() - 4, 4, "_kib") == 0;
      if (kib && !value.empty() && !isdigit(static_cast<unsigned char>(value.back())))
        return setError(mkcclInvalidUsage, "%s=%s: expected a plain number of KiB", what.c_str(), value.c_str());
      MKCCL_CHECK(parseNumber(what.c_str(), value.c_str(), key->lo, key->hi, &v));
    }
    key->set(t, v);
  }
  *out = t;
  return mkcclSuccess;
}

std::string tuningString(const Tuning& t) {
  const Tuning d;
  std::string s;
  for (const Key& k : keys()) {
    const long long v = k.get(t);
    if (v == k.get(d)) continue;
    s += s.empty() ? "" : ";";
    s += k.name;
    s += "=";
    s += k.choices.empty() ? std::to_string(v) : std::string(k.choices[size_t(v)]);
  }
  return s;
}

mkcclResult_t processTuning(Tuning* out) {
  std::lock_guard<std::mutex> lock(gProcessMu);
  if (!gProcessRead) {
    gProcessRead = true;
    gProcessResult = parseTuning("MKCCL_TUNING", getenv("MKCCL_TUNING"), &gProcess);
    if (gProcessResult != mkcclSuccess) gProcessError = lastError();
  }
  if (gProcessResult != mkcclSuccess) return setError(gProcessResult, "%s", gProcessError.c_str());
  *out = gProcess;
  return mkcclSuccess;
}

mkcclResult_t setProcessTuning(const char* text) {
  Tuning t;
  MKCCL_CHECK(parseTuning("mkcclSetTuning", text, &t));
  std::lock_guard<std::mutex> lock(gProcessMu);
  gProcessRead = true;
  gProcessResult = mkcclSuccess;
  gProcess = t;
  return mkcclSuccess;
}

}  // namespace mkccl
