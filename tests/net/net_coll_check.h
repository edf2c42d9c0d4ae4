// Inputs and host references of the inter-node collective tests (net_coll_test.cc): every rank's
// input is regenerated on this GPU from a shared seed, then compared on the host with an fp64
// (floats, relative error) or exact (integers, C wrap-around) reduction.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "mkccl.h"
#include "rank_inputs.h"

namespace mkccl {
namespace test {
namespace netcheck {

// (Inputs, toHost, checkSame, typeBytes: rank_inputs.h.)
using test::Bytes;
using test::checkSame;
using test::fillInput;
using test::inputOf;
using test::toHost;
using test::typeBytes;

// Every rank's input, regenerated on this GPU and copied to the host.
std::vector<Bytes> allInputs(size_t count, mkcclDataType_t t, uint64_t seed, int nranks, cudaStream_t s);
// "" when got[gotFirst + i] is the reduction over ranks of in[q][inFirst + i] for i < count.
std::string checkReduced(const Bytes& got, size_t gotFirst, const std::vector<Bytes>& in, size_t inFirst, size_t count,
                         mkcclDataType_t t, mkcclRedOp_t op);

}  // namespace netcheck
}  // namespace test
}  // namespace mkccl
