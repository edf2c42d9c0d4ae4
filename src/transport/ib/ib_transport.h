// The ib (RC) transport over any Verbs implementation (see verbs.h).
#pragma once
#include <memory>
#include "transport/ib/verbs.h"
#include "transport/net.h"

namespace mkccl {
namespace ib {

struct IbOptions {
  int port = 1;
  int sqDepth = 512;     // send WRs in flight per QP (flow control)
  uint64_t maxWrBytes = 1ull << 30;  // larger puts are split
};

std::unique_ptr<net::Transport> makeIbTransport(std::unique_ptr<Verbs> verbs, const IbOptions& opt = IbOptions());

}  // namespace ib
}  // namespace mkccl
