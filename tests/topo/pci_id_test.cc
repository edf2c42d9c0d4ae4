#include <gtest/gtest.h>
#include <algorithm>
#include "topo/pci_id.h"

namespace mkccl {
namespace {

std::string norm(const std::string& s) {
  std::string o = "(unchanged)";
  return pciNormalize(s, &o) ? o : "invalid";
}

TEST(PciId, Normalize) {
  EXPECT_EQ("0000:1b:00.0", norm("0000:1B:00.0"));      // cudaDeviceGetPCIBusId writes upper case
  EXPECT_EQ("0000:1b:00.0", norm("00000000:1b:00.0"));  // NVML's 8-digit domain
  EXPECT_EQ("0000:1b:00.0", norm("1b:00.0"));
  EXPECT_EQ("0001:c3:1f.7", norm("1:c3:1f.7"));
  for (const char* bad : {"", "xyz", "0000:1b:00", "0000:1b:00.0x", "0000:100:00.0", "0000:1b:20.0",
                          "0000:1b:00.8", "10000:1b:00.0", "0000:1b:00.0 "})
    EXPECT_EQ("invalid", norm(bad)) << bad;
}

TEST(PciId, Order) {
  std::vector<std::string> v{"0000:b3:00.0", "junk", "0001:00:00.0", "0000:1b:00.1", "0000:1B:00.0", "0000:09:00.0"};
  std::sort(v.begin(), v.end(), pciLess);
  EXPECT_EQ((std::vector<std::string>{"0000:09:00.0", "0000:1B:00.0", "0000:1b:00.1", "0000:b3:00.0", "0001:00:00.0",
                                      "junk"}),
            v);
}

TEST(CpuList, Ranges) {
  EXPECT_EQ("", cpuListString({}));
  EXPECT_EQ("5", cpuListString({5}));
  EXPECT_EQ("0-3,8,10-11", cpuListString({11, 0, 1, 2, 3, 8, 10, 3}));
  EXPECT_EQ("0-7,16-23", cpuListString({0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}));
}

}  // namespace
}  // namespace mkccl
