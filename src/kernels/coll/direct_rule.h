// The rule that sends a collective on registered buffers in place (kernels/coll/coll_direct.cuh)
// or through the workspace, and the packing of the entry words. Host-and-device, CPU-tested
// (tests/coll/coll_layout_test.cc). The model and its measurements: ops/coll/coll_direct.h.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "kernels/abi/hd.h"

namespace mkccl {
namespace coll {

// The default cuts: the smallest block between two ranks that goes in place (coll.direct_bytes),
// and the largest (coll.direct_max_bytes; 0: no upper cut).
constexpr size_t kDirectMinBlockBytes = size_t(1) << 20;
constexpr size_t kDirectMaxBlockBytes = size_t(16) << 20;

// mode: the tuner's coll.direct (0 auto, 1 on, 2 off); block: the bytes between two ranks. Every
// rank passes the same values, so every rank reaches the same answer.
MKCCL_HD bool directRule(int mode, size_t minBytes, size_t maxBytes, size_t block) {
  if (mode == 2) return false;
  return mode == 1 || (block >= minBytes && (maxBytes == 0 || block <= maxBytes));
}

// Info words: 64-bit word 3 q + w of a rank's workspace data region holds its word w for local
// rank q (w: 0 where q reads from me, 1 how many bytes, 2 where q writes into me). The fused ops'
// in-place paths (AllGather+GEMM, GEMM+AllReduce) post the same words.
constexpr int kDirectInfoWords = 3;
// The sub-value of an in-place kernel's entry flag (a staged kernel, or a fused op's call on
// unregistered buffers, posts 0).
constexpr uint64_t kDirectEntry = 1;

// An entry word: registration index + 1 in the top 16 bits, a byte offset in the registration
// below (0: no word).
constexpr uint64_t kRegOffMask = (1ull << 48) - 1;
MKCCL_HD uint64_t regWord(int regIndex, uint64_t offset) {
  return ((uint64_t)(regIndex + 1) << 48) | (offset & kRegOffMask);
}
MKCCL_HD int regWordIndex(uint64_t w) { return (int)(w >> 48) - 1; }
MKCCL_HD uint64_t regWordOffset(uint64_t w) { return w & kRegOffMask; }

}  // namespace coll
}  // namespace mkccl
