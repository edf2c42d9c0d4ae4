// Inputs and host references of the collective tests.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"

namespace mkccl {
namespace test {

using Bytes = std::vector<uint8_t>;

// Seed of rank q's input in a test step with seed `seed`.
uint64_t rankSeed(uint64_t seed, int q);
// Fills rank q's input (count elements of t) on the current GPU.
void fillInput(void* d, size_t count, mkcclDataType_t t, uint64_t seed, int q, cudaStream_t s);
// Rank q's input, regenerated on this GPU and copied to the host.
Bytes inputOf(size_t count, mkcclDataType_t t, uint64_t seed, int q, cudaStream_t s);
// Every rank's input, regenerated on this GPU and copied to the host.
std::vector<Bytes> allInputs(size_t count, mkcclDataType_t t, uint64_t seed, int nranks, cudaStream_t s);
Bytes toHost(const void* d, size_t bytes, cudaStream_t s);

// "" when got[gotFirst + i] is the reduction over ranks of in[q][inFirst + i] for i < count
// (floats: fp64 reference, relative error within the type's tolerance; integers: exact, C wrap-around).
std::string checkReduced(const Bytes& got, size_t gotFirst, const std::vector<Bytes>& in, size_t inFirst, size_t count,
                         mkcclDataType_t t, mkcclRedOp_t op);
// "" when got[0, bytes) == want[0, bytes).
std::string checkSame(const uint8_t* got, const uint8_t* want, size_t bytes, const std::string& what);
// "" when every byte of got[0, bytes) is the poison byte (0xff): nothing was written there.
std::string checkUntouched(const uint8_t* got, size_t bytes, const std::string& what);

double tolerance(mkcclDataType_t t);

}  // namespace test
}  // namespace mkccl
