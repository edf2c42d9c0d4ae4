#include "topo/pci_id.h"
#include <ctype.h>
#include <stdio.h>
#include <algorithm>
#include <tuple>

namespace mkccl {
namespace {

struct PciAddr {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
};

// One hex field of 1..maxDigits digits (no sign, no 0x: scanf would take both).
bool hexField(const std::string& s, size_t maxDigits, unsigned* v) {
  if (s.empty() || s.size() > maxDigits) return false;
  *v = 0;
  for (char c : s) {
    if (!isxdigit((unsigned char)c)) return false;
    *v = *v * 16 + (unsigned)(isdigit((unsigned char)c) ? c - '0' : (tolower(c) - 'a' + 10));
  }
  return true;
}

// [domain:]bus:device.function
bool parse(const std::string& s, PciAddr* a) {
  size_t dot = s.rfind('.');
  if (dot == std::string::npos) return false;
  std::string head = s.substr(0, dot);
  size_t c2 = head.rfind(':');
  if (c2 == std::string::npos) return false;
  size_t c1 = head.rfind(':', c2 == 0 ? std::string::npos : c2 - 1);
  if (c1 == c2) c1 = std::string::npos;
  PciAddr r;
  std::string dom = c1 == std::string::npos ? "0" : head.substr(0, c1);
  std::string bus = head.substr(c1 == std::string::npos ? 0 : c1 + 1, c2 - (c1 == std::string::npos ? 0 : c1 + 1));
  if (!hexField(dom, 8, &r.domain) || !hexField(bus, 2, &r.bus) || !hexField(head.substr(c2 + 1), 2, &r.dev) ||
      !hexField(s.substr(dot + 1), 1, &r.fn))
    return false;
  if (r.domain > 0xffff || r.dev > 0x1f || r.fn > 0x7) return false;
  *a = r;
  return true;
}

}  // namespace

bool pciNormalize(const std::string& in, std::string* out) {
  PciAddr a;
  if (!parse(in, &a)) return false;
  char buf[32];
  snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", a.domain, a.bus, a.dev, a.fn);
  *out = buf;
  return true;
}

bool pciLess(const std::string& a, const std::string& b) {
  PciAddr x, y;
  bool px = parse(a, &x), py = parse(b, &y);
  if (px != py) return px;  // parsable first
  if (!px) return a < b;
  return std::tie(x.domain, x.bus, x.dev, x.fn) < std::tie(y.domain, y.bus, y.dev, y.fn);
}

std::string cpuListString(const std::vector<int>& cpusIn) {
  std::vector<int> cpus(cpusIn);
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) j++;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace mkccl
