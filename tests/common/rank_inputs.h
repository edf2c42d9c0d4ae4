// Every rank's test input from a shared seed (regenerated on any GPU), and the host checks the
// collective tests share (coll_test: AllToAllv with gaps; net_coll_test: the inter-node collectives).
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"

namespace mkccl {
namespace test {

using Bytes = std::vector<uint8_t>;

// Bytes per element of t.
size_t typeBytes(mkcclDataType_t t);
// Seed of rank q's input in a test step with seed `seed`.
uint64_t rankSeed(uint64_t seed, int q);
// Fills rank q's input (count elements of t) on the current GPU.
void fillInput(void* d, size_t count, mkcclDataType_t t, uint64_t seed, int q, cudaStream_t s);
// Rank q's input, regenerated on this GPU and copied to the host.
Bytes inputOf(size_t count, mkcclDataType_t t, uint64_t seed, int q, cudaStream_t s);
Bytes toHost(const void* d, size_t bytes, cudaStream_t s);

// "" when got[0, bytes) == want[0, bytes).
std::string checkSame(const uint8_t* got, const uint8_t* want, size_t bytes, const std::string& what);
// "" when every byte of got[0, bytes) is the poison byte (0xff): nothing was written there.
std::string checkUntouched(const uint8_t* got, size_t bytes, const std::string& what);

}  // namespace test
}  // namespace mkccl
