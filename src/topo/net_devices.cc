#include "topo/net_devices.h"
#include <ctype.h>
#include <stdlib.h>
#include "base/check.h"
#include "base/env.h"

namespace mkccl {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && isspace((unsigned char)s[b])) b++;
  while (e > b && isspace((unsigned char)s[e - 1])) e--;
  return s.substr(b, e - b);
}

bool validName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!isalnum((unsigned char)c) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

}  // namespace

mkcclResult_t parseNetDevices(const char* spec, std::vector<NetDeviceChoice>* out) {
  out->clear();
  if (!spec) return mkcclSuccess;
  std::string s(spec);
  if (trim(s).empty()) return mkcclSuccess;
  size_t pos = 0;
  while (true) {
    size_t comma = s.find(',', pos);
    std::string item = trim(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    NetDeviceChoice c;
    size_t colon = item.find(':');
    c.name = trim(item.substr(0, colon));
    if (!validName(c.name)) {
      out->clear();
      return setError(mkcclInvalidUsage,
                      "MKCCL_NET_DEVICES=\"%s\": \"%s\" is not a NIC name (expected a comma list of names such "
                      "as mlx5_0, each optionally with :port)",
                      spec, item.c_str());
    }
    if (colon != std::string::npos) {
      std::string p = trim(item.substr(colon + 1));
      long long v = 0;
      if (parseNumber("MKCCL_NET_DEVICES port", p.c_str(), 1, 255, &v) != mkcclSuccess) {
        out->clear();
        return setError(mkcclInvalidUsage, "MKCCL_NET_DEVICES=\"%s\": port \"%s\" of %s is not a number from 1 to 255",
                        spec, p.c_str(), c.name.c_str());
      }
      c.port = (int)v;
    }
    for (const NetDeviceChoice& prev : *out) {
      if (prev.name == c.name) {
        std::string name = c.name;
        out->clear();
        return setError(mkcclInvalidUsage, "MKCCL_NET_DEVICES=\"%s\": %s is listed twice", spec, name.c_str());
      }
    }
    out->push_back(c);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return mkcclSuccess;
}

}  // namespace mkccl
