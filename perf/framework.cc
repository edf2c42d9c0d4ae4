// mkccl-perf's framework: op registry, ranks and their resources, combining rows over the ranks,
// the table and the JSON (see perf.h).
#include "framework.h"
#include <cublas_v2.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include "args.h"
#include "json.h"
#include "launch/launch.h"
#include "nccl_loader.h"

namespace mkccl {
namespace perf {

// ---- registry ------------------------------------------------------------------------------

namespace {
std::vector<OpInfo>& registry() {
  static std::vector<OpInfo> r;
  return r;
}
}  // namespace

OpRegistrar::OpRegistrar(const char* name, OpFn fn, const char* help, bool shapeOp) {
  OpInfo o;
  o.name = name;
  o.help = help ? help : "";
  o.fn = fn;
  o.shapeOp = shapeOp;
  registry().push_back(o);
}

std::vector<OpInfo> registeredOps() {
  std::vector<OpInfo> r = registry();
  std::sort(r.begin(), r.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
  return r;
}

const OpInfo* findOp(const std::string& name) {
  for (const OpInfo& o : registry())
    if (o.name == name) return &o;
  return nullptr;
}

const char* dtypeName(mkcclDataType_t t) {
  switch (t) {
    case mkcclInt8: return "int8";
    case mkcclUint8: return "uint8";
    case mkcclInt32: return "int32";
    case mkcclUint32: return "uint32";
    case mkcclInt64: return "int64";
    case mkcclUint64: return "uint64";
    case mkcclFloat16: return "fp16";
    case mkcclFloat32: return "fp32";
    case mkcclFloat64: return "fp64";
    case mkcclBfloat16: return "bf16";
    case mkcclFloat8e4m3: return "fp8e4m3";
    case mkcclFloat8e5m2: return "fp8e5m2";
    default: return "?";
  }
}

const char* redopName(mkcclRedOp_t op) {
  switch (op) {
    case mkcclSum: return "sum";
    case mkcclProd: return "prod";
    case mkcclMax: return "max";
    case mkcclMin: return "min";
    case mkcclAvg: return "avg";
    default: return "?";
  }
}

size_t dtypeSize(mkcclDataType_t t) {
  switch (t) {
    case mkcclInt8: case mkcclUint8: case mkcclFloat8e4m3: case mkcclFloat8e5m2: return 1;
    case mkcclFloat16: case mkcclBfloat16: return 2;
    case mkcclInt32: case mkcclUint32: case mkcclFloat32: return 4;
    case mkcclInt64: case mkcclUint64: case mkcclFloat64: return 8;
    default: return 0;
  }
}

// ---- combining rows over ranks, printing ---------------------------------------------------

namespace {

constexpr int kMaxExtra = 32;

struct RowNumbers {  // what each rank contributes to a row
  double time, baseTime, maxRelErr, wrong, nExtra;
  double extra[kMaxExtra];
};

bool allOk(bool ok) {
  const launch::World& w = launch::world();
  std::vector<char> all(w.nranks);
  char mine = ok;
  std::string err;
  if (launch::worldAllGather(&mine, 1, all.data(), &err) != 0) {
    fprintf(stderr, "mkccl-perf: rank %d: worldAllGather: %s\n", w.rank, err.c_str());
    return false;
  }
  for (char c : all)
    if (!c) return false;
  return true;
}

Result combine(const Result& mine, int nranks) {
  RowNumbers n{};
  n.time = mine.timeUs;
  n.baseTime = mine.baselineTimeUs;
  n.maxRelErr = mine.maxRelErr;
  n.wrong = (double)mine.wrong;
  int i = 0;
  for (const auto& kv : mine.extra) {
    if (i == kMaxExtra) break;
    n.extra[i++] = kv.second;
  }
  n.nExtra = i;
  std::vector<RowNumbers> all(nranks);
  std::string err;
  Result r = mine;
  if (launch::worldAllGather(&n, sizeof(n), all.data(), &err) != 0) {
    fprintf(stderr, "mkccl-perf: combining a row over ranks failed: %s\n", err.c_str());
    return r;
  }
  r.wrong = 0;
  for (const RowNumbers& o : all) {
    r.timeUs = std::max(r.timeUs, o.time);
    if (o.baseTime < 0 || r.baselineTimeUs < 0) r.baselineTimeUs = -1;
    else r.baselineTimeUs = std::max(r.baselineTimeUs, o.baseTime);
    r.maxRelErr = std::max(r.maxRelErr, o.maxRelErr);
    r.wrong += (long long)o.wrong;
    if ((int)o.nExtra == i) {
      int j = 0;
      for (auto& kv : r.extra) {
        if (j == i) break;
        kv.second = std::max(kv.second, o.extra[j++]);
      }
    }
  }
  // -R: registered vs unregistered (and their graph replays), from the combined (slowest-rank)
  // times: > 1 means the registered buffers were faster.
  // An op whose registered call differs from its row's call in more than the buffers (AllGather+
  // GEMM: the row's call asks for no gathered A) gives its unregistered twin as reg_base_us.
  const auto reg = r.extra.find("reg_us"), regBase = r.extra.find("reg_base_us");
  const double unreg = regBase != r.extra.end() ? regBase->second : r.timeUs;
  if (reg != r.extra.end() && reg->second > 0 && unreg > 0) r.extra["reg_speedup"] = unreg / reg->second;
  const auto regG = r.extra.find("reg_graph_us"), g = r.extra.find("graph_us");
  if (regG != r.extra.end() && g != r.extra.end() && regG->second > 0) r.extra["reg_graph_speedup"] = g->second / regG->second;
  if (r.busFactor >= 0 && r.bytes > 0 && r.timeUs > 0) {
    r.algbwGbps = (double)r.bytes / (r.timeUs * 1e3);
    r.busbwGbps = r.algbwGbps * r.busFactor;
  }
  return r;
}

void printHeader(const Args& a) {
  if (a.shapeOp)
    printf("#%8s %8s %8s %8s %11s %7s | %11s %8s\n", "M", "N", "K", "type", "time(us)", "#wrong", "base(us)",
           "speedup");
  else
    printf("#%12s %12s %8s %6s %11s %11s %11s %7s | %11s %11s %11s %8s\n", "size(B)", "count", "type", "redop",
           "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "base(us)", "algbw(GB/s)", "busbw(GB/s)", "speedup");
  fflush(stdout);
}

std::string fmt(const char* f, double v) {
  char b[64];
  snprintf(b, sizeof(b), f, v);
  return b;
}

void printRow(const Result& r) {
  const bool base = r.baselineTimeUs > 0;
  const std::string bt = base ? fmt("%11.2f", r.baselineTimeUs) : std::string(11 - 3, ' ') + "n/a";
  const std::string sp = base && r.timeUs > 0 ? fmt("%8.3f", r.baselineTimeUs / r.timeUs) : std::string(8 - 3, ' ') + "n/a";
  if (r.hasShape) {
    printf(" %8zu %8zu %8zu %8s %11.2f %7lld | %s %s", r.shape.m, r.shape.n, r.shape.k, r.dtype.c_str(), r.timeUs,
           r.wrong, bt.c_str(), sp.c_str());
    for (const auto& kv : r.extra) printf("  %s=%.4g", kv.first.c_str(), kv.second);
  } else {
    const std::string alg = r.algbwGbps >= 0 ? fmt("%11.2f", r.algbwGbps) : std::string(11 - 3, ' ') + "n/a";
    const std::string bus = r.busbwGbps >= 0 ? fmt("%11.2f", r.busbwGbps) : std::string(11 - 3, ' ') + "n/a";
    std::string balg = std::string(11 - 3, ' ') + "n/a", bbus = balg;
    if (base && r.bytes > 0) {
      const double a = (double)r.bytes / (r.baselineTimeUs * 1e3);
      balg = fmt("%11.2f", a);
      if (r.busFactor >= 0) bbus = fmt("%11.2f", a * r.busFactor);
    }
    printf(" %12zu %12zu %8s %6s %11.2f %s %s %7lld | %s %s %s %s", r.bytes, r.count, r.dtype.c_str(),
           r.redop.empty() ? "none" : r.redop.c_str(), r.timeUs, alg.c_str(), bus.c_str(), r.wrong, bt.c_str(),
           balg.c_str(), bbus.c_str(), sp.c_str());
  }
  if (!r.note.empty()) printf("  # %s", r.note.c_str());
  printf("\n");
  fflush(stdout);
}

struct RankInfo {
  char host[64];
  int pid, device;
  char busId[32];
  char name[96];
};

uint64_t freshSeed() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 24) ^ ((uint64_t)getpid() << 44);
  return s ? s : 1;
}

}  // namespace

// ---- the run -------------------------------------------------------------------------------

namespace {

int runRank(Args args, const launch::World& w) {
  std::string err;
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    fprintf(stderr, "mkccl-perf: rank %d: no CUDA GPU visible (%s)\n", w.rank, cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  Env env;
  env.rank = w.rank;
  env.nranks = w.nranks;
  env.localRank = w.localRank;
  env.device = w.localRank % ngpu;
  if (cudaSetDevice(env.device) != cudaSuccess) {
    fprintf(stderr, "mkccl-perf: rank %d: cudaSetDevice(%d) failed\n", w.rank, env.device);
    return 1;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, env.device);
  env.deviceName = prop.name;

  // The same seed everywhere (inputs of every rank are known to every rank's check).
  if (args.seed == 0 && w.rank == 0) args.seed = freshSeed();
  if (launch::worldBroadcast(&args.seed, sizeof(args.seed), 0, &err) != 0) {
    fprintf(stderr, "mkccl-perf: rank %d: %s\n", w.rank, err.c_str());
    return 1;
  }

  // Who is where.
  RankInfo me{};
  gethostname(me.host, sizeof(me.host) - 1);
  me.pid = getpid();
  me.device = env.device;
  cudaDeviceGetPCIBusId(me.busId, sizeof(me.busId), env.device);
  snprintf(me.name, sizeof(me.name), "%s", prop.name);
  std::vector<RankInfo> infos(w.nranks);
  launch::worldAllGather(&me, sizeof(me), infos.data(), &err);
  {
    const char* rpnEnv = getenv("MKCCL_RANKS_PER_NODE");
    const int rpn = rpnEnv ? atoi(rpnEnv) : 0;
    std::vector<std::string> hosts;
    for (int r = 0; r < w.nranks; ++r) {
      if (rpn > 0) {
        env.node.push_back(r / rpn);
        continue;
      }
      const auto it = std::find(hosts.begin(), hosts.end(), std::string(infos[r].host));
      env.node.push_back(static_cast<int>(it - hosts.begin()));
      if (it == hosts.end()) hosts.push_back(infos[r].host);
    }
  }

  // libmkccl communicator over the world.
  mkcclUniqueId id;
  memset(&id, 0, sizeof(id));
  mkcclResult_t res = mkcclSuccess;
  if (w.rank == 0) res = mkcclGetUniqueId(&id);
  if (launch::worldBroadcast(&id, sizeof(id), 0, &err) != 0) {
    fprintf(stderr, "mkccl-perf: rank %d: %s\n", w.rank, err.c_str());
    return 1;
  }
  if (res == mkcclSuccess) res = mkcclCommInitRank(&env.comm, w.nranks, id, w.rank);
  if (!allOk(res == mkcclSuccess)) {
    if (res != mkcclSuccess)
      fprintf(stderr, "mkccl-perf: rank %d: mkcclCommInitRank: %s: %s\n", w.rank, mkcclGetErrorString(res),
              mkcclGetLastError(nullptr));
    if (env.comm) mkcclCommDestroy(env.comm);
    return 1;
  }
  cudaStreamCreateWithFlags(&env.stream, cudaStreamNonBlocking);
  if (cublasCreate(&env.cublas) == CUBLAS_STATUS_SUCCESS) cublasSetStream(env.cublas, env.stream);
  else env.cublas = nullptr;

  // The baseline.
  std::string baseNote;
  ncclComm_t ncomm = nullptr;
  if (args.baseline) {
    std::string why;
    const Nccl* nccl = loadNccl(args.ncclLib, &why);
    if (allOk(nccl != nullptr)) {
      ncclUniqueId nid;
      memset(&nid, 0, sizeof(nid));
      int r = 0;
      if (w.rank == 0) r = nccl->getUniqueId(&nid);
      launch::worldBroadcast(&nid, sizeof(nid), 0, &err);
      if (r == 0) r = nccl->commInitRank(&ncomm, w.nranks, nid, w.rank);
      if (allOk(r == 0)) {
        env.nccl = nccl;
        env.ncclComm = ncomm;
        baseNote = "NCCL " + std::to_string(nccl->version) + " (" + nccl->path + ", NCCL_NVLS_ENABLE=0)";
      } else {
        if (r != 0) why = std::string("ncclCommInitRank: ") + nccl->err(r);
        baseNote = "NCCL unavailable: " + (why.empty() ? std::string("failed on another rank") : why);
        if (ncomm) nccl->commDestroy(ncomm);
        ncomm = nullptr;
      }
    } else {
      baseNote = "NCCL unavailable: " + (why.empty() ? std::string("not loadable on another rank") : why);
    }
  } else {
    baseNote = "none (--no-baseline)";
  }

  JsonDoc doc;
  doc.device = env.deviceName;
  doc.date = isoDateUtc();
  doc.commit = buildCommit();
  if (w.rank == 0) {
    printf("# mkccl-perf %s: %d rank(s) (%s), commit %s, seed %llu\n", args.op.c_str(), w.nranks, w.how.c_str(),
           doc.commit.c_str(), (unsigned long long)args.seed);
    printf("# dtype %s, redop %s, iters %d, warmup %d, check %d\n", dtypeName(args.dtype), redopName(args.redop),
           args.iters, args.warmup, args.check);
    printf("# baseline: %s\n", baseNote.c_str());
    for (int r = 0; r < w.nranks; ++r)
      printf("#   rank %2d  pid %7d  host %s  device %d [%s] %s\n", r, infos[r].pid, infos[r].host, infos[r].device,
             infos[r].busId, infos[r].name);
    printf("#\n");
    printHeader(args);
  }

  long long wrong = 0;
  env.emit = [&](const Result& mine) {
    Result r = combine(mine, w.nranks);
    wrong += r.wrong;
    if (w.rank == 0) {
      printRow(r);
      doc.results.push_back(r);
    }
  };
  std::vector<Result> rows;
  const OpInfo* op = findOp(args.op);
  int rc = op->fn(args, env, &rows);
  if (rc == 0)
    for (const Result& r : rows) env.emit(r);

  if (w.rank == 0 && !args.json.empty()) {
    if (!writeJson(args.json, doc, &err)) {
      fprintf(stderr, "mkccl-perf: %s\n", err.c_str());
      rc = rc ? rc : 1;
    } else {
      printf("# results written to %s\n", args.json.c_str());
    }
  }
  if (w.rank == 0 && wrong > 0) printf("# %lld wrong result element(s): FAILED\n", wrong);

  if (ncomm) env.nccl->commDestroy(ncomm);
  if (env.cublas) cublasDestroy(env.cublas);
  mkcclCommDestroy(env.comm);
  cudaStreamDestroy(env.stream);
  return rc != 0 ? 1 : (wrong > 0 ? 1 : 0);
}

std::string selfExe(const char* argv0) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = 0;
    return buf;
  }
  return argv0;
}

}  // namespace

int run(int argc, char** argv) {
  Args args;
  std::string err;
  const int st = parseArgs(argc, argv, &args, &err);
  if (st == kParseHelp) {
    printUsage(stdout);
    return 0;
  }
  if (st == kParseList) {
    for (const OpInfo& o : registeredOps()) printf("%s\n", o.name.c_str());
    return 0;
  }
  if (st != kParseOk) {
    fprintf(stderr, "mkccl-perf: %s\nrun 'mkccl-perf --help' for usage\n", err.c_str());
    return 2;
  }
  launch::World w;
  if (launch::worldInit(&w, &err) != 0) {
    fprintf(stderr, "mkccl-perf: %s\n", err.c_str());
    return 1;
  }
  if (args.gpus > 1 && w.how == "single") {
    const int ngpu = launch::visibleGpuCount();
    if (ngpu < args.gpus) {
      fprintf(stderr, "mkccl-perf: -g %d: only %d GPU(s) visible\n", args.gpus, ngpu);
      return 1;
    }
    std::vector<std::string> av(argv, argv + argc);
    av[0] = selfExe(argv[0]);
    launch::SpawnOptions opt;
    return launch::spawnLocal(args.gpus, av, opt);
  }
  if (args.gpus > 0 && args.gpus != w.nranks)
    fprintf(stderr, "mkccl-perf: -g %d ignored: launched by %s with %d rank(s)\n", args.gpus, w.how.c_str(), w.nranks);
  const int rc = runRank(args, w);
  launch::worldFinalize();
  return rc;
}

}  // namespace perf
}  // namespace mkccl
