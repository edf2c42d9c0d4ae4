// A host-mapped word an engine's kernels write when they give up on an internal wait (a bug) or
// find bad arguments that only the device reads (grouped GEMM offsets). A kernel cannot return an
// error, so the next host call of the same engine takes the word and turns it into one.
#pragma once
#include <mutex>
#include "mkccl.h"

namespace mkccl {

class FaultWord {
 public:
  // The device address kernels write to (mapped host memory, made on first use).
  mkcclResult_t device(int** out);
  // The code written since the last take (0: none); the word is cleared.
  int take();

 private:
  std::mutex mu_;
  int* host_ = nullptr;
  int* dev_ = nullptr;
};

}  // namespace mkccl
