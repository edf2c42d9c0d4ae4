#include "tmp_dir.h"
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fstream>
#include <sstream>

namespace mkccl {
namespace test {
namespace {

std::string gDir;

int removeOne(const char* path, const struct stat*, int, struct FTW*) { return remove(path); }
void removeDir() {
  if (!gDir.empty() && !getenv("MKCCL_TEST_KEEP")) nftw(gDir.c_str(), removeOne, 16, FTW_DEPTH | FTW_PHYS);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

const std::string& scratchDir() {
  if (gDir.empty()) {
    const char* t = getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/mkccl-topo-test.XXXXXX";
    if (!mkdtemp(&tmpl[0])) {
      perror("mkdtemp");
      tmpl = ".";
    }
    gDir = tmpl;
    atexit(removeDir);
  }
  return gDir;
}

std::string writeScratch(const std::string& name, const std::string& text) {
  std::string path = scratchDir() + "/" + name;
  std::ofstream f(path);
  f << text;
  return path;
}

CommandResult runCommand(const std::string& cmd) {
  static int n = 0;
  std::string o = scratchDir() + "/cmd" + std::to_string(n) + ".out", e = scratchDir() + "/cmd" + std::to_string(n) + ".err";
  n++;
  CommandResult r;
  int st = system((cmd + " >" + o + " 2>" + e).c_str());
  if (st != -1 && WIFEXITED(st)) r.status = WEXITSTATUS(st);
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

}  // namespace test
}  // namespace mkccl
