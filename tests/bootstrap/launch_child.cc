// The program the launcher tests start (under spawnLocal, mkccl-run, mpirun, or alone).
//   launch_child collectives     world host collectives with fresh random data, checked
//   launch_child single          alone: the world is rank 0 of 1
//   launch_child mpirun          under mpirun: the world comes from MPI, then the collectives
//   launch_child mpirun-nompi    under an mpirun environment without MPI built in: a clear error
//   launch_child fail R CODE     rank R exits with CODE after a barrier; the others sleep
//   launch_child signal R        rank R kills itself with SIGKILL after a barrier; the others sleep
//   launch_child sleep SEC
//   launch_child exit-early      rank 1 leaves at once; the others' barrier must fail, not hang
//   launch_child mismatch        rank 0 gathers 8 bytes, the others 16: everyone gets an error
// Exit 0 when everything checked out.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <chrono>
#include <random>
#include <string>
#include <vector>
#include "launch/launch.h"

using namespace mkccl::launch;

namespace {

int rankOf = -1;

[[noreturn]] void die(const std::string& msg) {
  fprintf(stderr, "launch_child rank %d: %s\n", rankOf, msg.c_str());
  exit(1);
}

std::vector<char> randomBytes(uint64_t seed, uint64_t stream, size_t n) {
  std::mt19937_64 g(seed ^ (stream * 0x9e3779b97f4a7c15ull));
  std::vector<char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = (char)(g() >> 13);
  return v;
}

World init(const char* expectHow) {
  World w;
  std::string err;
  if (worldInit(&w, &err)) die("worldInit: " + err);
  rankOf = w.rank;
  if (w.how != expectHow) die("launched by " + w.how + ", expected " + expectHow);
  if (w.rank < 0 || w.rank >= w.nranks || w.localRank < 0 || w.localRank >= w.localRanks) die("bad world");
  World again;
  if (worldInit(&again, &err) || again.rank != w.rank || again.nranks != w.nranks) die("worldInit not idempotent");
  return w;
}

void check(int rc, const std::string& err, const char* what) {
  if (rc) die(std::string(what) + ": " + err);
}

void collectives(const World& w) {
  const int n = w.nranks, me = w.rank;
  std::string err;
  // A fresh seed from rank 0, so every rank can regenerate every other rank's data.
  uint64_t seed = me == 0 ? (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() ^ getpid() : 0;
  check(worldBroadcast(&seed, sizeof(seed), 0, &err), err, "broadcast(seed)");
  std::vector<uint64_t> seeds(n, 0);
  check(worldAllGather(&seed, sizeof(seed), seeds.data(), &err), err, "allGather(seed)");
  for (int r = 0; r < n; r++)
    if (seeds[r] != seed || seed == 0) die("ranks disagree on the seed");

  int k = 0;
  for (size_t bytes : {(size_t)1, (size_t)13, (size_t)4097, (size_t)(1 << 20) + 3}) {
    k++;
    std::vector<char> mine = randomBytes(seed, k * 1000 + me, bytes);
    std::vector<char> out(bytes * n, (char)0xA5);
    check(worldAllGather(mine.data(), bytes, out.data(), &err), err, "allGather");
    for (int r = 0; r < n; r++)
      if (memcmp(out.data() + bytes * r, randomBytes(seed, k * 1000 + r, bytes).data(), bytes))
        die("allGather of " + std::to_string(bytes) + " bytes: block " + std::to_string(r) + " wrong");
    // In place: this rank's block already sits in out.
    std::vector<char> inplace(bytes * n, (char)0x5A);
    memcpy(inplace.data() + bytes * me, mine.data(), bytes);
    check(worldAllGather(inplace.data() + bytes * me, bytes, inplace.data(), &err), err, "allGather in place");
    if (inplace != out) die("in-place allGather differs");
  }
  for (int root : {0, n - 1, n / 2})
    for (size_t bytes : {(size_t)7, (size_t)65537}) {
      std::vector<char> want = randomBytes(seed, 50000 + root * 7 + bytes, bytes);
      std::vector<char> buf = me == root ? want : std::vector<char>(bytes, (char)0x33);
      check(worldBroadcast(buf.data(), bytes, root, &err), err, "broadcast");
      if (buf != want) die("broadcast from " + std::to_string(root) + " wrong");
    }
  check(worldBarrier(&err), err, "barrier");
  check(worldBarrier(&err), err, "barrier");
  if (worldBroadcast(&seed, 8, n, &err) == 0) die("broadcast from an out-of-range root succeeded");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  std::string err;
  if (mode == "collectives") {
    World w = init("mkccl-run");
    collectives(w);
  } else if (mode == "single") {
    World w = init("single");
    if (w.nranks != 1 || w.rank != 0) die("alone, but not rank 0 of 1");
    char in[5] = "abcd", out[5] = "";
    check(worldAllGather(in, 4, out, &err), err, "allGather");
    if (memcmp(in, out, 4)) die("allGather alone");
    check(worldBroadcast(in, 4, 0, &err), err, "broadcast");
    check(worldBarrier(&err), err, "barrier");
  } else if (mode == "mpirun") {
    World w = init("mpirun");
    collectives(w);
  } else if (mode == "mpirun-nompi") {
    World w;
    if (worldInit(&w, &err) == 0) die("worldInit under mpirun without MPI succeeded");
    if (err.find("mkccl-run") == std::string::npos || err.find("MPI") == std::string::npos)
      die("the error does not say what to do: " + err);
  } else if (mode == "fail" && argc == 4) {
    World w = init("mkccl-run");
    check(worldBarrier(&err), err, "barrier");
    if (w.rank == atoi(argv[2])) return atoi(argv[3]);
    sleep(60);
    die("was not stopped after another rank failed");
  } else if (mode == "signal" && argc == 3) {
    World w = init("mkccl-run");
    check(worldBarrier(&err), err, "barrier");
    if (w.rank == atoi(argv[2])) raise(SIGKILL);
    sleep(60);
    die("was not stopped after another rank was killed");
  } else if (mode == "sleep" && argc == 3) {
    sleep((unsigned)atoi(argv[2]));
  } else if (mode == "exit-early") {
    World w = init("mkccl-run");
    if (w.rank == 1) return 0;
    if (worldBarrier(&err) == 0) die("barrier without rank 1 succeeded");
    // Rank 1 left first, but another rank whose barrier already failed may leave before the hub
    // answers this one: the error names a rank that exited, whichever the hub saw first.
    if (err.find("exited") == std::string::npos || err.find("rank ") == std::string::npos)
      die("the error does not say which rank exited: " + err);
  } else if (mode == "mismatch") {
    World w = init("mkccl-run");
    std::vector<char> buf(16 * w.nranks);
    if (worldAllGather(buf.data(), w.rank == 0 ? 8 : 16, buf.data(), &err) == 0) die("mismatched allGather succeeded");
    if (err.find("disagree") == std::string::npos) die("unclear error: " + err);
  } else {
    fprintf(stderr, "launch_child: unknown mode \"%s\"\n", mode.c_str());
    return 2;
  }
  worldFinalize();
  return 0;
}
