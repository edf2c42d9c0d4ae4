// The results JSON of mkccl-perf (see json.h).
#include "json.h"
#include <errno.h>
#include <cmath>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// MKCCL_PERF_COMMIT: generated on every build of mkccl-perf (perf/commit.cmake); other targets
// that compile this file (the CLI tests) do without.
#if __has_include("perf_commit.h")
#include "perf_commit.h"
#endif
#ifndef MKCCL_PERF_COMMIT
#define MKCCL_PERF_COMMIT "unknown"
#endif

namespace mkccl {
namespace perf {
namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  snprintf(b, sizeof(b), "%.6g", v);
  return b;
}
std::string numOrNull(double v, bool present) { return present ? num(v) : "null"; }
std::string str(const std::string& s) { return "\"" + jsonEscape(s) + "\""; }

}  // namespace

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          snprintf(b, sizeof(b), "\\u%04x", c);
          o += b;
        } else {
          o += (char)c;
        }
    }
  }
  return o;
}

std::string isoDateUtc() {
  time_t now = time(nullptr);
  struct tm tmv;
  gmtime_r(&now, &tmv);
  char b[32];
  strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tmv);
  return b;
}

std::string buildCommit() {
  const char* e = getenv("MKCCL_COMMIT");
  if (e && *e) return e;
  return MKCCL_PERF_COMMIT;
}

std::string toJson(const JsonDoc& doc) {
  std::string o = "{\n";
  o += "  \"device\": " + str(doc.device) + ",\n";
  o += "  \"date\": " + str(doc.date) + ",\n";
  o += "  \"commit\": " + str(doc.commit) + ",\n";
  o += "  \"results\": [";
  for (size_t i = 0; i < doc.results.size(); ++i) {
    const Result& r = doc.results[i];
    const bool hasBase = !r.baseline.empty() && r.baselineTimeUs > 0;
    std::string row = "{";
    row += "\"op\": " + str(r.op);
    row += ", \"world_size\": " + std::to_string(r.worldSize);
    row += ", \"dtype\": " + str(r.dtype);
    if (r.hasShape)
      row += ", \"shape\": {\"m\": " + std::to_string(r.shape.m) + ", \"n\": " + std::to_string(r.shape.n) +
             ", \"k\": " + std::to_string(r.shape.k) + "}";
    else
      row += ", \"shape\": {\"bytes\": " + std::to_string(r.bytes) + "}";
    row += ", \"time_us\": " + num(r.timeUs);
    row += ", \"baseline\": " + (r.baseline.empty() ? std::string("null") : str(r.baseline));
    row += ", \"baseline_time_us\": " + numOrNull(r.baselineTimeUs, hasBase);
    row += ", \"speedup\": " + numOrNull(hasBase && r.timeUs > 0 ? r.baselineTimeUs / r.timeUs : 0, hasBase && r.timeUs > 0);
    row += ", \"busbw_gbps\": " + numOrNull(r.busbwGbps, r.busbwGbps >= 0);
    row += ", \"max_rel_err\": " + num(r.maxRelErr);
    row += ", \"wrong\": " + std::to_string(r.wrong);
    if (!r.redop.empty()) row += ", \"redop\": " + str(r.redop);
    if (!r.hasShape) row += ", \"count\": " + std::to_string(r.count);
    if (r.algbwGbps >= 0) row += ", \"algbw_gbps\": " + num(r.algbwGbps);
    if (hasBase && r.busFactor >= 0 && r.bytes > 0)
      row += ", \"baseline_busbw_gbps\": " + num((double)r.bytes / (r.baselineTimeUs * 1e3) * r.busFactor);
    if (!r.note.empty()) row += ", \"note\": " + str(r.note);
    static const char* fixed[] = {"op", "world_size", "dtype", "shape", "time_us", "baseline", "baseline_time_us",
                                  "speedup", "busbw_gbps", "max_rel_err", "wrong", "redop", "count", "algbw_gbps",
                                  "baseline_busbw_gbps", "note"};
    for (const auto& kv : r.extra) {
      bool clash = false;
      for (const char* f : fixed) clash = clash || kv.first == f;
      if (!clash) row += ", " + str(kv.first) + ": " + num(kv.second);
    }
    row += "}";
    o += (i ? ",\n    " : "\n    ") + row;
  }
  o += doc.results.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return o;
}

bool writeJson(const std::string& path, const JsonDoc& doc, std::string* err) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) {
    *err = "cannot write " + tmp + ": " + strerror(errno);
    return false;
  }
  const std::string s = toJson(doc);
  const bool ok = fwrite(s.data(), 1, s.size(), f) == s.size();
  if (fclose(f) != 0 || !ok) {
    *err = "writing " + tmp + " failed: " + strerror(errno);
    return false;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    *err = "cannot rename " + tmp + " to " + path + ": " + strerror(errno);
    return false;
  }
  return true;
}

}  // namespace perf
}  // namespace mkccl
