// Every rank's test input, and shared host checks (see rank_inputs.h).
#include "rank_inputs.h"
#include <string.h>
#include "test_util.h"

namespace mkccl {
namespace test {
size_t typeBytes(mkcclDataType_t t) {
  switch (t) {
    case mkcclInt8: case mkcclUint8: case mkcclFloat8e4m3: case mkcclFloat8e5m2: return 1;
    case mkcclFloat16: case mkcclBfloat16: return 2;
    case mkcclInt32: case mkcclUint32: case mkcclFloat32: return 4;
    default: return 8;
  }
}

uint64_t rankSeed(uint64_t seed, int q) { return seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(q + 1)); }

void fillInput(void* d, size_t count, mkcclDataType_t t, uint64_t seed, int q, cudaStream_t s) {
  fillRandom(d, count, t, rankSeed(seed, q), 1.0f, s);
}

Bytes toHost(const void* d, size_t bytes, cudaStream_t s) {
  Bytes b(bytes);
  if (bytes) {
    cudaMemcpyAsync(b.data(), d, bytes, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
  }
  return b;
}

Bytes inputOf(size_t count, mkcclDataType_t t, uint64_t seed, int q, cudaStream_t s) {
  const size_t bytes = count * typeBytes(t);
  void* d = nullptr;
  cudaMalloc(&d, bytes ? bytes : 16);
  fillInput(d, count, t, seed, q, s);
  Bytes b = toHost(d, bytes, s);
  cudaFree(d);
  return b;
}

std::string checkSame(const uint8_t* got, const uint8_t* want, size_t bytes, const std::string& what) {
  for (size_t i = 0; i < bytes; ++i)
    if (got[i] != want[i])
      return what + ": byte " + std::to_string(i) + " of " + std::to_string(bytes) + " differs (got " +
             std::to_string(got[i]) + ", want " + std::to_string(want[i]) + ")";
  return "";
}

std::string checkUntouched(const uint8_t* got, size_t bytes, const std::string& what) {
  for (size_t i = 0; i < bytes; ++i)
    if (got[i] != 0xff) return what + ": byte " + std::to_string(i) + " was overwritten";
  return "";
}

}  // namespace test
}  // namespace mkccl
