// Loads every kernel of the library on a device (src/kernels/preload.cu); communicator init calls it.
#pragma once
#include "mkccl.h"

namespace mkccl {

mkcclResult_t preloadKernels(int dev, int smCount);

}  // namespace mkccl
