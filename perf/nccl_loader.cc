// NCCL as a baseline, loaded at run time (see nccl_loader.h).
#include "nccl_loader.h"
#include <dlfcn.h>
#include <glob.h>
#include <stdlib.h>
#include <mutex>
#include <vector>

namespace mkccl {
namespace perf {
namespace {

// Where pip puts the NCCL wheel (nvidia-nccl-cu12/cu13), for the Pythons and prefixes we know of.
std::vector<std::string> wheelCandidates() {
  std::vector<std::string> pats;
  const char* home = getenv("HOME");
  const char* venv = getenv("VIRTUAL_ENV");
  const char* conda = getenv("CONDA_PREFIX");
  for (const char* prefix : {venv, conda})
    if (prefix && *prefix) pats.push_back(std::string(prefix) + "/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
  if (home && *home) pats.push_back(std::string(home) + "/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
  for (const char* p : {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                        "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages", "/opt/conda/lib/python3*/site-packages"})
    pats.push_back(std::string(p) + "/nvidia/nccl/lib/libnccl.so.2");
  std::vector<std::string> found;
  for (const std::string& pat : pats) {
    glob_t g;
    if (glob(pat.c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) found.push_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return found;
}

template <typename F>
bool sym(void* h, const char* name, F* out, std::string* why) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  if (!*out) *why = std::string("symbol ") + name + " not found";
  return *out != nullptr;
}

Nccl g_nccl;
const Nccl* g_loaded = nullptr;
std::string g_why;

void load(const std::string& explicitPath) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast on our machines
  std::vector<std::string> tries;
  if (!explicitPath.empty()) tries.push_back(explicitPath);
  else if (const char* e = getenv("MKCCL_PERF_NCCL_LIB"); e && *e) tries.push_back(e);
  else {
    tries.push_back("libnccl.so.2");
    for (const std::string& w : wheelCandidates()) tries.push_back(w);
  }
  void* h = nullptr;
  std::string errs;
  for (const std::string& p : tries) {
    h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) {
      g_nccl.path = p;
      break;
    }
    const char* e = dlerror();
    errs += "\n  " + p + ": " + (e ? e : "not loadable");
  }
  if (!h) {
    g_why = "libnccl.so.2 not found (use --nccl-lib PATH or MKCCL_PERF_NCCL_LIB):" + errs;
    return;
  }
  std::string why;
  Nccl& n = g_nccl;
  if (!sym(h, "ncclGetVersion", &n.getVersion, &why) || !sym(h, "ncclGetErrorString", &n.getErrorString, &why) ||
      !sym(h, "ncclGetUniqueId", &n.getUniqueId, &why) || !sym(h, "ncclCommInitRank", &n.commInitRank, &why) ||
      !sym(h, "ncclCommDestroy", &n.commDestroy, &why) || !sym(h, "ncclAllGather", &n.allGather, &why) ||
      !sym(h, "ncclReduceScatter", &n.reduceScatter, &why) || !sym(h, "ncclAllReduce", &n.allReduce, &why) ||
      !sym(h, "ncclSend", &n.send, &why) || !sym(h, "ncclRecv", &n.recv, &why) ||
      !sym(h, "ncclGroupStart", &n.groupStart, &why) || !sym(h, "ncclGroupEnd", &n.groupEnd, &why)) {
    g_why = g_nccl.path + ": " + why;
    dlclose(h);
    return;
  }
  if (n.getVersion(&n.version) != 0) n.version = 0;
  g_loaded = &g_nccl;
}

}  // namespace

const Nccl* loadNccl(const std::string& path, std::string* why) {
  static std::once_flag once;
  std::call_once(once, [&] { load(path); });
  if (!g_loaded) *why = g_why;
  return g_loaded;
}

}  // namespace perf
}  // namespace mkccl
