#include <map>
#include <mutex>
#include "topo/discover.h"

namespace mkccl {

mkcclResult_t topoDiscoverCached(const char* xmlPath, TopoMachine* out) {
  static std::mutex mu;
  static std::map<std::string, TopoMachine> cache;  // failures are not cached: the user may fix the file
  std::string key = xmlPath ? xmlPath : "";
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    TopoMachine m;
    mkcclResult_t r = topoDiscover(xmlPath, &m);
    if (r != mkcclSuccess) return r;
    it = cache.emplace(key, std::move(m)).first;
  }
  *out = it->second;
  return mkcclSuccess;
}

}  // namespace mkccl
