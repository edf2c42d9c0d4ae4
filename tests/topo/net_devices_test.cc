#include <gtest/gtest.h>
#include "base/log.h"
#include "topo/net_devices.h"

namespace mkccl {
namespace {

TEST(NetDevices, Parses) {
  std::vector<NetDeviceChoice> c{{"stale", 3}};
  ASSERT_EQ(mkcclSuccess, parseNetDevices(nullptr, &c));
  EXPECT_TRUE(c.empty());
  ASSERT_EQ(mkcclSuccess, parseNetDevices("  ", &c));
  EXPECT_TRUE(c.empty());
  ASSERT_EQ(mkcclSuccess, parseNetDevices(" mlx5_0 , mlx5_1:2,rdmap79s0", &c));
  ASSERT_EQ(3u, c.size());
  EXPECT_EQ("mlx5_0", c[0].name);
  EXPECT_EQ(0, c[0].port);
  EXPECT_EQ("mlx5_1", c[1].name);
  EXPECT_EQ(2, c[1].port);
  EXPECT_EQ("rdmap79s0", c[2].name);
}

TEST(NetDevices, RejectsMalformed) {
  for (const char* bad : {",", "mlx5_0,", "mlx5_0,,mlx5_1", ":1", "mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256",
                          "mlx5_0:1:2", "mlx5 0", "mlx5_0;mlx5_1", "mlx5_0,mlx5_0:1"}) {
    std::vector<NetDeviceChoice> c;
    EXPECT_EQ(mkcclInvalidUsage, parseNetDevices(bad, &c)) << bad;
    EXPECT_TRUE(c.empty()) << bad;
    EXPECT_NE(std::string::npos, std::string(lastError()).find("MKCCL_NET_DEVICES")) << lastError();
  }
}

}  // namespace
}  // namespace mkccl
