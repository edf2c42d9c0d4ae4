// The world a process runs in (see launch.h): launched by mkccl-run (host collectives through the
// hub), by mpirun (through MPI, when the tools were built with it), or alone.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <climits>
#include <mutex>
#include "launch/hub.h"
#include "launch/launch.h"
#include "launch/launch_io.h"
#include "base/env.h"
#ifndef MKCCL_HAVE_MPI
#define MKCCL_HAVE_MPI 0
#endif
#if MKCCL_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings would need libmpi_cxx
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mkccl {
namespace launch {
namespace {

std::mutex gMutex;  // one host collective at a time per process
World gWorld;
bool gReady = false;
int gHubFd = -1;
uint64_t gSeq = 0;
[[maybe_unused]] bool gMpi = false;

bool parseInt(const char* s, long lo, long hi, int* out) {
  long long v = 0;
  if (!s || !*s || parseNumber("the launcher's variable", s, lo, hi, &v) != mkcclSuccess) return false;
  *out = (int)v;
  return true;
}

int fail(std::string* err, const std::string& msg) {
  if (err) *err = msg;
  return 1;
}

int initFromLauncher(std::string* err) {
  World w;
  const char* hub = getenv("MKCCL_LAUNCH_HUB");
  if (!parseInt(getenv("MKCCL_LAUNCH_NRANKS"), 1, 1 << 20, &w.nranks) ||
      !parseInt(getenv("MKCCL_LAUNCH_RANK"), 0, w.nranks - 1, &w.rank) ||
      !parseInt(getenv("MKCCL_LAUNCH_LOCAL_RANKS"), 1, w.nranks, &w.localRanks) ||
      !parseInt(getenv("MKCCL_LAUNCH_LOCAL_RANK"), 0, w.localRanks - 1, &w.localRank) || !hub || !*hub)
    return fail(err, "mkccl-run's MKCCL_LAUNCH_* variables are incomplete or out of range (RANK, NRANKS, "
                     "LOCAL_RANK, LOCAL_RANKS, HUB)");
  w.how = "mkccl-run";
  int fd = -1;
  int timeoutMs = 0;
  if (hostTimeoutMs(&timeoutMs, err)) return 1;
  // The hub is up before any rank starts: a refusal means mkccl-run is gone, so do not wait long.
  if (connectLoopback(hub, std::min(timeoutMs, 5000), &fd, err)) return 1;
  HubRequest hello = {kHubMagic, kHubHello, w.rank, w.nranks, 0, 0};
  HubReply rep;
  if (writeAll(fd, &hello, sizeof(hello), timeoutMs, -1, "mkccl-run hub hello", err) ||
      readAll(fd, &rep, sizeof(rep), timeoutMs, -1, "mkccl-run hub hello", err)) {
    close(fd);
    return 1;
  }
  if (rep.magic != kHubMagic || !rep.ok) {
    std::string msg(rep.magic == kHubMagic && rep.len < 4096 ? rep.len : 0, '\0');
    readAll(fd, &msg[0], msg.size(), timeoutMs, -1, "mkccl-run hub hello", err);
    close(fd);
    return fail(err, "mkccl-run hub refused rank " + std::to_string(w.rank) + ": " + msg);
  }
  gHubFd = fd;
  gWorld = w;
  return 0;
}

#if MKCCL_HAVE_MPI
bool gWeInitMpi = false;

void finalizeMpi() {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized && gWeInitMpi) MPI_Finalize();
}

int mpiFail(int rc, const char* what, std::string* err) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return fail(err, std::string(what) + " failed: " + msg);
}
#endif

int initFromMpi([[maybe_unused]] const char* sizeVar, std::string* err) {
#if MKCCL_HAVE_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int rc = MPI_Init(nullptr, nullptr);
    if (rc != MPI_SUCCESS) return mpiFail(rc, "MPI_Init", err);
    gWeInitMpi = true;
    atexit(finalizeMpi);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors come back to us, not abort()
  World w;
  w.how = "mpirun";
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.nranks);
  MPI_Comm local;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_rank(local, &w.localRank);
    MPI_Comm_size(local, &w.localRanks);
    MPI_Comm_free(&local);
  }
  gMpi = true;
  gWorld = w;
  return 0;
#else
  const char* n = getenv(sizeVar);
  return fail(err, std::string("launched by mpirun (") + sizeVar + "=" + n +
                       ") but this program was built without MPI: rebuild with MPI installed (CMake must find it), "
                       "or launch with mkccl-run -n " + n + " instead");
#endif
}

// Sends a request (+ payload) to the hub and receives the reply into out (exactly outBytes).
int hubCall(uint32_t op, int arg, const void* payload, uint64_t payloadBytes, uint64_t bytes, void* out,
            uint64_t outBytes, std::string* err) {
  int timeoutMs = 0;
  if (hostTimeoutMs(&timeoutMs, err)) return 1;
  HubRequest q = {kHubMagic, op, gWorld.rank, arg, bytes, gSeq++};
  const char* what = op == kHubAllGather ? "worldAllGather" : op == kHubBroadcast ? "worldBroadcast" : "worldBarrier";
  if (writeAll(gHubFd, &q, sizeof(q), timeoutMs, -1, what, err) ||
      writeAll(gHubFd, payload, payloadBytes, timeoutMs, -1, what, err))
    return 1;
  HubReply rep;
  if (readAll(gHubFd, &rep, sizeof(rep), timeoutMs, -1, what, err)) return 1;
  if (rep.magic != kHubMagic) return fail(err, std::string(what) + ": bad reply from the mkccl-run hub");
  if (!rep.ok) {
    std::string msg(rep.len < 65536 ? rep.len : 0, '\0');
    if (readAll(gHubFd, &msg[0], msg.size(), timeoutMs, -1, what, err)) return 1;
    return fail(err, std::string(what) + ": " + msg);
  }
  if (rep.len != outBytes)
    return fail(err, std::string(what) + ": the hub replied " + std::to_string(rep.len) + " bytes, expected " +
                         std::to_string(outBytes));
  return readAll(gHubFd, out, outBytes, timeoutMs, -1, what, err) ? 1 : 0;
}

int notReady(std::string* err) { return fail(err, "worldInit was not called (or failed)"); }

}  // namespace

int worldInit(World* w, std::string* err) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gReady) {
    int rc = 0;
    const char* mpiSize = getenv("OMPI_COMM_WORLD_SIZE") ? "OMPI_COMM_WORLD_SIZE"
                          : getenv("PMI_SIZE")           ? "PMI_SIZE"
                                                         : nullptr;
    int mpiN = 0;
    if (getenv("MKCCL_LAUNCH_RANK"))
      rc = initFromLauncher(err);
    else if (mpiSize && parseInt(getenv(mpiSize), 1, INT_MAX, &mpiN) && (mpiN > 1 || MKCCL_HAVE_MPI))
      rc = initFromMpi(mpiSize, err);
    else
      gWorld = World();  // alone (an mpirun of one process without MPI support is alone too)
    if (rc) return rc;
    gReady = true;
  }
  if (w) *w = gWorld;
  return 0;
}

const World& world() { return gWorld; }

int worldAllGather(const void* in, size_t bytes, void* out, std::string* err) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gReady) return notReady(err);
  if (gWorld.how == "mkccl-run")
    return hubCall(kHubAllGather, 0, in, bytes, bytes, out, (uint64_t)bytes * gWorld.nranks, err);
#if MKCCL_HAVE_MPI
  if (gMpi) {
    if (bytes > INT_MAX) return fail(err, "worldAllGather: more than INT_MAX bytes per rank under MPI");
    const void* src = in == (const char*)out + bytes * gWorld.rank ? MPI_IN_PLACE : in;
    int rc = MPI_Allgather(src, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpiFail(rc, "MPI_Allgather", err);
  }
#endif
  if (bytes) memmove(out, in, bytes);
  return 0;
}

int worldBroadcast(void* data, size_t bytes, int root, std::string* err) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gReady) return notReady(err);
  if (root < 0 || root >= gWorld.nranks)
    return fail(err, "worldBroadcast: root " + std::to_string(root) + " out of range for " +
                         std::to_string(gWorld.nranks) + " ranks");
  if (gWorld.how == "mkccl-run")
    return hubCall(kHubBroadcast, root, data, gWorld.rank == root ? bytes : 0, bytes, data, bytes, err);
#if MKCCL_HAVE_MPI
  if (gMpi) {
    if (bytes > INT_MAX) return fail(err, "worldBroadcast: more than INT_MAX bytes under MPI");
    int rc = MPI_Bcast(data, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpiFail(rc, "MPI_Bcast", err);
  }
#endif
  return 0;
}

int worldBarrier(std::string* err) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gReady) return notReady(err);
  if (gWorld.how == "mkccl-run") return hubCall(kHubBarrier, 0, nullptr, 0, 0, nullptr, 0, err);
#if MKCCL_HAVE_MPI
  if (gMpi) {
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpiFail(rc, "MPI_Barrier", err);
  }
#endif
  return 0;
}

void worldFinalize() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gHubFd >= 0) close(gHubFd);
  gHubFd = -1;
#if MKCCL_HAVE_MPI
  if (gMpi) finalizeMpi();
  gMpi = false;
#endif
  gReady = false;
  gWorld = World();
}

}  // namespace launch
}  // namespace mkccl
