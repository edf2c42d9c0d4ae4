// Bootstrap: the TCP rendezvous through the unique id, then socket collectives among the ranks
// for the runtime's own use (never on the data path). Every operation is bounded by the timeout.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <memory>
#include <vector>
#include "mkccl.h"

namespace mkccl {

// What a unique id holds (checked by magic, version and checksum).
struct UniqueIdContent;

// Makes an id and starts the rendezvous service for it in this process (see mkcclGetUniqueId).
mkcclResult_t bootstrapCreateRoot(mkcclUniqueId* id);
// Checks that an id is well formed (magic, version, checksum). mkcclInvalidArgument otherwise.
mkcclResult_t bootstrapCheckId(const mkcclUniqueId& id);
// A 64-bit value that identifies the id (same on every rank): names per-comm OS objects.
uint64_t bootstrapIdToken(const mkcclUniqueId& id);

class Bootstrap {
 public:
  // Rendezvous with the other nranks-1 ranks through the root named in id.
  static mkcclResult_t create(const mkcclUniqueId& id, int rank, int nranks, int timeoutMs,
                              std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t token() const { return token_; }

  // data holds nranks blocks of `bytes`; this rank's block is filled in, the rest is received.
  mkcclResult_t allGather(void* data, size_t bytes);
  mkcclResult_t broadcast(void* data, size_t bytes, int root);
  mkcclResult_t barrier();
  // Point-to-point messages, FIFO per (sender, receiver) pair; tag and length are checked.
  mkcclResult_t send(int peer, uint32_t tag, const void* data, size_t bytes);
  mkcclResult_t recv(int peer, uint32_t tag, void* data, size_t bytes);
  // Closes every socket: peers blocked on this rank get mkcclRemoteError at once.
  void abort();

 private:
  Bootstrap() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = -1, nranks_ = 0;
  uint64_t token_ = 0;
  friend struct BootstrapAccess;
};

}  // namespace mkccl
