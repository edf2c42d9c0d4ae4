// The rendezvous service behind a unique id: a detached thread that collects every rank's listening
// address and sends each rank the full table, or tells every rank why the rendezvous failed.
#pragma once
#include <stdint.h>
#include "mkccl.h"
#include "runtime/bootstrap_auth.h"
#include "runtime/socket.h"

namespace mkccl {

// Serves one rendezvous on listenFd (taken over: closed by the service). Lives until all ranks got
// the table, or the rendezvous failed and every rank that came was told, or timeoutMs passed (then
// every connected rank gets mkcclTimeout); never longer than timeoutMs and a short grace to send the
// last replies, whatever arrives. Ranks must agree on nranks and have distinct ranks in range; else
// every rank gets mkcclInvalidUsage. A rank that gives up or fails tells the root, and the others
// get its reason. Connections that do not prove they hold the id's key (a hello whose MAC fails)
// are dropped without a word and change nothing.
mkcclResult_t bootstrapRootStart(int listenFd, const SocketAddress& addr, const Key128& idKey, int timeoutMs);

// Services still running in this process (tests check that none outlives its bound).
int bootstrapRootsActive();

}  // namespace mkccl
