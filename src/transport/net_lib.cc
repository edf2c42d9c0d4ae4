// Loading the network libraries with the process's signal handlers kept (see net_lib.h).
#include "transport/net_lib.h"
#include <dlfcn.h>
#include <string.h>
#include "base/log.h"

namespace mkccl {
namespace net {
namespace {

bool catchable(int sig) { return sig != SIGKILL && sig != SIGSTOP; }

bool same(const struct sigaction& a, const struct sigaction& b) {
  return a.sa_handler == b.sa_handler && a.sa_flags == b.sa_flags;  // sa_handler aliases sa_sigaction
}

}  // namespace

SignalHandlersKept::SignalHandlersKept(const char* during) : during_(during) {
  for (int s = 1; s < NSIG; s++) have_[s] = catchable(s) && sigaction(s, nullptr, &saved_[s]) == 0;
}

SignalHandlersKept::~SignalHandlersKept() {
  for (int s = 1; s < NSIG; s++) {
    if (!have_[s]) continue;
    struct sigaction now;
    if (sigaction(s, nullptr, &now) != 0 || same(now, saved_[s])) continue;
    sigaction(s, &saved_[s], nullptr);
    MKCCL_INFO("net: %s installed a handler of signal %d (%s): the process's own is restored", during_, s,
               strsignal(s));
  }
}

void* netLibOpen(const char* const* names, int count, std::string* why) {
  std::string tried;
  for (int i = 0; i < count; i++) {
    SignalHandlersKept keep(names[i]);
    if (void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) {
      MKCCL_INFO("net: loaded %s", names[i]);
      return h;
    }
    const char* e = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (e ? e : names[i]);
  }
  *why = "cannot load " + std::string(names[0]) + " (" + tried + ")";
  return nullptr;
}

void* netLibSym(void* lib, const char* name, std::string* why) {
  void* p = dlsym(lib, name);
  if (!p) *why = std::string("the loaded library lacks ") + name;
  return p;
}

}  // namespace net
}  // namespace mkccl
