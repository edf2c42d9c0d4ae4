// mkccl-perf's command line (see args.h and printUsage).
#include "args.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <set>

namespace mkccl {
namespace perf {
namespace {

// Ops that take shapes even if registered with MKCCL_PERF_OP (the fused ops' names).
bool knownShapeOp(const std::string& op) {
  static const std::set<std::string> names = {"gemm", "ag_gemm", "gemm_rs", "gemm_ar"};
  return names.count(op) != 0;
}

bool parseInt(const std::string& s, long long lo, long long hi, long long* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(s.c_str(), &end, 10);
  if (errno || !end || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = strtod(s.c_str(), &end);
  if (errno || !end || *end) return false;
  *out = v;
  return true;
}

// Options that take a value (short and long names); the others are flags.
struct Opt {
  const char* shortName;
  const char* longName;
  bool takesValue;
};
const Opt kOpts[] = {
    {"-b", "--minbytes", true}, {"-e", "--maxbytes", true}, {"-f", "--stepfactor", true},
    {"-n", nullptr, true},      {nullptr, "--iters", true}, {"-w", "--warmup", true},
    {"-d", "--dtype", true},    {"-o", "--redop", true},       {"-c", "--check", true},
    {nullptr, "--json", true},  {"-m", nullptr, true},      {"-k", nullptr, true},
    {nullptr, "--shapes", true}, {"-g", "--gpus", true},    {nullptr, "--nccl-lib", true},
    {nullptr, "--seed", true},  {nullptr, "--no-baseline", false}, {"-h", "--help", false},
    {nullptr, "--list", false}, {"-G", "--cuda-graph", true}, {"-R", "--registered", true},
    {nullptr, "--rounds", true},
};

const Opt* findOpt(const std::string& name) {
  for (const Opt& o : kOpts)
    if ((o.shortName && name == o.shortName) || (o.longName && name == o.longName)) return &o;
  return nullptr;
}

}  // namespace

bool parseSize(const std::string& s, size_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || s[0] == '-') return false;
  unsigned shift = 0;
  std::string suf(end);
  if (suf == "" || suf == "B" || suf == "b") shift = 0;
  else if (suf == "K" || suf == "k" || suf == "KB" || suf == "KiB") shift = 10;
  else if (suf == "M" || suf == "m" || suf == "MB" || suf == "MiB") shift = 20;
  else if (suf == "G" || suf == "g" || suf == "GB" || suf == "GiB") shift = 30;
  else return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = (size_t)(v << shift);
  return true;
}

bool parseDtype(const std::string& s, mkcclDataType_t* out) {
  static const struct {
    const char* name;
    mkcclDataType_t t;
  } names[] = {{"bf16", mkcclBfloat16},     {"bfloat16", mkcclBfloat16}, {"fp16", mkcclFloat16},
               {"half", mkcclFloat16},      {"float16", mkcclFloat16},   {"fp32", mkcclFloat32},
               {"float", mkcclFloat32},     {"float32", mkcclFloat32},   {"fp64", mkcclFloat64},
               {"double", mkcclFloat64},    {"float64", mkcclFloat64},   {"int8", mkcclInt8},
               {"uint8", mkcclUint8},       {"int32", mkcclInt32},       {"uint32", mkcclUint32},
               {"int64", mkcclInt64},       {"uint64", mkcclUint64},     {"fp8e4m3", mkcclFloat8e4m3},
               {"fp8e5m2", mkcclFloat8e5m2}};
  for (const auto& n : names)
    if (s == n.name) {
      *out = n.t;
      return true;
    }
  return false;
}

bool parseRedop(const std::string& s, mkcclRedOp_t* out) {
  static const struct {
    const char* name;
    mkcclRedOp_t op;
  } names[] = {{"sum", mkcclSum}, {"prod", mkcclProd}, {"max", mkcclMax}, {"min", mkcclMin}, {"avg", mkcclAvg}};
  for (const auto& n : names)
    if (s == n.name) {
      *out = n.op;
      return true;
    }
  return false;
}

bool parseShapes(const std::string& s, std::vector<Shape>* out) {
  std::vector<Shape> shapes;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(pos, comma - pos);
    size_t x1 = item.find('x'), x2 = x1 == std::string::npos ? x1 : item.find('x', x1 + 1);
    if (x1 == std::string::npos || x2 == std::string::npos) return false;
    long long m, n, k;
    if (!parseInt(item.substr(0, x1), 1, 1ll << 40, &m) || !parseInt(item.substr(x1 + 1, x2 - x1 - 1), 1, 1ll << 40, &n) ||
        !parseInt(item.substr(x2 + 1), 1, 1ll << 40, &k))
      return false;
    Shape sh;
    sh.m = (size_t)m;
    sh.n = (size_t)n;
    sh.k = (size_t)k;
    shapes.push_back(sh);
    pos = comma + 1;
  }
  if (shapes.empty()) return false;
  *out = shapes;
  return true;
}

void printUsage(FILE* f) {
  fprintf(f,
          "usage: mkccl-perf <op> [options]\n"
          "\n"
          "Measures an op of libmkccl beside its baseline (NCCL, loaded at run time; cuBLAS for GEMMs),\n"
          "checks every result, prints a table like nccl-tests and optionally writes JSON.\n"
          "One process per GPU: run it under mpirun (mpirun -np 4 mkccl-perf allreduce), under mkccl-run,\n"
          "or let it launch itself (mkccl-perf allreduce -g 4).\n"
          "\n"
          "ops:\n");
  for (const OpInfo& op : registeredOps())
    fprintf(f, "  %-14s %s%s\n", op.name.c_str(), op.help.c_str(),
            (op.shapeOp || knownShapeOp(op.name)) ? " [shapes]" : "");
  fprintf(f,
          "\n"
          "size ops (collectives; sizes are total bytes as in nccl-tests: the gathered output of\n"
          "allgather, the input of reducescatter and alltoall, the buffer of allreduce):\n"
          "  -b, --minbytes SIZE    smallest size (default 8); SIZE takes K, M, G suffixes\n"
          "  -e, --maxbytes SIZE    largest size (default 128M)\n"
          "  -f, --stepfactor F     multiply the size by F each step (default 2; > 1)\n"
          "  -n, --iters N          timed iterations per size (default 20)\n"
          "shape ops ([shapes] above; here -n is N, so iterations are --iters):\n"
          "  -m M -n N -k K         one shape\n"
          "  --shapes \"MxNxK,...\"   a list of shapes\n"
          "  --iters N              timed iterations per shape (default 20)\n"
          "common:\n"
          "  -w, --warmup N         untimed iterations first (default 5)\n"
          "  -d, --dtype T          bf16 (default), fp16, fp32, fp64, int8, uint8, int32, uint32,\n"
          "                         int64, uint64, fp8e4m3, fp8e5m2 (what the op supports)\n"
          "  -o, --redop REDOP      sum (default), prod, max, min, avg (reductions)\n"
          "  -c, --check 0|1        check every result against a reference (default 1); #wrong column\n"
          "  --json FILE            write the results as JSON (rank 0)\n"
          "  -g, --gpus N           launch N processes on this host, one per GPU (ignored when\n"
          "                         already launched by mpirun or mkccl-run with N ranks)\n"
          "  --no-baseline          do not run the baseline\n"
          "  --nccl-lib PATH        libnccl.so.2 to load (else $MKCCL_PERF_NCCL_LIB, else the\n"
          "                         loader's search path, then the pip nvidia-nccl-cu* wheels)\n"
          "  --seed S               seed of the random inputs (default: fresh each run)\n"
          "  -G, --cuda-graph N     also time N calls captured in one CUDA graph and replayed\n"
          "                         (graph_us: per call; nccl-tests' -G); 0: off (default)\n"
          "  -R, --registered 0|1   collectives: also time buffers from mkcclMemAlloc registered\n"
          "                         with mkcclCommRegister (reg_us; reg_speedup = time / reg_us,\n"
          "                         > 1: registered faster; with -G also reg_graph_speedup); 0: off.\n"
          "                         ag_gemm: the call with a gathered A, unregistered (reg_base_us)\n"
          "                         and registered (reg_us); gemm_ar, gemm_rs: C registered (reg_us)\n"
          "  --rounds N             shape ops: time ours and every baseline in N alternating\n"
          "                         blocks of --iters/N runs each, medians over all (default 4),\n"
          "                         so that the GPU's clock drift over a run weighs on all alike;\n"
          "                         1: each timed in one block, one after another\n"
          "  --list                 print the op names, one per line\n"
          "  -h, --help             this text\n"
          "\n"
          "Time is the max over ranks of each rank's median (CUDA events, after warm-up, inputs rotated\n"
          "over several buffers). algbw = size/time; busbw = algbw x (n-1)/n (allgather, reducescatter,\n"
          "alltoall) or 2(n-1)/n (allreduce). speedup = baseline time / our time. NVLink SHARP\n"
          "(multicast) is disabled in the baseline (NCCL_NVLS_ENABLE=0). Exit status: 0 ok, 1 run\n"
          "failure or wrong results, 2 bad arguments.\n");
}

int parseArgs(int argc, char** argv, Args* a, std::string* err) {
  *a = Args();
  std::vector<std::string> tok(argv + 1, argv + argc);
  // The op first: it decides what -n means.
  for (size_t i = 0; i < tok.size(); ++i) {
    const std::string& t = tok[i];
    if (t == "-h" || t == "--help") return kParseHelp;
    if (t == "--list") return kParseList;
    if (t.size() > 1 && t[0] == '-') {
      const Opt* o = findOpt(t.substr(0, t.find('=')));
      if (o && o->takesValue && t.find('=') == std::string::npos) ++i;
      continue;
    }
    if (a->op.empty()) a->op = t;
    else {
      *err = "unexpected argument '" + t + "' (the op is '" + a->op + "')";
      return kParseError;
    }
  }
  if (a->op.empty()) {
    *err = "no op given";
    return kParseError;
  }
  const OpInfo* info = findOp(a->op);
  if (!info) {
    *err = "unknown op '" + a->op + "'; ops:";
    for (const OpInfo& o : registeredOps()) *err += " " + o.name;
    return kParseError;
  }
  a->shapeOp = info->shapeOp || knownShapeOp(a->op);

  bool sizesGiven = false, mGiven = false, nGiven = false, kGiven = false;
  Shape one;
  for (size_t i = 0; i < tok.size(); ++i) {
    std::string name = tok[i], val;
    if (name.size() < 2 || name[0] != '-') continue;  // the op
    const size_t eq = name.find('=');
    if (eq != std::string::npos && name.compare(0, 2, "--") == 0) {
      val = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Opt* o = findOpt(name);
    if (!o) {
      *err = "unknown option '" + name + "'";
      return kParseError;
    }
    if (o->takesValue && eq == std::string::npos) {
      if (i + 1 >= tok.size()) {
        *err = "option " + name + " needs a value";
        return kParseError;
      }
      val = tok[++i];
    }
    long long v = 0;
    auto bad = [&](const char* what) {
      *err = "option " + name + " '" + val + "': " + what;
      return kParseError;
    };
    if (name == "-b" || name == "--minbytes") {
      if (!parseSize(val, &a->minBytes) || a->minBytes == 0) return bad("expected a size >= 1 (8, 4K, 16M, 1G)");
      sizesGiven = true;
    } else if (name == "-e" || name == "--maxbytes") {
      if (!parseSize(val, &a->maxBytes) || a->maxBytes == 0) return bad("expected a size >= 1 (8, 4K, 16M, 1G)");
      sizesGiven = true;
    } else if (name == "-f" || name == "--stepfactor") {
      if (!parseDouble(val, &a->factor) || !(a->factor > 1.0) || a->factor > 1e6) return bad("expected a number > 1");
      sizesGiven = true;
    } else if (name == "-n" && a->shapeOp) {
      if (!parseInt(val, 1, 1ll << 40, &v)) return bad("expected N >= 1");
      one.n = (size_t)v;
      nGiven = true;
    } else if (name == "-n" || name == "--iters") {
      if (!parseInt(val, 1, 1000000, &v)) return bad("expected an iteration count in [1, 1000000]");
      a->iters = (int)v;
    } else if (name == "-w" || name == "--warmup") {
      if (!parseInt(val, 0, 1000000, &v)) return bad("expected a count in [0, 1000000]");
      a->warmup = (int)v;
    } else if (name == "-d" || name == "--dtype") {
      if (!parseDtype(val, &a->dtype)) return bad("unknown data type (bf16, fp16, fp32, fp64, int8, ...)");
    } else if (name == "-o" || name == "--redop") {
      if (!parseRedop(val, &a->redop)) return bad("unknown reduction (sum, prod, max, min, avg)");
    } else if (name == "-c" || name == "--check") {
      if (!parseInt(val, 0, 1, &v)) return bad("expected 0 or 1");
      a->check = (int)v;
    } else if (name == "--json") {
      if (val.empty()) return bad("expected a file name");
      a->json = val;
    } else if (name == "-m") {
      if (!parseInt(val, 1, 1ll << 40, &v)) return bad("expected M >= 1");
      one.m = (size_t)v;
      mGiven = true;
    } else if (name == "-k") {
      if (!parseInt(val, 1, 1ll << 40, &v)) return bad("expected K >= 1");
      one.k = (size_t)v;
      kGiven = true;
    } else if (name == "--shapes") {
      if (!parseShapes(val, &a->shapes)) return bad("expected \"MxNxK[,MxNxK...]\" with positive integers");
    } else if (name == "-g" || name == "--gpus") {
      if (!parseInt(val, 1, 64, &v)) return bad("expected a GPU count in [1, 64]");
      a->gpus = (int)v;
    } else if (name == "--nccl-lib") {
      if (val.empty()) return bad("expected a path");
      a->ncclLib = val;
    } else if (name == "--seed") {
      if (!parseInt(val, 1, (1ll << 62), &v)) return bad("expected a seed >= 1");
      a->seed = (uint64_t)v;
    } else if (name == "-G" || name == "--cuda-graph") {
      if (!parseInt(val, 0, 10000, &v)) return bad("expected a count of calls per graph in [0, 10000]");
      a->graphCalls = (int)v;
    } else if (name == "-R" || name == "--registered") {
      if (!parseInt(val, 0, 1, &v)) return bad("expected 0 or 1");
      a->registered = (int)v;
    } else if (name == "--rounds") {
      if (!parseInt(val, 1, 1000, &v)) return bad("expected a round count in [1, 1000]");
      a->rounds = (int)v;
    } else if (name == "--no-baseline") {
      if (!val.empty()) return bad("takes no value");
      a->baseline = false;
    }
  }

  if (a->shapeOp) {
    if (sizesGiven) {
      *err = "op '" + a->op + "' takes shapes (-m/-n/-k or --shapes), not -b/-e/-f";
      return kParseError;
    }
    if (mGiven || nGiven || kGiven) {
      if (!(mGiven && nGiven && kGiven)) {
        *err = "give all of -m, -n and -k (or --shapes)";
        return kParseError;
      }
      if (!a->shapes.empty()) {
        *err = "give either -m/-n/-k or --shapes, not both";
        return kParseError;
      }
      a->shapes.push_back(one);
    }
  } else {
    if (mGiven || kGiven || !a->shapes.empty()) {
      *err = "op '" + a->op + "' is swept over sizes (-b/-e/-f); -m/-k/--shapes are for shape ops";
      return kParseError;
    }
    if (a->maxBytes < a->minBytes) {
      *err = "-e (" + std::to_string(a->maxBytes) + ") is smaller than -b (" + std::to_string(a->minBytes) + ")";
      return kParseError;
    }
  }
  return kParseOk;
}

}  // namespace perf
}  // namespace mkccl
