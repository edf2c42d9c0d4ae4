// Inputs and host references of the inter-node collective tests (net_coll_test.cc): every rank's
// input is regenerated on this GPU from a shared seed, then compared on the host with an fp64
// (floats, relative error) or exact (integers, C wrap-around) reduction.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"

namespace mkccl {
namespace test {
namespace netcheck {

using Bytes = std::vector<uint8_t>;

size_t typeBytes(mkcclDataType_t t);
// Fills rank q's input (count elements of t) on the current GPU: fresh random values from seed.
void fillInput(void* d, size_t count, mkcclDataType_t t, uint64_t seed, int q, cudaStream_t s);
Bytes toHost(const void* d, size_t bytes, cudaStream_t s);
// Every rank's input, regenerated on this GPU and copied to the host.
std::vector<Bytes> allInputs(size_t count, mkcclDataType_t t, uint64_t seed, int nranks, cudaStream_t s);
// "" when got[gotFirst + i] is the reduction over ranks of in[q][inFirst + i] for i < count.
std::string checkReduced(const Bytes& got, size_t gotFirst, const std::vector<Bytes>& in, size_t inFirst, size_t count,
                         mkcclDataType_t t, mkcclRedOp_t op);
// "" when got[0, bytes) == want[0, bytes).
std::string checkSame(const uint8_t* got, const uint8_t* want, size_t bytes, const std::string& what);

}  // namespace netcheck
}  // namespace test
}  // namespace mkccl
