// PCI bus id strings and CPU lists in the forms people and tools write them.
#pragma once
#include <string>
#include <vector>

namespace mkccl {

// "0000:1B:00.0", "00000000:1b:00.0" (NVML) or "1b:00.0" -> "0000:1b:00.0". false if malformed.
bool pciNormalize(const std::string& in, std::string* out);
// Orders bus ids numerically (domain, bus, device, function); unparsable ones last, by text.
bool pciLess(const std::string& a, const std::string& b);

// {0,1,2,3,8,10,11} -> "0-3,8,10-11" (input in any order, duplicates ignored); {} -> "".
std::string cpuListString(const std::vector<int>& cpus);

}  // namespace mkccl
