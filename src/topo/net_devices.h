// MKCCL_NET_DEVICES: the NICs the user wants used, "mlx5_0,mlx5_1:1" (name, optionally :port).
#pragma once
#include <string>
#include <vector>
#include "mkccl.h"

namespace mkccl {

struct NetDeviceChoice {
  std::string name;
  int port = 0;  // 0: not given (the NIC's first active port)
};

// Empty or null spec: no override (empty list). A malformed spec is mkcclInvalidUsage with the
// reason (setError), never a silent partial list.
mkcclResult_t parseNetDevices(const char* spec, std::vector<NetDeviceChoice>* out);

}  // namespace mkccl
