// The results JSON of mkccl-perf (issue 3 item 3):
//   {"device", "date", "commit", "results": [{"op", "world_size", "dtype", "shape": {"bytes"} or
//    {"m","n","k"}, "time_us", "baseline", "baseline_time_us", "speedup", "busbw_gbps",
//    "max_rel_err", "wrong", then "redop", "count", "algbw_gbps", "baseline_busbw_gbps", "note"
//    where they apply, then the row's `extra` keys}]}
// A value that was not measured or does not apply is null.
#pragma once
#include <string>
#include <vector>
#include "perf.h"

namespace mkccl {
namespace perf {

struct JsonDoc {
  std::string device, date, commit;
  std::vector<Result> results;
};

std::string toJson(const JsonDoc& doc);
// Writes atomically (temp file + rename). False with *err on failure.
bool writeJson(const std::string& path, const JsonDoc& doc, std::string* err);
std::string jsonEscape(const std::string& s);
// "2025-01-31T12:34:56Z"
std::string isoDateUtc();
// MKCCL_COMMIT from the environment, else the commit compiled in at configure time, else "unknown".
std::string buildCommit();

}  // namespace perf
}  // namespace mkccl
